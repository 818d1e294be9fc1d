package image

import (
	"net/netip"

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
