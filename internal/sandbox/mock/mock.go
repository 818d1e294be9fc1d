// Package mock is a sandbox mode for the tests of what sits above the
// modes (service, api, mcpserver, chat) where the engine is not the thing
// under test. It stands in for a real mode (its Mode and Capabilities are
// that mode's, so policy treats it the same) and keeps every contract a
// managed mode keeps: Runtime (commands and files), Lifecycle,
// UsageReader, Checker and Reconciler.
//
// Commands run on this machine, as host mode runs them, vault env
// included; a runtime path under one of the spec's mounts is its host
// path there, so a managed mode's /workspace/<key> works as a working
// directory and in file operations (commands see host paths). File
// operations are confined as the agent confines them, and a read-only
// mount refuses writes the way a read-only bind mount does. Lifecycle
// state (running, stopped, boosts, temporary limits) lives in memory.
//
// Like Nomad's mock driver, it fails on demand: Config.Fail makes a named
// operation return an error, for the faults a real engine cannot be made
// to produce.
package mock

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hutchsandbox/hutch/internal/agent"
	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/sandbox/host"
	"github.com/hutchsandbox/hutch/internal/sandbox/managed"
)

// The operations Config.Fail can make fail.
const (
	OpExec      = "exec"
	OpFiles     = "files"
	OpStatus    = "status"
	OpStop      = "stop"
	OpRemove    = "remove"
	OpBoost     = "boost"
	OpLimits    = "limits"
	OpUsage     = "usage"
	OpCheck     = "check"
	OpReconcile = "reconcile"
	// OpExecAfterOutput fails an Exec after the command ran and its
	// output went out, as a runtime that went away mid-command does.
	OpExecAfterOutput = "exec-after-output"
	// OpReadAfterBytes fails a file read after its first byte went out,
	// as a runtime that went away mid-read does.
	OpReadAfterBytes = "read-after-bytes"
)

// Config says what the mock stands in for and how it fails.
type Config struct {
	// Mode is the mode it stands in for, e.g. image:busybox.
	Mode sandbox.Mode
	// Boost is what a boost with no size raises to (default
	// managed.DefaultBoost).
	Boost sandbox.Limits
	// Fail makes an operation (Op*) return the error instead of doing
	// anything.
	Fail map[string]error
	// Changed, when set, is told of each runtime made or re-created, as
	// a managed mode's hook is.
	Changed func(context.Context, sandbox.Change)
}

// Runtime is the mock mode. It is safe for concurrent use.
type Runtime struct {
	cfg  Config
	host *host.Runtime

	mu       sync.Mutex // guards the following
	runtimes map[string]*runtime
}

var (
	_ sandbox.Runtime     = (*Runtime)(nil)
	_ sandbox.Lifecycle   = (*Runtime)(nil)
	_ sandbox.UsageReader = (*Runtime)(nil)
	_ sandbox.Checker     = (*Runtime)(nil)
	_ sandbox.Reconciler  = (*Runtime)(nil)
)

// runtime is one office's runtime.
type runtime struct {
	spec       sandbox.Spec
	id         string
	running    bool
	started    time.Time
	boost      *sandbox.Limits
	temp       *sandbox.Limits
	active     int
	last       time.Time
	cpu        time.Duration // CPU time of the commands that ended
	recreated  time.Time
	recreateBy string
}

// New returns a mock of cfg.Mode.
func New(cfg Config) *Runtime {
	if cfg.Boost == (sandbox.Limits{}) {
		cfg.Boost = managed.DefaultBoost
	}
	return &Runtime{cfg: cfg, host: host.NewInjecting(nil), runtimes: map[string]*runtime{}}
}

// Mode returns the mode the mock stands in for.
func (r *Runtime) Mode() sandbox.Mode { return r.cfg.Mode }

// Capabilities returns that mode's capabilities.
func (r *Runtime) Capabilities() sandbox.Capabilities { return sandbox.CapabilitiesOf(r.cfg.Mode.Kind) }

func (r *Runtime) fail(op string) error { return r.cfg.Fail[op] }

