package service

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/docker/go-units"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/events"
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
	stopped, err := de.EnforceDisk(ctx, diskCeiling(rs))
	for _, k := range stopped {
		s.Record(ctx, events.RuntimeStopped, k, "it held more than the disk ceiling")
	}
	return stopped, err
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
	return recording{c.ManagedRuntime, c.svc}.Boost(ctx, key, l)
}

func (c ceilinged) SetLimits(ctx context.Context, key string, l sandbox.Limits) (sandbox.Status, error) {
	if err := c.check(l); err != nil {
		return sandbox.Status{}, err
	}
	return recording{c.ManagedRuntime, c.svc}.SetLimits(ctx, key, l)
}

func (c ceilinged) Stop(ctx context.Context, key string) error {
	return recording{c.ManagedRuntime, c.svc}.Stop(ctx, key)
}

func (c ceilinged) Remove(ctx context.Context, key string) error {
	return recording{c.ManagedRuntime, c.svc}.Remove(ctx, key)
}

func (c ceilinged) StopIdle(ctx context.Context, idle time.Duration) ([]string, error) {
	return recording{c.ManagedRuntime, c.svc}.StopIdle(ctx, idle)
}

// Recording returns lc with its changes (stop, remove, boost, limits,
// idle stops) recorded in the event log, as ManagedFor's lifecycles are:
// for a lifecycle a test puts in place of the service's.
func (s *Service) Recording(lc sandbox.Lifecycle) sandbox.Lifecycle { return recording{lc, s} }

// recording records the changes of the lifecycle it wraps.
type recording struct {
	sandbox.Lifecycle
	svc *Service
}

func (r recording) Boost(ctx context.Context, key string, l sandbox.Limits) (sandbox.Status, error) {
	st, err := r.Lifecycle.Boost(ctx, key, l)
	if err == nil {
		r.svc.Record(ctx, events.LimitsBoost, key, limitsDetail(st.Limits))
	}
	return st, err
}

func (r recording) SetLimits(ctx context.Context, key string, l sandbox.Limits) (sandbox.Status, error) {
	st, err := r.Lifecycle.SetLimits(ctx, key, l)
	if err == nil {
		detail := limitsDetail(l)
		if st.LimitsApplied != "" {
			detail += " (" + st.LimitsApplied + ")"
		}
		r.svc.Record(ctx, events.LimitsSet, key, detail)
	}
	return st, err
}

func (r recording) Stop(ctx context.Context, key string) error {
	err := r.Lifecycle.Stop(ctx, key)
	if err == nil {
		r.svc.Record(ctx, events.RuntimeStopped, key, "")
	}
	return err
}

func (r recording) Remove(ctx context.Context, key string) error {
	err := r.Lifecycle.Remove(ctx, key)
	if err == nil {
		r.svc.Record(ctx, events.RuntimeRemoved, key, "")
	}
	return err
}

func (r recording) StopIdle(ctx context.Context, idle time.Duration) ([]string, error) {
	stopped, err := r.Lifecycle.StopIdle(ctx, idle)
	for _, k := range stopped {
		r.svc.Record(ctx, events.RuntimeStopped, k, "idle for "+idle.String())
	}
	return stopped, err
}
