// Package host is the host sandbox mode: commands run directly on the
// machine hutch runs on, as hutch's own user, with hutch's own environment.
// It enforces no boundary (policy refuses it whenever a conversation needs
// one), but it keeps the exec contract every mode keeps: streams kept
// apart and capped, stdin, exit code, a timeout and an abort that kill the
// whole process group.
package host

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/procio"
	"github.com/hutchsandbox/hutch/internal/sandbox"
)

// shell runs single-string commands.
const shell = "/bin/sh"

// defaultDrainGrace bounds how long Exec waits, once the command's process
// group is dead, for its output pipes to reach EOF. Only a process that left
// the group (setsid, setpgid) can still hold them open by then.
const defaultDrainGrace = 2 * time.Second

// Runtime runs commands on the host. The zero value is not usable; call New.
// A Runtime holds no per-command state and is safe for concurrent use.
type Runtime struct {
	log        *slog.Logger
	drainGrace time.Duration
}

var _ sandbox.Runtime = (*Runtime)(nil)

// New returns the host runtime. A nil log discards.
func New(log *slog.Logger) *Runtime {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Runtime{log: log, drainGrace: defaultDrainGrace}
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
// run without it. It runs in a process group of its own:
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
	if len(req.Env) > 0 {
		return sandbox.ExecResult{}, errdefs.New(errdefs.ErrInvalid, "Sandbox 'host' does not inject vault env")
	}
	if len(req.Argv) == 0 || (len(req.Argv) == 1 && strings.TrimSpace(req.Argv[0]) == "") {
		return sandbox.ExecResult{}, errdefs.New(errdefs.ErrInvalid, "Command is empty")
	}
	dir, err := workDir(spec.OfficeDir, req.Dir)
	if err != nil {
		return sandbox.ExecResult{}, err
	}
	path, args, prog, err := command(req.Argv, dir)
	if err != nil {
		return sandbox.ExecResult{}, err
	}
	if ctx.Err() != nil {
		// The caller gave up before anything ran: nothing to kill.
		return sandbox.ExecResult{ExitCode: -1, Aborted: true, Timeout: req.Timeout}, nil
	}
	return r.run(ctx, req, path, args, prog, dir)
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
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("Working directory %s cannot be resolved: %v", dir, err))
	}
	fi, err := os.Stat(abs)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", errdefs.New(errdefs.ErrInvalid, "Working directory does not exist: "+abs)
	case err != nil:
		return "", errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("Working directory %s cannot be used: %v", abs, err))
	case !fi.IsDir():
		return "", errdefs.New(errdefs.ErrInvalid, "Working directory is not a directory: "+abs)
	}
	return abs, nil
}

// command turns argv into the program path and arguments to execute, and
// the program name logs may show. A single element is a shell string.
func command(argv []string, dir string) (path string, args []string, prog string, err error) {
	if len(argv) == 1 {
		return shell, []string{"sh", "-c", argv[0]}, "sh", nil
	}
	p := argv[0]
	lookup := p
	if strings.Contains(p, "/") && !filepath.IsAbs(p) {
		// The child resolves it against its working directory, not ours.
		lookup = filepath.Join(dir, p)
	}
	path, err = exec.LookPath(lookup)
	switch {
	case err == nil:
		return path, argv, p, nil
	case p == "" || errors.Is(err, exec.ErrNotFound) || errors.Is(err, exec.ErrDot) || errors.Is(err, fs.ErrNotExist):
		return "", nil, "", errdefs.New(errdefs.ErrInvalid, "Program not found: "+p)
	default:
		return "", nil, "", errdefs.New(errdefs.ErrInvalid, "Program is not executable: "+p)
	}
}