// Exec runs the command on this machine (see the package comment),
// creating or starting the office's runtime first as a managed mode does.
func (r *Runtime) Exec(ctx context.Context, spec sandbox.Spec, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	if err := r.fail(OpExec); err != nil {
		return sandbox.ExecResult{}, err
	}
	rt, change := r.ensure(spec)
	if change != nil && r.cfg.Changed != nil {
		r.cfg.Changed(ctx, *change)
	}
	defer r.ended(spec.OfficeKey, rt)
	if req.Dir != "" && path.IsAbs(req.Dir) {
		req.Dir = hostPath(spec, req.Dir)
	}
	start := time.Now()
	res, err := r.host.Exec(ctx, sandbox.Spec{OfficeKey: spec.OfficeKey, OfficeDir: spec.OfficeDir, OfficeRuntimePath: spec.OfficeDir}, req)
	r.mu.Lock()
	rt.cpu += time.Since(start) / 10 // a nominal share: the mock measures nothing
	r.mu.Unlock()
	if ferr := r.fail(OpExecAfterOutput); ferr != nil && err == nil {
		return sandbox.ExecResult{}, ferr
	}
	return res, err
}

// ensure marks the office's runtime running (created when missing, its
// spec recorded) and counts a command in it. The change is what it
// made (nil: nothing).
func (r *Runtime) ensure(spec sandbox.Spec) (*runtime, *sandbox.Change) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var change *sandbox.Change
	rt := r.runtimes[spec.OfficeKey]
	if rt == nil {
		rt = &runtime{id: newID()}
		r.runtimes[spec.OfficeKey] = rt
		change = &sandbox.Change{Event: "created", OfficeKey: spec.OfficeKey}
	}
	if rt.spec.OfficeKey != "" && !slices.Equal(rt.spec.Mounts, spec.Mounts) {
		// What it was built from changed: a managed mode re-creates it.
		*rt = runtime{id: newID(), recreated: time.Now(), recreateBy: "what it was built from changed (mounts)"}
		change = &sandbox.Change{Event: "recreated", OfficeKey: spec.OfficeKey, Because: rt.recreateBy}
	}
	rt.spec = spec
	if !rt.running {
		rt.running, rt.started = true, time.Now()
	}
	rt.active++
	rt.last = time.Now()
	return rt, change
}

func (r *Runtime) ended(key string, rt *runtime) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rt.active--
	rt.last = time.Now()
}

func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// hostPath is where p, a path as the runtime sees it, is on this machine:
// under the mount that holds it (the deepest), or p itself.
func hostPath(spec sandbox.Spec, p string) string {
	best := -1
	for i, m := range spec.Mounts {
		if within(p, m.RuntimePath) && (best < 0 || len(m.RuntimePath) > len(spec.Mounts[best].RuntimePath)) {
			best = i
		}
	}
	if best < 0 {
		return p
	}
	m := spec.Mounts[best]
	return m.HostPath + strings.TrimPrefix(p, path.Clean(m.RuntimePath))
}

func within(p, root string) bool {
	root = path.Clean(root)
	return p == root || root == "/" || strings.HasPrefix(p, root+"/")
}

// Files returns the office's file operations: the agent's confinement,
// run in this process on the mounts' host paths, with read-only mounts
// refusing writes.
func (r *Runtime) Files(spec sandbox.Spec) sandbox.Files {
	return sandbox.ConfinedFiles(func(ctx context.Context) (sandbox.Confined, error) {
		if err := r.fail(OpFiles); err != nil {
			return nil, err
		}
		rt, change := r.ensure(spec) // file operations start the runtime too
		if change != nil && r.cfg.Changed != nil {
			r.cfg.Changed(ctx, *change)
		}
		r.ended(spec.OfficeKey, rt)
		return mapped{spec: spec, cut: r.fail(OpReadAfterBytes)}, nil
	}, spec.OfficeRuntimePath, spec.Roots())
}

// mapped runs the agent's confined file functions on host paths. A write
// under a read-only mount is refused by its path as given; a symlink
// elsewhere that leads into one is not caught (the mock is no boundary;
// the files suite checks real bind mounts in the real modes).
type mapped struct {
	spec sandbox.Spec
	// cut, when set, fails a read after its first byte.
	cut error
}

func (m mapped) roots(roots []string) []string {
	out := make([]string, len(roots))
	for i, r := range roots {
		out[i] = hostPath(m.spec, r)
	}
	return out
}

