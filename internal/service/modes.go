package service

import (
	"context"

	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/sandbox/cloudflare"
	"github.com/hutchsandbox/hutch/internal/sandbox/container"
	"github.com/hutchsandbox/hutch/internal/sandbox/host"
)

// The modes of this build. A mode is declared in two halves: the pure
// one in package sandbox (its kind, how its name parses, the
// capabilities policy reads before anything runs) and the effectful one
// here, in this one table: how its runtime is made. What else a mode can
// do (a startup check, reconcile, lifecycle, usage) its runtime says by
// the optional interfaces of package sandbox, found by assertion; nothing
// outside the mode packages names a concrete runtime type.
//
// A test checks that every kind of sandbox.Kinds has an entry.
var modes = map[sandbox.Kind]func(s *Service, ctx context.Context, m sandbox.Mode) (sandbox.Runtime, error){
	sandbox.KindHost: func(s *Service, _ context.Context, _ sandbox.Mode) (sandbox.Runtime, error) {
		return host.New(s.log.With("mode", "host")), nil
	},
	sandbox.KindContainer: func(s *Service, ctx context.Context, m sandbox.Mode) (sandbox.Runtime, error) {
		e, err := s.engineLocked(ctx)
		if err != nil {
			return nil, err
		}
		bin, err := s.agentLocked()
		if err != nil {
			return nil, err
		}
		return container.New(container.Config{Engine: e, Name: m.Target, Agent: bin, Workspace: s.layout.Workspace, Log: s.log})
	},
	// image: and kube: share one runtime per process, whose sessions
	// every image reference shares.
	sandbox.KindImage: func(s *Service, ctx context.Context, m sandbox.Mode) (sandbox.Runtime, error) {
		base, err := s.managedLocked(ctx)
		if err != nil {
			return nil, err
		}
		return base.WithImage(m.Target), nil
	},
	sandbox.KindCloudflare: func(s *Service, _ context.Context, m sandbox.Mode) (sandbox.Runtime, error) {
		cfg, err := cloudflare.ConfigFromEnv(m.Target, s.getenv)
		if err != nil {
			return nil, err
		}
		cfg.Log = s.log
		return cloudflare.New(cfg)
	},
	sandbox.KindGondolin: func(s *Service, _ context.Context, _ sandbox.Mode) (sandbox.Runtime, error) {
		return s.microvmLocked()
	},
	sandbox.KindKube: func(s *Service, _ context.Context, m sandbox.Mode) (sandbox.Runtime, error) {
		base, err := s.kubeLocked()
		if err != nil {
			return nil, err
		}
		return base.WithImage(m.Target), nil
	},
}

// Runnable reports whether this build can run commands in mode m.
func Runnable(m sandbox.Mode) bool { return modes[m.Kind] != nil }

// runtime returns the Runtime of a mode (made once per process), or the
// refusal for a mode this build cannot run.
func (s *Service) runtime(ctx context.Context, m sandbox.Mode) (sandbox.Runtime, error) {
	s.rt.mu.Lock()
	defer s.rt.mu.Unlock()
	if rt, ok := s.rt.byMode[m]; ok {
		return rt, nil
	}
	newRuntime := modes[m.Kind]
	if newRuntime == nil {
		return nil, sandbox.NotImplemented(m)
	}
	rt, err := newRuntime(s, ctx, m)
	if err != nil {
		return nil, err
	}
	if s.rt.byMode == nil {
		s.rt.byMode = map[sandbox.Mode]sandbox.Runtime{}
	}
	s.rt.byMode[m] = rt
	return rt, nil
}

// SetRuntime makes rt the runtime of mode m in this service, in place of
// the one its entry would make, and, when rt manages its runtimes (a
// ManagedRuntime), the lifecycle of m's kind: the tests of what sits
// above the modes put sandbox/mock there, so they run without an engine
// where the engine is not the thing under test.
func (s *Service) SetRuntime(m sandbox.Mode, rt sandbox.Runtime) {
	s.rt.mu.Lock()
	defer s.rt.mu.Unlock()
	if s.rt.byMode == nil {
		s.rt.byMode = map[sandbox.Mode]sandbox.Runtime{}
	}
	s.rt.byMode[m] = rt
	if mr, ok := rt.(ManagedRuntime); ok {
		if s.rt.injected == nil {
			s.rt.injected = map[sandbox.Kind]ManagedRuntime{}
		}
		s.rt.injected[m.Kind] = mr
	}
}

// injectedManaged returns the lifecycle SetRuntime put in place for m's
// kind.
func (s *Service) injectedManaged(m sandbox.Mode) (ManagedRuntime, bool) {
	s.rt.mu.Lock()
	defer s.rt.mu.Unlock()
	mr, ok := s.rt.injected[m.Kind]
	return mr, ok
}
