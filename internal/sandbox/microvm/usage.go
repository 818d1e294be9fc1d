package microvm

import (
	"context"
	"fmt"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/sandbox"
)

var _ sandbox.UsageReader = (*Runtime)(nil)

// Usage reads the resource use of the cgroup commands run in inside the
// office's microVM, from its agent. QEMU's own use, seen from the host,
// would count the guest kernel and its page cache too. It runs no command
// and records no use, so it keeps no VM from its idle stop.
func (r *Runtime) Usage(ctx context.Context, key string) (sandbox.Usage, error) {
	notRunning := errdefs.New(errdefs.ErrNotFound, fmt.Sprintf("No microVM runs for office %s.", key))
	s, ok := r.sessions.Lookup(key)
	if !ok {
		return sandbox.Usage{}, notRunning
	}
	if !s.TryLock() {
		return sandbox.Usage{}, errdefs.New(errdefs.ErrUnavailable, "The microVM is being provisioned; its use is read next time.")
	}
	v := s.vm
	s.Unlock()
	if v == nil || !v.alive() {
		return sandbox.Usage{}, notRunning
	}
	u, err := v.client.Usage(ctx)
	if err != nil {
		if !v.alive() {
			return sandbox.Usage{}, notRunning // stopped while it was read
		}
		return sandbox.Usage{}, err
	}
	return u.Reading(fmt.Sprintf("%d@%d", v.qemu.Process.Pid, v.started.UnixNano())), nil
}
