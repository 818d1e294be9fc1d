package guest

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/hutchsandbox/hutch/internal/errdefs"
)

// keptCapabilities is every capability commands keep in the guest; the
// rest leave the bounding set. It is the set image mode keeps, and
// mirrors KeptCapabilities in internal/sandbox/image/ensure.go (names
// there, numbers here; that package is the Docker side of hutch): change both
// together. Root in the guest may install packages and run ordinary
// servers, and nothing more: no mount (a read-only file stays read-only),
// no module loading, no raw sockets, no changing capability sets.
var keptCapabilities = []capability{
	{"CHOWN", unix.CAP_CHOWN},
	{"DAC_OVERRIDE", unix.CAP_DAC_OVERRIDE},
	{"FOWNER", unix.CAP_FOWNER},
	{"FSETID", unix.CAP_FSETID},
	{"SETUID", unix.CAP_SETUID},
	{"SETGID", unix.CAP_SETGID},
	{"KILL", unix.CAP_KILL},
	{"NET_BIND_SERVICE", unix.CAP_NET_BIND_SERVICE},
}

// capability is a capability's name (without CAP_) and number.
type capability struct {
	name string
	num  int
}

// capabilitiesToDrop returns every capability from 0 to last (the
// kernel's cap_last_cap) that is not kept, ascending.
func capabilitiesToDrop(last int) []int {
	var drop []int
	for c := 0; c <= last; c++ {
		if !slices.ContainsFunc(keptCapabilities, func(k capability) bool { return k.num == c }) {
			drop = append(drop, c)
		}
	}
	return drop
}

// keptMask is the bounding set left after the drop, as a bit mask (the
// CapBnd line of /proc/<pid>/status).
func keptMask() uint64 {
	var m uint64
	for _, k := range keptCapabilities {
		m |= 1 << k.num
	}
	return m
}

// parseCapLastCap reads /proc/sys/kernel/cap_last_cap.
func parseCapLastCap(b []byte) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || n < unix.CAP_NET_BIND_SERVICE || n > 63 {
		return 0, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("cap_last_cap is not a capability number: %q", b))
	}
	return n, nil
}
