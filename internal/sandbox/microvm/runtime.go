package microvm

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"github.com/hutchsandbox/hutch/internal/agent"
	"github.com/hutchsandbox/hutch/internal/agentbin"
	"github.com/hutchsandbox/hutch/internal/egress"
	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/microvm/qemu"
	"github.com/hutchsandbox/hutch/internal/netpolicy"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/sandbox/activity"
	"github.com/hutchsandbox/hutch/internal/sandbox/managed"
)

// Defaults where the config sets none.
const (
	// DefaultBootTimeout bounds a boot, from QEMU's start to the agent's
	// first answer. Under TCG a boot takes 2 to 5 s on an idle machine;
	// the bound is for a loaded one.
	DefaultBootTimeout = 2 * time.Minute
	// DefaultSyncInterval is how often projected single files are synced.
	DefaultSyncInterval = 2 * time.Second
	// minMemoryMiB is the least memory a guest boots with.
	minMemoryMiB = 128
)

// Config configures the microVM mode.
type Config struct {
	// StateDir is hutch's state dir: each office's root disk lives under
	// it (conversations/<office key>/microvm). Never shared with a guest.
	StateDir string
	// RunDir holds one directory per running VM (sockets, console log,
	// the record of its processes) and the staged initrds.
	RunDir string
	// AssetDir holds the guest assets and their manifest (default
	// <StateDir>/microvm/default).
	AssetDir string
	// Agent is the verified static hutch binary, the guest's init.
	Agent agentbin.Binary
	// QEMU, Virtiofsd and QEMUImg are the executables; empty: found.
	QEMU, Virtiofsd, QEMUImg string
	// Accel is the accelerator; empty detects it (kvm when usable).
	Accel qemu.Accel
	// Boost is what Boost raises limits to when the caller gives none.
	Boost sandbox.Limits
	// TimeZone is the zone commands run in (TZ); empty: UTC.
	TimeZone string
	// Workspace is the directory that holds every office: a share
	// beneath it is opened beneath it, no link followed (see pinShare).
	Workspace string
	// BootTimeout and SyncInterval override the defaults.
	BootTimeout, SyncInterval time.Duration
	// Log receives what the mode does; nil discards.
	Log *slog.Logger
	// Event, when set, is told of lifecycle events: "created", "started",
	// "recreated", "stopped".
	Event func(event string)
	// Changed, when set, is told of each runtime made or re-created (with
	// why), with the context of the call that made it.
	Changed func(context.Context, sandbox.Change)

	// The egress proxy of a VM with a network card (see egress.go). Each
	// hook takes the office key; all are optional.
	//
	// EgressPolicy is read for every connection, so a new
	// sandbox.network.allow applies without a new VM. Nil: the spec's
	// allowlist, fixed at boot (a new one re-creates the VM).
	EgressPolicy func(officeKey string) netpolicy.Policy
	// EgressSecrets are the office's placeholder secrets, read for every
	// request (Proxy.Secrets).
	EgressSecrets func(officeKey string) []egress.Secret
	// EgressCA is the office's CA: the proxy signs intercepted TLS with
	// it and the guest trusts it. A spec with placeholders and a network
	// is refused without it and EgressSecrets.
	EgressCA func(officeKey string) (*egress.CA, error)
	// EgressRecord, asked once per boot, receives the office's
	// placeholder events (Proxy.Record).
	EgressRecord func(officeKey string) func(egress.Event)
	// EgressDenied, asked once per boot, is called for each connection
	// the office's network policy refuses (Proxy.Denied).
	EgressDenied func(officeKey string) func(egress.Denial)
	// EgressDial and EgressUpstreamRoots replace the proxy's dialer and
	// the roots it verifies intercepted upstreams with (tests).
	EgressDial          func(ctx context.Context, network, addr string) (net.Conn, error)
	EgressUpstreamRoots *x509.CertPool
}

// DefaultAssetDir is where `hutch microvm image build` puts the assets of
// gondolin:default.
func DefaultAssetDir(stateDir string) string {
	return filepath.Join(stateDir, "microvm", "default")
}

// Runtime is the microVM mode.
type Runtime struct {
	cfg    Config
	log    *slog.Logger
	tscKHz int64

	assets   assetCache
	sessions activity.Table[session]

	mu     sync.Mutex // guards closed
	closed bool
}

