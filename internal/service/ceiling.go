package service

import (
	"context"
	"fmt"
	"strconv"

	"github.com/docker/go-units"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/metrics"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/sandbox/managed"
	"github.com/hutchsandbox/hutch/internal/settings"
)

// Ceiling is the most a boost or temporary limits may give a runtime,
// read at each call: the sandbox.ceiling.* settings, else the boost size
// (CPUs, memory) and the default process count. The agent's sandbox
// tool and /sandbox limits come from inside the conversation; without
// a ceiling they would hand a runtime most of the host.
func (s *Service) Ceiling() (sandbox.Limits, error) {
	rs, err := settings.LoadRuntime(settings.GlobalPath(s.layout.StateDir))
	if err != nil {
		return sandbox.Limits{}, err
	}
	boost := sandbox.Limits{CPUs: rs.BoostCPUs, MemoryBytes: rs.BoostMemoryBytes}.Over(managed.DefaultBoost)
	base := sandbox.Limits{Pids: rs.Pids}.Over(managed.DefaultLimits)
	return sandbox.Limits{CPUs: rs.CeilingCPUs, MemoryBytes: rs.CeilingMemoryBytes, Pids: rs.CeilingPids}.
		Over(sandbox.Limits{CPUs: boost.CPUs, MemoryBytes: boost.MemoryBytes, Pids: base.Pids}), nil
}

// diskCeiling is sandbox.ceiling.disk, else the default.
func diskCeiling(rs settings.Runtime) int64 {
	if rs.CeilingDiskBytes > 0 {
		return rs.CeilingDiskBytes
	}
	return managed.DefaultDiskCeiling
}

// EnforceDisk stops the runtimes of mode that hold more than the disk
// ceiling outside their offices and mounts, where hutch counts it
// (sandbox.DiskEnforcer); it returns their keys. Other modes: nothing.
func (s *Service) EnforceDisk(ctx context.Context, mode sandbox.Mode) ([]string, error) {
	rt, err := s.managedFor(ctx, mode)
	if err != nil {
		return nil, err
	}
	de, ok := rt.(sandbox.DiskEnforcer)
	if !ok {
		return nil, nil
	}
	rs, err := settings.LoadRuntime(settings.GlobalPath(s.layout.StateDir))
	if err != nil {
		return nil, err
	}
	return de.EnforceDisk(ctx, diskCeiling(rs))
}

// checkCeiling refuses limits with a field above ceiling's, naming the
// setting that would allow it. Errors are of class errdefs.ErrInvalid.
func checkCeiling(l, ceiling sandbox.Limits) error {
	over := func(what, asked, most, key string) error {
		return errdefs.New(errdefs.ErrInvalid, fmt.Sprintf(
			"%s %s is above this installation's ceiling of %s; nothing was changed. The operator can raise it: hutch sandbox settings %s <value>", what, asked, most, key))
	}
	switch {
	case l.CPUs > ceiling.CPUs:
		return over("CPUs", strconv.FormatFloat(l.CPUs, 'f', -1, 64), strconv.FormatFloat(ceiling.CPUs, 'f', -1, 64), "sandbox.ceiling.cpus")
	case l.MemoryBytes > ceiling.MemoryBytes:
		return over("Memory", units.BytesSize(float64(l.MemoryBytes)), units.BytesSize(float64(ceiling.MemoryBytes)), "sandbox.ceiling.memory")
	case l.Pids > ceiling.Pids:
		return over("Processes", strconv.FormatInt(l.Pids, 10), strconv.FormatInt(ceiling.Pids, 10), "sandbox.ceiling.pids")
	}
	return nil
}

// ceilinged is a managed mode's lifecycle whose boosts and temporary
// limits stay under the ceiling, whoever asks (chat, the agent's tool,
// the API, the CLI): one place, so no caller can forget it.
type ceilinged struct {
	ManagedRuntime
	svc *Service
}

func (c ceilinged) check(l sandbox.Limits) error {
	ceiling, err := c.svc.Ceiling()
	if err != nil {
		return err
	}
	return withReason(metrics.ReasonCeiling, checkCeiling(l, ceiling))
}

func (c ceilinged) Boost(ctx context.Context, key string, l sandbox.Limits) (sandbox.Status, error) {
	if err := c.check(l); err != nil {
		return sandbox.Status{}, err
	}
	return c.ManagedRuntime.Boost(ctx, key, l)
}

func (c ceilinged) SetLimits(ctx context.Context, key string, l sandbox.Limits) (sandbox.Status, error) {
	if err := c.check(l); err != nil {
		return sandbox.Status{}, err
	}
	return c.ManagedRuntime.SetLimits(ctx, key, l)
}
