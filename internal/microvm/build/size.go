package build

import (
	"fmt"

	units "github.com/docker/go-units"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/lazyregexp"
)

// sizeSyntax is what ParseSize accepts: digits, an optional fraction, an
// optional unit letter, optional "i" and "B". Checked before go-units so
// that spaces and signs are refused with the same message.
var sizeSyntax = lazyregexp.New(`^[0-9]+(\.[0-9]+)?([kKmMgGtT]([iI]?[bB])?|[bB])?$`)

// ParseSize parses a size in binary units, as Docker's memory flags do:
// 1073741824, 512M, 512m, 1G, 1GB and 1GiB (all 2^30). Errors are of class
// errdefs.ErrInvalid.
func ParseSize(s string) (int64, error) {
	bad := errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("size %q must be a number of bytes or a size such as 512M, 1G or 1GiB", s))
	if !sizeSyntax.MatchString(s) {
		return 0, bad
	}
	v, err := units.RAMInBytes(s)
	if err != nil || v < 0 {
		return 0, bad
	}
	return v, nil
}

// formatSize writes a byte count for people: 512 B, 412 KiB, 7.9 MiB, 1.8 GiB.
func formatSize(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v, i := float64(n)/unit, 0
	for v >= unit && i < 4 {
		v /= unit
		i++
	}
	suffix := []string{"KiB", "MiB", "GiB", "TiB", "PiB"}[i]
	if v >= 100 || v == float64(int64(v)) {
		return fmt.Sprintf("%.0f %s", v, suffix)
	}
	return fmt.Sprintf("%.1f %s", v, suffix)
}
