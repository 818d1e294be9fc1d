package image

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hutchsandbox/hutch/internal/agent"
	"github.com/hutchsandbox/hutch/internal/agentbin"
	"github.com/hutchsandbox/hutch/internal/egress"
	"github.com/hutchsandbox/hutch/internal/engine"
	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/sandbox/activity"
)

// Config configures the image mode.
type Config struct {
	// Engine is the connected container engine.
	Engine *engine.Engine
	// Image is the reference every conversation's container is made from.
	// Empty is allowed for a runtime used only to list, stop or remove.
	Image string
	// StateDir is hutch's state dir: it labels what this hutch owns and
	// holds per-office runtime state (boost, temporary limits). It is
	// never mounted.
	StateDir string
	// RunDir holds the staged agent binary and one socket directory per
	// runtime. It is mounted piecewise (one socket dir per container).
	RunDir string
	// Workspace is the directory the offices' mount sources lie in: each
	// start opens them beneath it with no link followed and checks, once
	// the container runs, that it mounted those (see mounts.go). Empty:
	// a source's own parent directory is its root.
	Workspace string
	// Agent is the verified static hutch binary.
	Agent agentbin.Binary
	// NetworkPool is where office networks take subnets (default DefaultNetworkPool).
	NetworkPool netip.Prefix
	// Boost is what Boost raises limits to when the caller gives no values.
	Boost sandbox.Limits
	// Log receives debug and warning lines; nil discards.
	Log *slog.Logger
	// Event, when set, is told of lifecycle events: "created", "started",
	// "recreated" (for metrics).
	Event func(event string)
	// Changed, when set, is told of each runtime made or re-created (with
	// why), with the context of the call that made it.
	Changed func(context.Context, sandbox.Change)
	// Egress serves what the agents of relaying runtimes relay (see
	// egress.go); EgressCA is the CA an office's proxy terminates TLS
	// with, whose certificate its container trusts. Without them a
	// conversation whose network is allowlist or none, or whose vault
	// holds placeholders, is refused.
	Egress   *egress.Relays
	EgressCA func(officeKey string) (*egress.CA, error)
}

// Validate checks the config.
func (c Config) Validate() error {
	switch {
	case c.Engine == nil:
		return errors.New("image mode: no engine")
	case !filepath.IsAbs(c.StateDir):
		return errors.New("image mode: state dir must be an absolute path")
	case !filepath.IsAbs(c.RunDir):
		return errors.New("image mode: run dir must be an absolute path")
	case c.Agent.Path == "":
		return errors.New("image mode: no agent binary")
	}
	return nil
}

// Runtime is the image mode.
type Runtime struct {
	cfg      Config
	api      engineAPI
	log      *slog.Logger
	agentBin string // staged agent binary on the host

	// sessions is what this process knows of each office's runtime. It
	// is shared by every Runtime made WithImage from this one, so that
	// active commands, idle clocks and provisioning locks are per office,
	// whatever image a caller named.
	sessions *activity.Table[session]
	// iso is the state of the rule that keeps office networks apart on
	// Podman (isolate.go), shared like sessions.
	iso *isolation
	// pool is what this process knows of the warm pool (pool.go),
	// shared like sessions.
	pool *poolState
}

var (
	_ sandbox.Runtime    = (*Runtime)(nil)
	_ sandbox.Lifecycle  = (*Runtime)(nil)
	_ sandbox.Checker    = (*Runtime)(nil)
	_ sandbox.Reconciler = (*Runtime)(nil)
)

// session is one office's runtime as this process knows it. Its lock
// (that of the embedded activity) serialises provisioning and guards the
// following.
type session struct {
	*activity.Office
	client *agent.Client
	// verified is "<container id>@<start time>" of the run of the
	// container this process has checked (agent answering, no stale
	// snapshot); a restart changes it.
	verified string
	// member is the warm pool's name of the container when the office
	// runs in one handed out from the pool (its agent answers on the
	// member's channel, see pool.go); "" for a container made for the
	// office.
	member string
	// egress pumps the relayed connections of a relaying runtime (see
	// relay).
	egress agent.EgressPump
}

// useChannel points the session's client at the agent channel of the
// container now serving it: its office's own, or a pool member's.
func (s *session) useChannel(member string) {
	if s.member == member {
		return
	}
	if s.client != nil {
		s.egress.Stop()
		_ = s.client.Close()
		s.client = nil
	}
	s.member = member
}

