package service

import (
	"context"
	"sync"
	"time"

	"github.com/hutchsandbox/hutch/internal/agentbin"
	"github.com/hutchsandbox/hutch/internal/engine"
	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/events"
	"github.com/hutchsandbox/hutch/internal/kubeagent"
	"github.com/hutchsandbox/hutch/internal/microvm/qemu"
	"github.com/hutchsandbox/hutch/internal/netpolicy"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/sandbox/image"
	"github.com/hutchsandbox/hutch/internal/sandbox/kube"
	"github.com/hutchsandbox/hutch/internal/sandbox/managed"
	"github.com/hutchsandbox/hutch/internal/sandbox/microvm"
	"github.com/hutchsandbox/hutch/internal/settings"
	"github.com/hutchsandbox/hutch/internal/vault"
)

// runtimes caches what is expensive to make: the engine connection and
// one runtime per mode, shared by every command of this process.
type runtimes struct {
	mu     sync.Mutex // guards the following
	engine *engine.Engine
	agent  *agentbin.Binary
	byMode map[sandbox.Mode]sandbox.Runtime
	image  *image.Runtime // the lifecycle view of image mode
	vm     *microvm.Runtime
	kube   *kube.Runtime // the lifecycle view of kube mode
	// injected are the lifecycles SetRuntime put in place, by kind.
	injected map[sandbox.Kind]ManagedRuntime
}

// SetGetenv replaces how the service reads its environment
// (HUTCH_AGENT_BINARY); tests inject one.
func (s *Service) SetGetenv(getenv func(string) string) {
	if getenv != nil {
		s.getenv = getenv
	}
}

// SetAgentBinary overrides the binary staged into sandboxes as the agent
// (default: this executable). Tests set it to a static build.
func (s *Service) SetAgentBinary(path string) { s.agentOverride = path }

func (s *Service) engineLocked(ctx context.Context) (*engine.Engine, error) {
	if s.rt.engine == nil {
		e, err := engine.Connect(ctx)
		if err != nil {
			return nil, err
		}
		s.rt.engine = e
	}
	return s.rt.engine, nil
}

func (s *Service) agentLocked() (agentbin.Binary, error) {
	if s.rt.agent == nil {
		override := s.agentOverride
		if override == "" {
			override = s.getenv("HUTCH_AGENT_BINARY")
		}
		b, err := agentbin.LocateCached(override, s.layout.StateDir)
		if err != nil {
			return agentbin.Binary{}, err
		}
		s.rt.agent = &b
	}
	return *s.rt.agent, nil
}

func (s *Service) imageLocked(ctx context.Context, ref string) (*image.Runtime, error) {
	e, err := s.engineLocked(ctx)
	if err != nil {
		return nil, err
	}
	b, err := s.managedBaseLocked()
	if err != nil {
		return nil, err
	}
	return image.New(image.Config{
		Engine:    e,
		Image:     ref,
		StateDir:  s.layout.StateDir,
		Workspace: s.layout.Workspace,
		RunDir:    s.layout.RunDir,
		Agent:     b.agent,
		Boost:     b.boost,
		Log:       s.log,
		Event:     func(e string) { s.metrics.Event(sandbox.KindImage, e, 1) },
		Changed:   s.RuntimeChanged,
		Egress:    s.egressRelays(),
		EgressCA:  s.EgressCA,
	})
}

// BoostSize is what a boost raises CPUs and memory to now: the
// sandbox.boost.* settings, read at each call (a size set while the
// daemon runs applies to the next boost), over the defaults.
func (s *Service) BoostSize() (sandbox.Limits, error) {
	rs, err := settings.LoadRuntime(settings.GlobalPath(s.layout.StateDir))
	if err != nil {
		return sandbox.Limits{}, err
	}
	return sandbox.Limits{CPUs: rs.BoostCPUs, MemoryBytes: rs.BoostMemoryBytes}.Over(managed.DefaultBoost), nil
}

// managedBase is what every managed mode's runtime is made with.
type managedBase struct {
	agent    agentbin.Binary
	settings settings.Runtime
	boost    sandbox.Limits // what a boost raises to, defaults filled in
}

func (s *Service) managedBaseLocked() (managedBase, error) {
	bin, err := s.agentLocked()
	if err != nil {
		return managedBase{}, err
	}
	rs, err := settings.LoadRuntime(settings.GlobalPath(s.layout.StateDir))
	if err != nil {
		return managedBase{}, err
	}
	boost := sandbox.Limits{CPUs: rs.BoostCPUs, MemoryBytes: rs.BoostMemoryBytes}.Over(managed.DefaultBoost)
	return managedBase{agent: bin, settings: rs, boost: boost}, nil
}

