package box

import (
	"context"
	"net"

	"github.com/hutchsandbox/hutch/internal/project"
)

// SetEgressDial makes the egress proxy of b dial with dial: tests map
// names to a local server, which the real dialer would refuse for its
// private address.
func SetEgressDial(b *Box, dial func(ctx context.Context, network, addr string) (net.Conn, error)) {
	b.egressDial = dial
}

// BeforeStart makes f run between the pinning of a start's mount sources
// and the start, until restore: where a racing sandbox would swap one.
func BeforeStart(f func(project.Spec)) (restore func()) {
	testHookBeforeStart.Store(&f)
	return func() { testHookBeforeStart.Store(nil) }
}