// run starts the command and sees it to its end.
func (r *Runtime) run(ctx context.Context, req sandbox.ExecRequest, path string, args []string, prog, dir string) (sandbox.ExecResult, error) {
	// Pipes of our own, read by goroutines of our own: exec.Cmd would
	// otherwise copy into the writers itself, and Wait would block on any
	// process still holding them.
	var toClose []*os.File
	closeAll := func() {
		for _, f := range toClose {
			f.Close()
		}
	}
	newPipe := func() (*os.File, *os.File, error) {
		pr, pw, err := os.Pipe()
		if err != nil {
			return nil, nil, errdefs.New(errdefs.ErrUnavailable, fmt.Sprintf("Cannot create a pipe for the command: %v", err))
		}
		toClose = append(toClose, pr, pw)
		return pr, pw, nil
	}
	stdoutR, stdoutW, err := newPipe()
	if err != nil {
		closeAll()
		return sandbox.ExecResult{}, err
	}
	stderrR, stderrW, err := newPipe()
	if err != nil {
		closeAll()
		return sandbox.ExecResult{}, err
	}
	cmd := &exec.Cmd{
		Path:        path,
		Args:        args,
		Dir:         dir,
		Stdout:      stdoutW,
		Stderr:      stderrW,
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
		// Env nil: hutch's own environment (with PWD set to Dir).
	}
	if req.TimeZone != "" {
		cmd.Env = append(os.Environ(), "TZ="+req.TimeZone)
	}
	var stdinR, stdinW *os.File
	if req.Stdin != nil {
		stdinR, stdinW, err = newPipe()
		if err != nil {
			closeAll()
			return sandbox.ExecResult{}, err
		}
		cmd.Stdin = stdinR
	} // else exec.Cmd opens /dev/null.

	start := time.Now()
	err = cmd.Start()
	// The child has its copies; ours of its ends must go so EOF can come.
	stdoutW.Close()
	stderrW.Close()
	if stdinR != nil {
		stdinR.Close()
	}
	if err != nil {
		closeAll()
		return sandbox.ExecResult{}, procio.StartError(err, prog)
	}
	pid := cmd.Process.Pid // also the process group id
	log := r.log.With("pid", pid, "program", prog)
	log.Debug("host exec started", "dir", dir)

	outW, errW := req.Stdout, req.Stderr
	if sameWriter(outW, errW) {
		mu := new(sync.Mutex)
		outW, errW = &lockedWriter{mu: mu, w: outW}, &lockedWriter{mu: mu, w: errW}
	}
	outLatch, errLatch := latch(outW), latch(errW)
	stdout := sandbox.NewLimitWriter(asWriter(outLatch), req.OutputLimit)
	stderr := sandbox.NewLimitWriter(asWriter(errLatch), req.OutputLimit)
	var copies sync.WaitGroup
	copies.Go(func() { procio.Drain(stdoutR, stdout) })
	copies.Go(func() { procio.Drain(stderrR, stderr) })
	if stdinW != nil {
		go func() {
			// Errors are expected (EPIPE when the command does not read
			// it all, ErrClosed once it ended) and mean nothing more.
			_, _ = io.Copy(stdinW, req.Stdin)
			stdinW.Close()
		}()
	}

	exited := make(chan struct{})
	go func() {
		defer close(exited)
		if err := waitExited(pid); err != nil {
			log.Debug("host exec: waitid failed, falling back to wait", "err", err)
		}
	}()

	var timeout <-chan time.Time
	if req.Timeout > 0 {
		t := time.NewTimer(req.Timeout)
		defer t.Stop()
		timeout = t.C
	}
	var timedOut, aborted bool
	select {
	case <-exited:
	case <-timeout:
		select {
		case <-exited: // it ended on its own at the same moment
		default:
			timedOut = true
		}
	case <-ctx.Done():
		select {
		case <-exited:
		default:
			aborted = true
		}
	}
	if timedOut || aborted {
		r.killGroup(log, pid)
		<-exited
	}
	// The leader is a zombie now, not reaped yet, so pid still names its
	// group and cannot have been reused: kill what is left of the group
	// (background children do not outlive the command), then reap.
	r.killGroup(log, pid)
	waitErr := cmd.Wait()
	if stdinW != nil {
		stdinW.Close() // ends the stdin copy at its next write
	}

	// Drain the output up to EOF, but bounded: only a process that escaped
	// the group can still hold a pipe open now, and it must not hold the
	// command's result hostage. Closing our read ends makes the copy
	// goroutines return; the writers get nothing after Exec returns.
	drained := make(chan struct{})
	go func() {
		copies.Wait()
		close(drained)
	}()
	grace := time.NewTimer(r.drainGrace)
	select {
	case <-drained:
	case <-grace.C:
		log.Debug("host exec: a process that left the group holds the output open; closing it")
	}
	grace.Stop()
	stdoutR.Close()
	stderrR.Close()
	<-drained
	closeAll()

	res := sandbox.ExecResult{
		ExitCode:        -1,
		TimedOut:        timedOut,
		Aborted:         aborted,
		StdoutTruncated: stdout.Truncated(),
		StderrTruncated: stderr.Truncated(),
		StdoutBytes:     stdout.Total(),
		StderrBytes:     stderr.Total(),
		Duration:        time.Since(start),
		Timeout:         req.Timeout,
	}
	var signal string
	if st := cmd.ProcessState; st != nil {
		res.ExitCode = st.ExitCode() // -1 when a signal killed it
		if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			signal = unix.SignalName(ws.Signal())
		}
	} else {
		log.Debug("host exec: no exit status", "err", waitErr)
	}
	if timedOut || aborted {
		res.ExitCode = -1
	} else {
		res.Signal = signal
	}
	for _, s := range []struct {
		name string
		l    *latchWriter
	}{{"stdout", outLatch}, {"stderr", errLatch}} {
		if s.l != nil && s.l.err != nil {
			log.Warn("host exec: output writer failed; the rest of the stream was dropped", "stream", s.name, "err", s.l.err)
		}
	}
	log.Debug("host exec ended",
		"exit_code", res.ExitCode, "signal", signal, "timed_out", timedOut, "aborted", aborted,
		"duration", res.Duration, "stdout_bytes", res.StdoutBytes, "stderr_bytes", res.StderrBytes)
	return res, nil
}