// errorIn names p as the runtime sees it in err's text, keeping its class.
func (m mapped) errorIn(p string, err error) error {
	if err == nil {
		return nil
	}
	text := strings.ReplaceAll(err.Error(), hostPath(m.spec, p), p)
	if text == err.Error() {
		return err
	}
	return errdefs.FromCode(errdefs.Code(err), text)
}

func (m mapped) ReadFileWithin(_ context.Context, p string, roots []string, w io.Writer) error {
	if m.cut != nil {
		w = &cutWriter{w: w, err: m.cut}
	}
	return m.errorIn(p, agent.ReadFileWithin(hostPath(m.spec, p), m.roots(roots), w))
}

// cutWriter passes on one byte, then fails with err.
type cutWriter struct {
	w    io.Writer
	err  error
	done bool
}

func (c *cutWriter) Write(p []byte) (int, error) {
	if c.done || len(p) == 0 {
		return 0, c.err
	}
	c.done = true
	if _, err := c.w.Write(p[:1]); err != nil {
		return 0, err
	}
	return 1, c.err
}

func (m mapped) WriteFileWithin(_ context.Context, p string, roots []string, r io.Reader, mode os.FileMode) error {
	if err := agent.CheckPath(p); err != nil {
		return err
	}
	for _, mt := range m.spec.Mounts {
		if mt.ReadOnly && within(p, mt.RuntimePath) {
			return errdefs.New(errdefs.ErrFailedPrecondition, fmt.Sprintf("Cannot write %s: read-only file system", p))
		}
	}
	return m.errorIn(p, agent.WriteFileWithin(hostPath(m.spec, p), m.roots(roots), r, mode))
}

func (m mapped) Stat(_ context.Context, p string, roots []string) (sandbox.FileInfo, error) {
	fi, err := agent.StatWithin(hostPath(m.spec, p), m.roots(roots))
	return fi, m.errorIn(p, err)
}

func (m mapped) List(_ context.Context, p string, roots []string) ([]sandbox.FileInfo, error) {
	list, err := agent.ListWithin(hostPath(m.spec, p), m.roots(roots))
	return list, m.errorIn(p, err)
}

// Check passes unless told to fail.
func (r *Runtime) Check(context.Context) error { return r.fail(OpCheck) }

// List returns every runtime the mock has made.
func (r *Runtime) List(ctx context.Context) ([]sandbox.Status, error) {
	r.mu.Lock()
	keys := make([]string, 0, len(r.runtimes))
	for k := range r.runtimes {
		keys = append(keys, k)
	}
	r.mu.Unlock()
	slices.Sort(keys)
	out := make([]sandbox.Status, 0, len(keys))
	for _, k := range keys {
		st, err := r.Status(ctx, k)
		if err != nil {
			return nil, err
		}
		out = append(out, st)
	}
	return out, nil
}