var (
	_ sandbox.Runtime    = (*Runtime)(nil)
	_ sandbox.Lifecycle  = (*Runtime)(nil)
	_ sandbox.Checker    = (*Runtime)(nil)
	_ sandbox.Reconciler = (*Runtime)(nil)
)

// session is one office's VM as this process knows it. Its lock (that of
// the embedded activity) serialises boots and stops and guards the rest.
type session struct {
	*activity.Office
	vm *vm // nil: no VM runs for this office in this process
	// spec is the last spec a command brought, for boosts (which boot a
	// replacement at once) and file syncs.
	spec *sandbox.Spec
	// boost and temp raise or override the limits of the current VM's
	// life; a stop ends them.
	boost, temp *sandbox.Limits
	// roundedFrom is the fractional CPU value last reported as rounded,
	// so the notice is logged once per value.
	roundedFrom float64
	// recreated and recreatedBecause say when and why this process last
	// replaced the office's VM (sandbox.Status.Recreated).
	recreated        time.Time
	recreatedBecause string
	// because is why the next boot replaces a VM ("" when it replaces
	// none): its Changed hook is told once, at that boot.
	because string
}

// markRecreated records that the office's VM is replaced, and why.
func (s *session) markRecreated(why string) {
	s.recreated, s.recreatedBecause, s.because = time.Now(), why, why
}