// waitExited blocks until the process pid has exited, without reaping it.
func waitExited(pid int) error {
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

// killGroup sends SIGKILL to every process in the group pgid. The caller
// guarantees the group leader is not reaped yet, so the id is still ours.
func (r *Runtime) killGroup(log *slog.Logger, pgid int) {
	if err := unix.Kill(-pgid, unix.SIGKILL); err != nil && !errors.Is(err, unix.ESRCH) {
		log.Debug("host exec: killing the process group failed", "err", err)
	}
}

// latchWriter forwards to w until the first error, keeps it, and then
// swallows everything, so the stream keeps draining and being counted.
type latchWriter struct {
	w   io.Writer
	err error
}

// latch wraps w; a nil w stays nil (sandbox.NewLimitWriter discards it).
func latch(w io.Writer) *latchWriter {
	if w == nil {
		return nil
	}
	return &latchWriter{w: w}
}

// asWriter keeps a nil *latchWriter a nil io.Writer.
func asWriter(l *latchWriter) io.Writer {
	if l == nil {
		return nil
	}
	return l
}

func (l *latchWriter) Write(p []byte) (int, error) {
	if l.err == nil {
		if _, err := l.w.Write(p); err != nil {
			l.err = err
		}
	}
	return len(p), nil
}

// lockedWriter serialises writes when stdout and stderr share a writer.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// sameWriter reports whether a and b are the same writer, without the
// panic comparing two values of one uncomparable type would cause.
func sameWriter(a, b io.Writer) bool {
	if a == nil || b == nil {
		return false
	}
	t := reflect.TypeOf(a)
	return t == reflect.TypeOf(b) && t.Comparable() && a == b
}