// Status returns an office's runtime (State missing when there is none).
func (r *Runtime) Status(_ context.Context, key string) (sandbox.Status, error) {
	if err := r.fail(OpStatus); err != nil {
		return sandbox.Status{}, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	rt := r.runtimes[key]
	if rt == nil {
		return sandbox.Status{OfficeKey: key, Name: Name(key), State: sandbox.StateMissing}, nil
	}
	st := sandbox.Status{
		OfficeKey: key, Platform: rt.spec.Platform, ConversationID: rt.spec.ConversationID,
		Name: Name(key), ID: rt.id, State: sandbox.StateStopped,
		Image: r.cfg.Mode.Target, ImageID: "sha256:mock-" + r.cfg.Mode.Target,
		Limits:         r.effective(rt),
		Boosted:        rt.boost != nil,
		TempLimits:     rt.temp != nil,
		ActiveCommands: rt.active, LastActivity: rt.last,
		Recreated: rt.recreated, RecreatedBecause: rt.recreateBy,
	}
	if rt.running {
		st.State, st.StartedAt = sandbox.StateRunning, rt.started
	}
	return st, nil
}

// Name is the name the mock gives an office's runtime.
func Name(key string) string { return "mock-" + key }

// effective is base limits, raised by a boost, overridden by temporary
// limits, as every managed mode computes them.
func (r *Runtime) effective(rt *runtime) sandbox.Limits {
	eff := rt.spec.Limits.Over(managed.DefaultLimits)
	if rt.boost != nil {
		eff = rt.boost.Over(eff)
	}
	if rt.temp != nil {
		eff = rt.temp.Over(eff)
	}
	return eff
}

// Stop stops a runtime; boosts and temporary limits end with it.
func (r *Runtime) Stop(_ context.Context, key string) error {
	if err := r.fail(OpStop); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	rt := r.runtimes[key]
	if rt == nil {
		return errdefs.New(errdefs.ErrNotFound, "No runtime for office "+key)
	}
	rt.running, rt.boost, rt.temp = false, nil, nil
	return nil
}

// Remove forgets a runtime.
func (r *Runtime) Remove(_ context.Context, key string) error {
	if err := r.fail(OpRemove); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.runtimes[key] == nil {
		return errdefs.New(errdefs.ErrNotFound, "No runtime for office "+key)
	}
	delete(r.runtimes, key)
	return nil
}

// Boost raises a running runtime's limits until it stops.
func (r *Runtime) Boost(ctx context.Context, key string, boost sandbox.Limits) (sandbox.Status, error) {
	if err := r.fail(OpBoost); err != nil {
		return sandbox.Status{}, err
	}
	if boost == (sandbox.Limits{}) {
		boost = r.cfg.Boost
	}
	return r.change(ctx, key, func(rt *runtime) { rt.boost = &boost })
}

// SetLimits sets temporary limits on a running runtime until it stops;
// set fields override, zero fields keep the current value.
func (r *Runtime) SetLimits(ctx context.Context, key string, l sandbox.Limits) (sandbox.Status, error) {
	if err := r.fail(OpLimits); err != nil {
		return sandbox.Status{}, err
	}
	return r.change(ctx, key, func(rt *runtime) {
		if rt.temp != nil {
			l = l.Over(*rt.temp)
		}
		rt.temp = &l
	})
}

func (r *Runtime) change(ctx context.Context, key string, f func(*runtime)) (sandbox.Status, error) {
	r.mu.Lock()
	rt := r.runtimes[key]
	if rt == nil || !rt.running {
		r.mu.Unlock()
		return sandbox.Status{}, sandbox.NotRunning(key)
	}
	f(rt)
	r.mu.Unlock()
	return r.Status(ctx, key)
}

// StopIdle stops every running runtime with no command running and none
// started or ended within idle.
func (r *Runtime) StopIdle(_ context.Context, idle time.Duration) ([]string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var stopped []string
	for k, rt := range r.runtimes {
		if rt.running && rt.active == 0 && time.Since(rt.last) > idle {
			rt.running, rt.boost, rt.temp = false, nil, nil
			stopped = append(stopped, k)
		}
	}
	slices.Sort(stopped)
	return stopped, nil
}

// Usage reads a running runtime's use: nominal figures that move with
// its commands, and its limits.
func (r *Runtime) Usage(_ context.Context, key string) (sandbox.Usage, error) {
	if err := r.fail(OpUsage); err != nil {
		return sandbox.Usage{}, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	rt := r.runtimes[key]
	if rt == nil || !rt.running {
		return sandbox.Usage{}, errdefs.New(errdefs.ErrNotFound, "The runtime of office "+key+" is not running")
	}
	l := r.effective(rt)
	return sandbox.Usage{
		Instance: rt.id, CPU: rt.cpu, Clock: time.Since(rt.started),
		Memory: 8 << 20, MemoryLimit: uint64(l.MemoryBytes),
		Pids: uint64(1 + rt.active), PidsLimit: uint64(l.Pids),
	}, nil
}

// Reconcile keeps the runtimes of known offices and forgets the others.
func (r *Runtime) Reconcile(_ context.Context, known func(officeKey string) bool) (sandbox.ReconcileReport, error) {
	if err := r.fail(OpReconcile); err != nil {
		return sandbox.ReconcileReport{}, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var rep sandbox.ReconcileReport
	for k := range r.runtimes {
		if known(k) {
			rep.Adopted = append(rep.Adopted, k)
			continue
		}
		delete(r.runtimes, k)
		rep.Removed = append(rep.Removed, k)
	}
	slices.Sort(rep.Adopted)
	slices.Sort(rep.Removed)
	return rep, nil
}