// microvmLocked returns the one microVM runtime of this process.
func (s *Service) microvmLocked() (*microvm.Runtime, error) {
	if s.rt.vm != nil {
		return s.rt.vm, nil
	}
	b, err := s.managedBaseLocked()
	if err != nil {
		return nil, err
	}
	accel, err := qemu.ParseAccel(s.getenv("HUTCH_MICROVM_ACCEL"))
	if err != nil {
		return nil, errdefs.New(errdefs.ErrInvalid, "HUTCH_MICROVM_ACCEL: "+err.Error())
	}
	vm, err := microvm.New(microvm.Config{
		StateDir:  s.layout.StateDir,
		RunDir:    s.layout.RunDir,
		AssetDir:  s.getenv("HUTCH_MICROVM_ASSETS"),
		Agent:     b.agent,
		Accel:     accel,
		TimeZone:  b.settings.TimeZone,
		Workspace: s.layout.Workspace,
		Boost:     b.boost,
		Log:       s.log,
		Event:     func(e string) { s.metrics.Event(sandbox.KindGondolin, e, 1) },
		Changed:   s.RuntimeChanged,
		// Each VM has a proxy of its own; it reads the office's policy
		// per connection and its secrets per request.
		EgressPolicy:        func(key string) netpolicy.Policy { return s.EgressPolicy(key, sandbox.KindGondolin) },
		EgressSecrets:       s.EgressSecrets,
		EgressCA:            s.EgressCA,
		EgressRecord:        s.egressRecorder,
		EgressDenied:        s.egressDenied,
		EgressUpstreamRoots: s.egressRoots,
	})
	if err != nil {
		return nil, err
	}
	s.rt.vm = vm
	return vm, nil
}

// kubeLocked returns the one kube runtime of this process, whose sessions
// every image of kube mode shares. Connecting reads the kubeconfig only:
// the API server is first asked by the first command (or ValidateMode).
func (s *Service) kubeLocked() (*kube.Runtime, error) {
	if s.rt.kube != nil {
		return s.rt.kube, nil
	}
	b, err := s.managedBaseLocked()
	if err != nil {
		return nil, err
	}
	k := b.settings.Kube
	cluster, err := kube.Connect(k.Kubeconfig, k.Namespace)
	if err != nil {
		return nil, err
	}
	kr, err := kube.New(kube.Config{
		Cluster:      cluster,
		StateDir:     s.layout.StateDir,
		Workspace:    s.layout.Workspace,
		Storage:      kube.Storage{HostPath: k.Storage.HostPath, Claim: k.Storage.Claim},
		NodeSelector: k.NodeSelector,
		RuntimeClass: k.RuntimeClass,
		AgentImage:   kubeagent.Ref(k.AgentImage, b.agent),
		Agent:        b.agent,
		Boost:        b.boost,
		Log:          s.log,
		Event:        func(e string) { s.metrics.Event(sandbox.KindKube, e, 1) },
		Changed:      s.RuntimeChanged,
		Egress:       s.egressRelays(),
		EgressCA:     s.EgressCA,
	})
	if err != nil {
		return nil, err
	}
	s.rt.kube = kr
	return kr, nil
}

// ManagedRuntime is the lifecycle of a managed mode's runtimes, with the
// start-up and shutdown duties of the process that serves them.
type ManagedRuntime interface {
	sandbox.Lifecycle
	sandbox.UsageReader
	sandbox.Reconciler
}

// ManagedFor returns the lifecycle of the managed mode m (image,
// gondolin or kube).
// Its boosts and temporary limits stay under Ceiling.
func (s *Service) ManagedFor(ctx context.Context, m sandbox.Mode) (ManagedRuntime, error) {
	rt, err := s.managedFor(ctx, m)
	if err != nil {
		return nil, err
	}
	return ceilinged{ManagedRuntime: rt, svc: s}, nil
}

func (s *Service) managedFor(ctx context.Context, m sandbox.Mode) (ManagedRuntime, error) {
	if rt, ok := s.injectedManaged(m); ok {
		return rt, nil
	}
	switch m.Kind {
	case sandbox.KindGondolin:
		s.rt.mu.Lock()
		defer s.rt.mu.Unlock()
		return s.microvmLocked()
	case sandbox.KindKube:
		s.rt.mu.Lock()
		defer s.rt.mu.Unlock()
		return s.kubeLocked()
	}
	return s.Managed(ctx)
}