// New returns the microVM mode. It checks that the tools it runs exist;
// the assets are checked before every boot.
func New(cfg Config) (*Runtime, error) {
	switch {
	case !filepath.IsAbs(cfg.StateDir):
		return nil, errors.New("microVM mode: state dir must be an absolute path")
	case !filepath.IsAbs(cfg.RunDir):
		return nil, errors.New("microVM mode: run dir must be an absolute path")
	case cfg.Agent.Path == "":
		return nil, errors.New("microVM mode: no agent binary")
	}
	if cfg.AssetDir == "" {
		cfg.AssetDir = DefaultAssetDir(cfg.StateDir)
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.BootTimeout <= 0 {
		cfg.BootTimeout = DefaultBootTimeout
	}
	if cfg.SyncInterval <= 0 {
		cfg.SyncInterval = DefaultSyncInterval
	}
	if cfg.Boost == (sandbox.Limits{}) {
		cfg.Boost = managed.DefaultBoost
	}
	if cfg.Accel == "" {
		cfg.Accel = qemu.DetectAccel()
	}
	var err error
	if cfg.QEMU, err = findTool(cfg.QEMU, "qemu-system-x86_64", "apt-get install qemu-system-x86"); err != nil {
		return nil, err
	}
	if cfg.QEMUImg, err = findTool(cfg.QEMUImg, "qemu-img", "apt-get install qemu-utils"); err != nil {
		return nil, err
	}
	if cfg.Virtiofsd == "" {
		if cfg.Virtiofsd, err = qemu.FindVirtiofsd(); err != nil {
			return nil, errdefs.New(errdefs.ErrFailedPrecondition, "microVM mode: "+err.Error())
		}
	}
	if err := os.MkdirAll(cfg.RunDir, 0o711); err != nil {
		return nil, fmt.Errorf("run dir: %w", err)
	}
	r := &Runtime{cfg: cfg, log: cfg.Log.With("mode", "gondolin")}
	r.sessions.New = func(o *activity.Office) *session { return &session{Office: o} }
	r.assets.file = filepath.Join(cfg.RunDir, "microvm", "verified.json")
	if cfg.Accel == qemu.AccelTCG {
		r.tscKHz = qemu.HostTSCKHz()
	}
	return r, nil
}

// Mode returns gondolin:default.
func (r *Runtime) Mode() sandbox.Mode {
	return sandbox.Mode{Kind: sandbox.KindGondolin, Target: "default"}
}

// Capabilities returns the microVM mode's capabilities.
func (r *Runtime) Capabilities() sandbox.Capabilities {
	return sandbox.CapabilitiesOf(sandbox.KindGondolin)
}

// Accel is the accelerator VMs boot with.
func (r *Runtime) Accel() qemu.Accel { return r.cfg.Accel }

// Exec boots the office's VM as needed and runs one command in it.
func (r *Runtime) Exec(ctx context.Context, spec sandbox.Spec, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	if spec.OfficeKey == "" || spec.OfficeRuntimePath == "" {
		return sandbox.ExecResult{}, errdefs.New(errdefs.ErrInvalid, "microVM mode: spec has no office")
	}
	req.Env = r.trustEnv(spec, req.Env)
	s := r.sessions.Get(spec.OfficeKey)
	return activity.Exec(ctx, s.Office, func() (*agent.Client, error) { return r.ensureLocked(ctx, s, spec) }, spec.OfficeRuntimePath, req)
}

// Agent boots the office's VM as needed and returns its agent client,
// for file operations. The caller must not hold it across a re-create.
func (r *Runtime) Agent(ctx context.Context, spec sandbox.Spec) (*agent.Client, error) {
	s := r.sessions.Get(spec.OfficeKey)
	return activity.Client(s.Office, func() (*agent.Client, error) { return r.ensureLocked(ctx, s, spec) })
}

// ensureLocked brings the office's VM to what spec needs and returns its
// agent client. s.mu is held.
func (r *Runtime) ensureLocked(ctx context.Context, s *session, spec sandbox.Spec) (*agent.Client, error) {
	r.mu.Lock()
	closed := r.closed
	r.mu.Unlock()
	if closed {
		return nil, errdefs.New(errdefs.ErrUnavailable, "microVM mode is shutting down")
	}
	sp := spec
	s.spec = &sp
	if s.vm != nil && !s.vm.alive() {
		r.log.Warn("the microVM exited on its own; booting a new one", "office_key", s.Key, "console", s.vm.consoleTail())
		r.cleanupVM(s.vm)
		s.vm, s.boost, s.temp = nil, nil, nil
		s.markRecreated("the microVM exited on its own")
	}
	m, err := r.assets.load(r.cfg.AssetDir)
	if err != nil {
		return nil, err
	}
	d, err := r.desired(s, spec, m)
	if err != nil {
		return nil, err
	}
	fp := d.fingerprint()
	if s.vm != nil && s.vm.fingerprint == fp {
		return s.vm.client, nil
	}
	if s.vm != nil {
		if err := s.WaitIdle(ctx); err != nil {
			return nil, err
		}
		r.log.Info("re-creating the microVM: what it was built from changed", "office_key", s.Key)
		r.event("recreated")
		r.stopVMLocked(s, "re-create")
		s.markRecreated("what it was built from changed")
		// A stop ends a boost; the replacement boots with base limits.
		if d, err = r.desired(s, spec, m); err != nil {
			return nil, err
		}
		fp = d.fingerprint()
	}
	if err := r.assets.verify(r.cfg.AssetDir, m); err != nil {
		return nil, err
	}
	v, err := r.boot(ctx, s, spec, m, d, fp)
	if err != nil {
		return nil, err
	}
	s.vm = v
	return v.client, nil
}

// effective is the office's limits for the VM to boot: the base limits
// from settings, raised by a boost, overridden by temporary limits; whole
// vCPUs only.
func (r *Runtime) effective(s *session, spec sandbox.Spec) sandbox.Limits {
	eff := spec.Limits.Over(managed.DefaultLimits)
	if s.boost != nil {
		eff = s.boost.Over(eff)
	}
	if s.temp != nil {
		eff = s.temp.Over(eff)
	}
	whole := WholeCPUs(eff.CPUs)
	if float64(whole) != eff.CPUs && s.roundedFrom != eff.CPUs {
		s.roundedFrom = eff.CPUs
		r.log.Info(fmt.Sprintf("a microVM has whole vCPUs only: %g CPUs rounded up to %d", eff.CPUs, whole), "office_key", s.Key)
	}
	eff.CPUs = float64(whole)
	eff.MemoryBytes = max(eff.MemoryBytes, minMemoryMiB<<20)
	return eff
}

// WholeCPUs is the number of vCPUs a CPU limit gives a VM: rounded up,
// at least one, at most the host's CPUs (more would only add contention).
func WholeCPUs(cpus float64) int {
	n := int(math.Ceil(cpus - 1e-9))
	return min(max(n, 1), runtime.NumCPU())
}

func (r *Runtime) event(e string) {
	if r.cfg.Event != nil {
		r.cfg.Event(e)
	}
}
