package image

import (
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"time"

	"github.com/hutchsandbox/hutch/internal/sandbox"
)

// BeforeStart makes f run between the pinning of a start's mount sources
// and the start, until the test ends: where a racing runtime would swap
// a source.
func BeforeStart(f func(sandbox.Spec)) (restore func()) {
	testHookBeforeStart.Store(&f)
	return func() { testHookBeforeStart.Store(nil) }
}

// FirstSubnet is the subnet of pool an office's network is tried on first.
func FirstSubnet(pool netip.Prefix, officeKey string) netip.Prefix {
	p, err := subnet(pool, subnetIndex(officeKey))
	if err != nil {
		panic(err)
	}
	return p
}

// DetachPool takes the warm pool's mounts off the host: a test's run
// dir is removed with them gone, never through them.
func DetachPool(runDir string) error {
	entries, _ := os.ReadDir(filepath.Join(runDir, "pool"))
	var errs []error
	for _, e := range entries {
		errs = append(errs, memberPoint(runDir, e.Name()).Detach())
	}
	return errors.Join(errs...)
}

// MemberSocketDir is where a warm pool member's agent listens.
func MemberSocketDir(runDir, member string) string { return memberSocketDir(runDir, member) }

// LabelPoolMember is the label naming a container's warm pool member.
const LabelPoolMember = labelPoolMember

// PauseAfter sets how long a ready member runs before a fill pauses it,
// until the test ends.
func PauseAfter(d time.Duration) (restore func()) {
	old := poolPauseAfter
	poolPauseAfter = d
	return func() { poolPauseAfter = old }
}
