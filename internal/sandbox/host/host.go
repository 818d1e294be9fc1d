// Package host is the host sandbox mode: commands run directly on the
// machine hutch runs on, as hutch's own user, with hutch's own environment.
// It enforces no boundary (policy refuses it whenever a conversation needs
// one), but it keeps the exec contract every mode keeps: streams kept
// apart and capped, stdin, exit code, a timeout and an abort that kill the
// whole process group.
package host

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/supervise"
)

// Runtime runs commands on the host. The zero value is not usable; call New.
// A Runtime holds no per-command state and is safe for concurrent use.
type Runtime struct {
	log        *slog.Logger
	drainGrace time.Duration // zero: supervise.DefaultDrainGrace
	// injectEnv: run requests that carry Env with it (NewInjecting).
	injectEnv bool
}

var _ sandbox.Runtime = (*Runtime)(nil)

// New returns the host runtime. A nil log discards.
func New(log *slog.Logger) *Runtime {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Runtime{log: log}
}

// NewInjecting returns a host runtime that also injects each request's
// Env, as the modes with vault env do. Host mode itself never does (a
// request with Env is refused there, since it injects no vault env);
// sandbox/mock, which stands in for those modes in tests, runs its
// commands with this one.
func NewInjecting(log *slog.Logger) *Runtime {
	r := New(log)
	r.injectEnv = true
	return r
}

// Mode returns the host mode.
func (r *Runtime) Mode() sandbox.Mode { return sandbox.Mode{Kind: sandbox.KindHost} }

// Capabilities returns what host mode declares in the capability table.
func (r *Runtime) Capabilities() sandbox.Capabilities {
	return sandbox.CapabilitiesOf(sandbox.KindHost)
}

// Exec runs one command on the host and blocks until it ends.
//
// The command starts in spec.OfficeDir, or in req.Dir (a relative Dir is
// joined onto the office). It gets hutch's own environment; host mode
// injects no vault env, so a request carrying Env is refused rather than
// run without it. A program named without a slash is looked up in that
// environment's PATH as supervise.LookPath does, relative entries against
// the command's directory. It runs in a process group of its own:
//
//   - on req.Timeout the whole group is killed with SIGKILL and the result
//     has TimedOut set;
//   - when ctx is cancelled the whole group is killed with SIGKILL and the
//     result has Aborted set;
//   - when the leader exits on its own, whatever is left of its group
//     (background jobs started with `&`) is killed too: a command's
//     children never outlive it, so nothing keeps running unaccounted for,
//     holding the office or the output pipes after the result is reported.
//
// Output written before the command ended is delivered in full, except
// when a process that left the group (setsid) keeps a pipe open: Exec then
// waits at most about two seconds for EOF, closes its end and returns; what
// that process writes later is lost. Exec does not wait for a Read on
// req.Stdin still blocked when the command ends; that Read's bytes are
// dropped.
func (r *Runtime) Exec(ctx context.Context, spec sandbox.Spec, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	if len(req.Env) > 0 && !r.injectEnv {
		return sandbox.ExecResult{}, errdefs.New(errdefs.ErrInvalid, "Sandbox 'host' does not inject vault env")
	}
	if len(req.Argv) == 0 || (len(req.Argv) == 1 && strings.TrimSpace(req.Argv[0]) == "") {
		return sandbox.ExecResult{}, errdefs.New(errdefs.ErrInvalid, "Command is empty")
	}
	dir, err := workDir(spec.OfficeDir, req.Dir)
	if err != nil {
		return sandbox.ExecResult{}, err
	}
	cmd, err := supervise.Resolve(req.Argv, dir, commandEnv(dir, req))
	if err != nil {
		return sandbox.ExecResult{}, err
	}
	if ctx.Err() != nil {
		// The caller gave up before anything ran: nothing to kill.
		return sandbox.ExecResult{ExitCode: -1, Aborted: true, Timeout: req.Timeout}, nil
	}
	return r.run(ctx, req, cmd)
}

// workDir resolves the command's working directory and checks it is one.
func workDir(office, dir string) (string, error) {
	switch {
	case dir == "":
		dir = office
	case !filepath.IsAbs(dir):
		if office == "" {
			return "", errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("Working directory %s is relative but the office directory is not set", dir))
		}
		dir = filepath.Join(office, dir)
	}
	if dir == "" {
		return "", errdefs.New(errdefs.ErrInvalid, "Working directory is not set: the office directory is empty")
	}
	return supervise.WorkDir(dir)
}

// commandEnv is hutch's own environment, with PWD naming the command's
// directory (as a shell started there would set it) and the request's
// time zone.
func commandEnv(dir string, req sandbox.ExecRequest) []string {
	overlay := maps.Clone(req.EnvWithTimeZone()) // host mode refuses Env: at most TZ (NewInjecting's has Env)
	if overlay == nil {
		overlay = map[string]string{}
	}
	overlay["PWD"] = dir
	return supervise.OverlayEnv(os.Environ(), overlay)
}

// run starts the command and sees it to its end.
func (r *Runtime) run(ctx context.Context, req sandbox.ExecRequest, cmd supervise.Command) (sandbox.ExecResult, error) {
	outW, errW := supervise.Serialize(req.Stdout, req.Stderr)
	outLatch, errLatch := supervise.NewLatch(outW), supervise.NewLatch(errW)
	stdout := sandbox.NewLimitWriter(outLatch, req.OutputLimit)
	stderr := sandbox.NewLimitWriter(errLatch, req.OutputLimit)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = req.Stdin, stdout, stderr
	cmd.Timeout, cmd.DrainGrace, cmd.Log = req.Timeout, r.drainGrace, r.log
	p, err := supervise.Start(cmd)
	if err != nil {
		return sandbox.ExecResult{}, err
	}
	log := r.log.With("pid", p.Pid(), "program", cmd.Prog)
	log.Debug("host exec started", "dir", cmd.Dir)

	sr := p.Wait(ctx)
	res := sandbox.ExecResult{
		ExitCode:        sr.ExitCode,
		Signal:          sr.Signal,
		TimedOut:        sr.TimedOut,
		Aborted:         sr.Aborted,
		StdoutTruncated: stdout.Truncated(),
		StderrTruncated: stderr.Truncated(),
		StdoutBytes:     stdout.Total(),
		StderrBytes:     stderr.Total(),
		Duration:        sr.Duration,
		Timeout:         req.Timeout,
	}
	for _, s := range []struct {
		name string
		l    *supervise.Latch
	}{{"stdout", outLatch}, {"stderr", errLatch}} {
		if err := s.l.Err(); err != nil {
			log.Warn("host exec: output writer failed; the rest of the stream was dropped", "stream", s.name, "err", err)
		}
	}
	log.Debug("host exec ended",
		"exit_code", res.ExitCode, "signal", res.Signal, "timed_out", res.TimedOut, "aborted", res.Aborted,
		"duration", res.Duration, "stdout_bytes", res.StdoutBytes, "stderr_bytes", res.StderrBytes)
	return res, nil
}
