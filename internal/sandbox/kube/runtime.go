package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/hutchsandbox/hutch/internal/agent"
	"github.com/hutchsandbox/hutch/internal/agentbin"
	"github.com/hutchsandbox/hutch/internal/egress"
	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/sandbox/activity"
)

// Config configures the kube mode.
type Config struct {
	// Cluster is the connected cluster.
	Cluster *Cluster
	// Image is the reference every conversation's pod runs. Empty is
	// allowed for a runtime used only to list, stop or remove.
	Image string
	// StateDir is hutch's state dir: pods are labelled with a digest of
	// it, so two installations sharing a namespace never touch each
	// other's pods.
	StateDir string
	// Workspace is the workspace root as hutch sees it; every mount must
	// lie under it.
	Workspace string
	// Storage is how pods reach the workspace root.
	Storage Storage
	// NodeSelector and RuntimeClass go into every pod spec.
	NodeSelector map[string]string
	RuntimeClass string
	// AgentImage is the image whose /hutch the init container installs
	// (see internal/kubeagent).
	AgentImage string
	// Agent is the verified static hutch binary the daemon runs; the init
	// container refuses an agent image holding another build.
	Agent agentbin.Binary
	// Boost is what Boost raises limits to when the caller gives no values.
	Boost sandbox.Limits
	// StartTimeout bounds how long a pod may take to run (default 3 min:
	// a node may have to pull the image).
	StartTimeout time.Duration
	// Log receives debug and warning lines; nil discards.
	Log *slog.Logger
	// Event, when set, is told of lifecycle events: "created",
	// "recreated", "resized" (for metrics).
	Event func(event string)
	// Changed, when set, is told of each runtime made or re-created (with
	// why), with the context of the call that made it.
	Changed func(context.Context, sandbox.Change)
	// Egress serves what the agents of relaying pods relay (see
	// egress.go); EgressCA is the CA an office's proxy terminates TLS
	// with, whose certificate its pod trusts. Without them a conversation
	// whose network is allowlist or none, or whose vault holds
	// placeholders, is refused.
	Egress   *egress.Relays
	EgressCA func(officeKey string) (*egress.CA, error)
}

// Validate checks the config.
func (c Config) Validate() error {
	switch {
	case c.Cluster == nil:
		return errors.New("kube mode: no cluster")
	case !filepath.IsAbs(c.StateDir):
		return errors.New("kube mode: state dir must be an absolute path")
	case !filepath.IsAbs(c.Workspace):
		return errors.New("kube mode: workspace must be an absolute path")
	case c.Agent.SHA256 == "":
		return errors.New("kube mode: no agent binary")
	case c.AgentImage == "":
		return errors.New("kube mode: no agent image")
	}
	return nil
}

// Runtime is the kube mode.
type Runtime struct {
	cfg     Config
	cluster *Cluster
	log     *slog.Logger

	// sessions is shared by every Runtime made WithImage from this one.
	sessions *activity.Table[session]
	// policy makes the namespace's isolation policy once per process.
	policy *sync.Once
}

var (
	_ sandbox.Runtime    = (*Runtime)(nil)
	_ sandbox.Lifecycle  = (*Runtime)(nil)
	_ sandbox.Checker    = (*Runtime)(nil)
	_ sandbox.Reconciler = (*Runtime)(nil)
)

// session is one office's pod as this process knows it, guarded by the
// embedded activity's lock.
type session struct {
	*activity.Office
	client    *agent.Client
	clientUID string // the pod the client was made for
	// verified is the UID of the pod whose agent this process reached.
	verified string
	// touched is when this process last wrote the pod's last-used
	// annotation (unix nanoseconds); read and written without the lock.
	touched atomic.Int64
	// egress pumps the relayed connections of a relaying pod (see
	// relay).
	egress agent.EgressPump
}

// New returns the kube mode.
func New(cfg Config) (*Runtime, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = 3 * time.Minute
	}
	return &Runtime{
		cfg:      cfg,
		cluster:  cfg.Cluster,
		log:      cfg.Log.With("mode", "kube"),
		sessions: &activity.Table[session]{New: func(o *activity.Office) *session { return &session{Office: o} }},
		policy:   new(sync.Once),
	}, nil
}

// WithImage returns the kube mode for another image that shares this
// runtime's sessions (per-office locks, active commands, idle clocks).
func (r *Runtime) WithImage(ref string) *Runtime {
	c := *r
	c.cfg.Image = ref
	return &c
}

// Mode returns kube:<image>.
func (r *Runtime) Mode() sandbox.Mode {
	return sandbox.Mode{Kind: sandbox.KindKube, Target: r.cfg.Image}
}

// Capabilities returns the kube mode's capabilities.
func (r *Runtime) Capabilities() sandbox.Capabilities {
	return sandbox.CapabilitiesOf(sandbox.KindKube)
}

// Namespace is where this runtime's pods live.
func (r *Runtime) Namespace() string { return r.cluster.Namespace }

