package sandbox

import (
	"strconv"
	"time"
)

// formatSeconds renders a duration as whole seconds when it is one, else
// with the fraction needed ("1.5"), never in scientific notation.
func formatSeconds(d time.Duration) string {
	if d%time.Second == 0 {
		return strconv.FormatInt(int64(d/time.Second), 10)
	}
	return strconv.FormatFloat(d.Seconds(), 'f', -1, 64)
}

// plural renders n with its unit, singular only for exactly one:
// "1 second", "1.5 seconds", "2 CPUs".
func plural(n, one, many string) string {
	if n == "1" {
		return n + " " + one
	}
	return n + " " + many
}

// CPUCount renders a CPU limit for people: "1 CPU", "0.5 CPUs", "2 CPUs",
// and "unlimited CPUs" for 0, which is what a 0 limit means.
func CPUCount(cpus float64) string {
	if cpus <= 0 {
		return "unlimited CPUs"
	}
	return plural(strconv.FormatFloat(cpus, 'f', -1, 64), "CPU", "CPUs")
}

// ByteCount renders n in the largest binary unit that keeps it readable.
func ByteCount(n int64) string {
	const unit = 1024
	if n < unit {
		return strconv.FormatInt(n, 10) + " B"
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return strconv.FormatFloat(float64(n)/float64(div), 'f', 1, 64) + " " + string("KMGTPE"[exp]) + "iB"
}
