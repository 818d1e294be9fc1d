package benchkit

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/hutchsandbox/hutch/internal/engine"
)

// Header is the top of a report: which bench, on which machine, when, and
// the command that ran it, since a ratio means little without them and a
// report is often read far from where it was made.
type Header struct {
	// Bench is the package path under the module root ("bench/bridge"):
	// the first line starts "hutch <Bench>", the second is
	// "command: go run ./<Bench> <args>".
	Bench string
	// Engine, when set, is named after the kernel ("engine docker 27.5.1,
	// API 1.47"): the Docker benches measure it as much as hutch.
	Engine *engine.Engine
	// Detail adds the CPU model after nproc and GOOS/GOARCH after the Go
	// version.
	Detail bool
}

// Print writes the header's two lines to w.
func (h Header) Print(w io.Writer) {
	host, _ := os.Hostname()
	kernel, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	nproc := fmt.Sprintf("nproc %d", runtime.NumCPU())
	goVersion := runtime.Version()
	if h.Detail {
		nproc += " (" + cpuModel() + ")"
		goVersion += " " + runtime.GOOS + "/" + runtime.GOARCH
	}
	parts := []string{"hutch " + h.Bench, host, nproc, "Linux " + strings.TrimSpace(string(kernel))}
	if h.Engine != nil {
		parts = append(parts, fmt.Sprintf("engine %s %s, API %s", h.Engine.Flavor, h.Engine.ServerVersion, h.Engine.APIVersion))
	}
	parts = append(parts, goVersion, time.Now().UTC().Format("2006-01-02 15:04 UTC"))
	Println(w, strings.Join(parts, " · "))
	Printf(w, "command: go run ./%s %s\n", h.Bench, strings.Join(os.Args[1:], " "))
}

// cpuModel is the first "model name" of /proc/cpuinfo, "?" without one.
func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return "?"
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "?"
}