// Managed returns the lifecycle view of the managed runtimes (image
// mode), whatever image each was made from.
func (s *Service) Managed(ctx context.Context) (*image.Runtime, error) {
	s.rt.mu.Lock()
	defer s.rt.mu.Unlock()
	return s.managedLocked(ctx)
}

// managedLocked returns the one image runtime whose sessions every image
// reference of this process shares.
func (s *Service) managedLocked(ctx context.Context) (*image.Runtime, error) {
	if s.rt.image == nil {
		ir, err := s.imageLocked(ctx, "")
		if err != nil {
			return nil, err
		}
		s.rt.image = ir
	}
	return s.rt.image, nil
}

// IdleDuration is how long a managed runtime may idle before it stops.
func (s *Service) IdleDuration() (time.Duration, error) {
	rs, err := settings.LoadRuntime(settings.GlobalPath(s.layout.StateDir))
	if err != nil {
		return 0, err
	}
	if rs.IdleTimeout == 0 {
		return managed.DefaultIdleTimeout, nil
	}
	return rs.IdleTimeout, nil
}

// ValidateMode checks that a mode can work here before a daemon starts:
// the engine answers, the image is present, the container exists and runs,
// the bridge answers its health check, the cluster's API server answers.
func (s *Service) ValidateMode(ctx context.Context, m sandbox.Mode) error {
	rt, err := s.runtime(ctx, m)
	if err != nil {
		return err
	}
	if c, ok := rt.(sandbox.Checker); ok {
		return c.Check(ctx)
	}
	return nil
}

// Reconcile adopts the managed runtimes of registered offices and removes
// those no registered office accounts for.
func (s *Service) Reconcile(ctx context.Context) (sandbox.ReconcileReport, error) {
	return s.ReconcileMode(ctx, sandbox.Mode{Kind: sandbox.KindImage})
}

// ReconcileMode reconciles the runtimes of one managed mode.
func (s *Service) ReconcileMode(ctx context.Context, mode sandbox.Mode) (sandbox.ReconcileReport, error) {
	m, err := s.ManagedFor(ctx, mode)
	if err != nil {
		return sandbox.ReconcileReport{}, err
	}
	recs, err := s.registry.Offices()
	if err != nil {
		return sandbox.ReconcileReport{}, err
	}
	known := map[string]bool{}
	for _, r := range recs {
		known[string(r.Address().Key())] = true
	}
	// A runtime of the raw-id layout is labelled with its conversation's
	// legacy key. It is never removed here: migration brings it onto its
	// office (keeping its files), and until that succeeds it is kept.
	f, err := s.registry.Load()
	if err != nil {
		return sandbox.ReconcileReport{}, err
	}
	for _, rec := range f.Migrations {
		known[vault.ConversationKey(rec.RawConversationID)] = true
	}
	rep, err := m.Reconcile(ctx, func(k string) bool { return known[k] })
	for _, k := range rep.Removed {
		s.Record(ctx, events.RuntimeRemoved, k, "no office accounts for it")
	}
	return rep, err
}

// SetRuntimeSetting sets (or with "" removes) a global sandbox.* key,
// recorded as a change of the service's surface (SetSetting names the
// caller).
func (s *Service) SetRuntimeSetting(key, value string) error {
	return s.SetSetting(context.Background(), key, value)
}

// SetSetting sets (or with "" removes) a global sandbox.* key and records
// it as a change by ctx's actor.
func (s *Service) SetSetting(ctx context.Context, key, value string) error {
	if err := settings.SetRuntime(settings.GlobalPath(s.layout.StateDir), key, value); err != nil {
		return err
	}
	detail := key + " cleared"
	if value != "" {
		detail = key + "=" + value
	}
	s.Record(ctx, events.SettingSet, "global", detail)
	return nil
}

// RuntimeSettings lists the global sandbox.* keys that are set.
func (s *Service) RuntimeSettings() ([][2]string, error) {
	return settings.RuntimeValues(settings.GlobalPath(s.layout.StateDir))
}

// Close powers off the microVMs this process runs (syncing their files
// back), ends its exec streams into pods and releases the engine
// connection.
func (s *Service) Close() error {
	s.relaysMu.Lock()
	if s.relays != nil {
		s.relays.Close()
	}
	s.relaysMu.Unlock()
	s.rt.mu.Lock()
	defer s.rt.mu.Unlock()
	if s.rt.vm != nil {
		_ = s.rt.vm.Close()
	}
	if s.rt.kube != nil {
		s.rt.kube.Close()
	}
	if s.rt.engine != nil {
		return s.rt.engine.Close()
	}
	return nil
}