// Exec provisions the office's pod as needed and runs one command in it
// through the agent.
func (r *Runtime) Exec(ctx context.Context, spec sandbox.Spec, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	if spec.OfficeKey == "" || spec.OfficeRuntimePath == "" {
		return sandbox.ExecResult{}, errdefs.New(errdefs.ErrInvalid, "kube mode: spec has no office")
	}
	s := r.sessions.Get(spec.OfficeKey)
	// While the command runs, the pod's last-used annotation is kept
	// fresh, so that another replica's idle stop leaves the pod alone.
	done := make(chan struct{})
	defer close(done)
	go func() {
		t := time.NewTicker(touchEvery)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				r.touch(context.WithoutCancel(ctx), s)
			}
		}
	}()
	return activity.Exec(ctx, s.Office, func() (*agent.Client, error) { return r.ensure(ctx, s, spec) }, spec.OfficeRuntimePath, req)
}

// touchEvery is how often a replica using a pod writes its last-used
// annotation: at most once per interval per office, at a command's start
// and while commands run. Other replicas' idle stops read it, so an idle
// timeout shorter than this may stop a pod another replica just used.
const touchEvery = 30 * time.Second

// touch writes the pod's last-used annotation when this process has not
// for touchEvery. Failing to is not worth failing a command for: it is
// logged.
func (r *Runtime) touch(ctx context.Context, s *session) {
	now := time.Now()
	if last := s.touched.Load(); last != 0 && now.Sub(time.Unix(0, last)) < touchEvery {
		return
	}
	s.touched.Store(now.UnixNano())
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{
		annotationLastUsed: now.UTC().Format(time.RFC3339Nano),
	}}})
	_, err := r.cluster.Client.Pods(r.cluster.Namespace).Patch(ctx, PodName(s.Key), types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		r.log.Debug("could not record the pod's last use", "office_key", s.Key, "error", err)
	}
}

// lastUsed is when any replica last recorded using the pod (zero: never).
func lastUsed(pod *corev1.Pod) time.Time {
	t, _ := time.Parse(time.RFC3339Nano, pod.Annotations[annotationLastUsed])
	return t
}

// Agent provisions the office's pod and returns its agent client, for
// file operations.
func (r *Runtime) Agent(ctx context.Context, spec sandbox.Spec) (*agent.Client, error) {
	s := r.sessions.Get(spec.OfficeKey)
	return activity.Client(s.Office, func() (*agent.Client, error) { return r.ensure(ctx, s, spec) })
}

// ensure is ensureLocked, and for a relaying pod the relay pump that
// carries its connections out. The office's lock is held.
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

// clientLocked returns the session's agent client for the pod. A new pod
// gets a new client: the old one's stream ended with its pod. The agent
// of a relaying pod's stream relays its commands' connections.
func (r *Runtime) clientLocked(s *session, pod *corev1.Pod) *agent.Client {
	uid := string(pod.UID)
	if s.client != nil && s.clientUID != uid {
		s.egress.Stop()
		_ = s.client.Close()
		s.client = nil
	}
	if s.client == nil {
		key := s.Key
		dial := func(ctx context.Context) (net.Conn, error) { return r.dial(ctx, key) }
		if pod.Labels[labelEgress] != "" {
			dial = func(ctx context.Context) (net.Conn, error) { return r.dialRelaying(ctx, key) }
		}
		s.client = agent.NewClient(dial, r.log.With("office_key", key))
		s.clientUID = uid
	}
	return s.client
}

// Close ends this process's exec streams; the agents kill what they ran
// for it. Pods stay: another process (or the next start) uses them.
func (r *Runtime) Close() {
	for _, s := range r.sessions.All() {
		s.Lock()
		s.egress.Stop()
		if s.client != nil {
			_ = s.client.Close()
			s.client = nil
		}
		s.verified = ""
		s.Unlock()
	}
}

func (r *Runtime) event(e string) {
	if r.cfg.Event != nil {
		r.cfg.Event(e)
	}
}

var getOpts = metav1.GetOptions{}

// classify turns an API error into hutch's error classes.
func classify(err error, what string) error {
	switch {
	case err == nil:
		return nil
	case apierrors.IsNotFound(err):
		return fmt.Errorf("kube %s: %v: %w", what, err, errdefs.ErrNotFound)
	case apierrors.IsAlreadyExists(err), apierrors.IsConflict(err):
		return fmt.Errorf("kube %s: %v: %w", what, err, errdefs.ErrConflict)
	case apierrors.IsInvalid(err), apierrors.IsBadRequest(err):
		return fmt.Errorf("kube %s: %v: %w", what, err, errdefs.ErrInvalid)
	case apierrors.IsForbidden(err), apierrors.IsUnauthorized(err):
		return fmt.Errorf("kube %s: %v (hutch's credentials need get, list, watch, create, update, patch and delete on pods, pods/exec, pods/resize and secrets): %w", what, err, errdefs.ErrFailedPrecondition)
	case errors.Is(err, context.DeadlineExceeded), apierrors.IsServerTimeout(err), apierrors.IsTimeout(err),
		apierrors.IsServiceUnavailable(err), apierrors.IsTooManyRequests(err), apierrors.IsInternalError(err):
		return fmt.Errorf("kube %s: %v: %w", what, err, errdefs.ErrUnavailable)
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return fmt.Errorf("kube %s: the API server is unreachable: %v: %w", what, err, errdefs.ErrUnavailable)
	}
	return fmt.Errorf("kube %s: %w", what, err)
}