// New returns the image mode.
func New(cfg Config) (*Runtime, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if !cfg.NetworkPool.IsValid() {
		cfg.NetworkPool = DefaultNetworkPool
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(cfg.RunDir, 0o711); err != nil {
		return nil, fmt.Errorf("run dir: %w", err)
	}
	bin, err := cfg.Agent.Stage(filepath.Join(cfg.RunDir, "bin"))
	if err != nil {
		return nil, err
	}
	return &Runtime{
		cfg:      cfg,
		api:      cfg.Engine.Client,
		log:      cfg.Log.With("mode", "image"),
		agentBin: bin,
		sessions: &activity.Table[session]{New: func(o *activity.Office) *session { return &session{Office: o} }},
		iso:      &isolation{},
		pool:     newPoolState(),
	}, nil
}

// WithImage returns the image mode for another image reference that
// shares this runtime's sessions (and so its per-office locks, active
// command counts and idle clocks).
func (r *Runtime) WithImage(ref string) *Runtime {
	c := *r
	c.cfg.Image = ref
	return &c
}

// Mode returns image:<image>.
func (r *Runtime) Mode() sandbox.Mode {
	return sandbox.Mode{Kind: sandbox.KindImage, Target: r.cfg.Image}
}

// Capabilities returns the image mode's capabilities.
func (r *Runtime) Capabilities() sandbox.Capabilities {
	return sandbox.CapabilitiesOf(sandbox.KindImage)
}

// Exec provisions the office's container as needed and runs one command
// in it through the agent.
func (r *Runtime) Exec(ctx context.Context, spec sandbox.Spec, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	if spec.OfficeKey == "" || spec.OfficeRuntimePath == "" {
		return sandbox.ExecResult{}, errdefs.New(errdefs.ErrInvalid, "image mode: spec has no office")
	}
	s := r.sessions.Get(spec.OfficeKey)
	return activity.Exec(ctx, s.Office, func() (*agent.Client, error) { return r.ensure(ctx, s, spec) }, spec.OfficeRuntimePath, req)
}

// Agent provisions the office's container and returns its agent client,
// for file operations. The caller must not hold it across a re-create.
func (r *Runtime) Agent(ctx context.Context, spec sandbox.Spec) (*agent.Client, error) {
	s := r.sessions.Get(spec.OfficeKey)
	return activity.Client(s.Office, func() (*agent.Client, error) { return r.ensure(ctx, s, spec) })
}

// ensure is ensureLocked, and for a relaying runtime the relay pump that
// carries its connections out. s.mu is held.
func (r *Runtime) ensure(ctx context.Context, s *session, spec sandbox.Spec) (*agent.Client, error) {
	cl, err := r.ensureLocked(ctx, s, spec)
	if err == nil {
		if relays(spec) {
			r.relay(s, cl)
		} else {
			s.egress.Stop()
		}
	}
	return cl, err
}

// clientLocked returns the session's agent client, dialing the runtime's
// socket. One client per office lives as long as this process; it
// re-dials by itself when the container restarted.
func (r *Runtime) clientLocked(s *session) (*agent.Client, error) {
	if s.client == nil {
		dir, purpose := socketDir(r.cfg.RunDir, s.Key), officePurpose(s.Key)
		if s.member != "" {
			dir, purpose = memberSocketDir(r.cfg.RunDir, s.member), memberPurpose(s.member)
		}
		cl, err := r.dialAgent(dir, purpose, ContainerName(s.Key), r.log.With("office_key", s.Key))
		if err != nil {
			return nil, err
		}
		s.client = cl
	}
	return s.client, nil
}

// dialAgent makes the client of the agent listening in socket dir dir,
// which must prove it holds the channel key of purpose; name names the
// container in the refusal.
func (r *Runtime) dialAgent(dir, purpose, name string, log *slog.Logger) (*agent.Client, error) {
	sock := filepath.Join(dir, socketName)
	cl := agent.NewClient(func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}, log)
	key, err := agent.ChannelKey(r.cfg.StateDir, purpose)
	if err != nil {
		return nil, err
	}
	return cl.RequireProof(key, fmt.Sprintf(
		"The channel of container %s is answered by a process that is not its agent: something inside it replaced the agent's socket. Nothing was sent to it. Remove the runtime (hutch sandbox rm, or the admin portal) to give the conversation a new one.",
		name)), nil
}

// waitAgent waits for a freshly started container's agent to answer,
// failing early with the container's last output when it exits instead.
func (r *Runtime) waitAgent(ctx context.Context, s *session, id string) error {
	cl, err := r.clientLocked(s)
	if err != nil {
		return err
	}
	return r.waitFor(ctx, cl, id, ContainerName(s.Key))
}

// waitFor waits for the agent behind cl, in container id (named name in
// errors), to answer.
func (r *Runtime) waitFor(ctx context.Context, cl *agent.Client, id, name string) error {
	deadline := time.Now().Add(30 * time.Second)
	delay := 2 * time.Millisecond
	for i := 0; ; i++ {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		_, err := cl.Ping(pctx)
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if errors.Is(err, errdefs.ErrFailedPrecondition) {
			return err // an agent answered and failed the channel proof
		}
		if i%20 == 19 {
			if st, ierr := r.inspect(ctx, id); ierr == nil && !st.running {
				return errdefs.New(errdefs.ErrUnavailable, fmt.Sprintf(
					"Container %s exited before its agent answered (exit code %d)%s", name, st.exitCode, r.logsTail(ctx, id)))
			}
		}
		if time.Now().After(deadline) {
			return errdefs.New(errdefs.ErrUnavailable, fmt.Sprintf("The agent in container %s did not answer within 30 s: %v", name, err))
		}
		time.Sleep(delay)
		delay = min(delay*2, 50*time.Millisecond)
	}
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

func trimNL(s string) string { return strings.TrimRight(s, "\n") }
