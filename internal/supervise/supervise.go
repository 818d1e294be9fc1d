// Package supervise runs commands as local processes. Two places in hutch
// do that: host mode, in the daemon's own process, and the agent inside a
// sandbox, often as its init. Both keep the same exec contract, so one
// supervisor keeps it for both, the way one executor serves every driver
// of a scheduler:
//
//   - the command starts in a process group of its own, with stdout and
//     stderr on pipes kept apart and stdin fed from a reader;
//   - a timeout or an abort kills the whole group, and so does the
//     leader's own exit: a command's background children never outlive
//     it, so nothing keeps running unaccounted for, holding the working
//     directory or the output pipes after the result is reported;
//   - output is drained to EOF once the group is dead, but for a bounded
//     grace only: a process that left the group (setsid) must not hold
//     the result hostage;
//   - a program is looked up by one rule (LookPath), and a command that
//     cannot start fails with one set of texts.
//
// Each caller keeps what is its own: host mode its environment and result
// type, the agent its protocol and its cgroup's OOM count.
//
// A process has one reaper, since wait4 and SIGCHLD are process-wide; this
// package owns it (see ReapAll and KillAll).
package supervise

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hutchsandbox/hutch/internal/errdefs"
)

// DefaultDrainGrace bounds how long Wait waits, once the command's process
// group is dead, for its output pipes to reach EOF. Only a process that
// left the group (setsid, setpgid) can still hold them open by then.
const DefaultDrainGrace = 2 * time.Second

// Command is a process to run. Resolve fills in the program, Start starts
// it and the returned Process's Wait sees it to its end.
type Command struct {
	// Path is the program to execute, as LookPath found it.
	Path string
	// Args is its argv, Args[0] included.
	Args []string
	// Prog is the program as the caller named it: error texts and logs
	// show it, never a path the caller did not write.
	Prog string
	// Dir is the working directory.
	Dir string
	// Env is the whole environment.
	Env []string
	// Cgroup, when set, is a cgroup v2 directory the process is started
	// in (clone3 CLONE_INTO_CGROUP, so not even its first instruction
	// runs outside it). The command cannot start when the directory
	// cannot be used.
	Cgroup string

	// Stdin feeds the process's stdin; nil gives it /dev/null (a program
	// that reads stdin when it is a pipe must not wait on an empty one).
	Stdin io.Reader
	// StdinCloser, when set, is closed once the process has ended, to
	// end a Read of Stdin still waiting for bytes nobody will use; Wait
	// then returns only after the copy has (an HTTP handler must not
	// touch its request body once it returned). Without it Wait does not
	// wait for such a Read, and the bytes it returns are dropped.
	StdinCloser io.Closer
	// Stdout and Stderr receive the output, each from a goroutine of its
	// own (see Serialize when they are one writer). Their errors are
	// ignored, so a broken consumer never blocks the command on a full
	// pipe: wrap them in a Latch to learn of one. Nil discards.
	Stdout, Stderr io.Writer

	// Timeout, when positive, is how long the command may run, counted
	// from Wait: then its group is killed and the result is TimedOut.
	Timeout time.Duration
	// DrainGrace bounds the wait for output after the group is dead;
	// zero is DefaultDrainGrace.
	DrainGrace time.Duration
	// Log receives what only a developer needs; nil discards.
	Log *slog.Logger
}

// Process is a started command. Wait must be called exactly once.
type Process struct {
	cmd    Command
	pid    int
	exited <-chan unix.WaitStatus
	start  time.Time
	log    *slog.Logger

	// Our ends of the pipes; stdinW is nil when stdin is /dev/null.
	stdinW, stdoutR, stderrR *os.File
}

// Result is how a command ended.
type Result struct {
	// ExitCode is the exit status, or -1 when a signal ended the process
	// or it timed out or was aborted.
	ExitCode int
	// Signal names the signal that ended the process (SIGSEGV), except
	// after a timeout or an abort: the SIGKILL was ours then, and saying
	// why it came tells more than naming it.
	Signal string
	// TimedOut is set when Timeout passed and the group was killed.
	TimedOut bool
	// Aborted is set when Wait's context ended and the group was killed.
	Aborted bool
	// Duration runs from Start to the end of Wait.
	Duration time.Duration
}

// Start starts cmd in a process group of its own. Its output is not read
// until Wait is called, so the caller may ready its writers in between.
// Errors are of the classes in errdefs, with texts a user may see.
func Start(cmd Command) (*Process, error) {
	// Pipes of our own, read by goroutines of our own: our ends stay in
	// non-blocking mode, so closing them ends a Read a process that left
	// the group keeps waiting.
	var child, ours []*os.File
	closeAll := func(fs []*os.File) {
		for _, f := range fs {
			_ = f.Close()
		}
	}
	newPipe := func() (r, w *os.File, err error) {
		r, w, err = os.Pipe()
		if err != nil {
			closeAll(child)
			closeAll(ours)
			return nil, nil, errdefs.New(errdefs.ErrUnavailable, fmt.Sprintf("Cannot create a pipe for the command: %v", err))
		}
		return r, w, nil
	}
	p := &Process{cmd: cmd}
	var stdin *os.File
	if cmd.Stdin != nil {
		r, w, err := newPipe()
		if err != nil {
			return nil, err
		}
		child, ours, stdin, p.stdinW = append(child, r), append(ours, w), r, w
	} else {
		f, err := os.Open(os.DevNull)
		if err != nil {
			return nil, errdefs.New(errdefs.ErrUnavailable, fmt.Sprintf("Cannot open %s for the command's stdin: %v", os.DevNull, err))
		}
		child, stdin = append(child, f), f
	}
	stdoutR, stdoutW, err := newPipe()
	if err != nil {
		return nil, err
	}
	child, ours = append(child, stdoutW), append(ours, stdoutR)
	stderrR, stderrW, err := newPipe()
	if err != nil {
		return nil, err
	}
	child, ours = append(child, stderrW), append(ours, stderrR)
	p.stdoutR, p.stderrR = stdoutR, stderrR

	sys := &syscall.SysProcAttr{Setpgid: true}
	if cmd.Cgroup != "" {
		fd, err := openCgroup(cmd.Cgroup)
		if err != nil {
			closeAll(child)
			closeAll(ours)
			return nil, err
		}
		defer func() { _ = unix.Close(fd) }()
		sys.UseCgroupFD, sys.CgroupFD = true, fd
	}
	attr := &syscall.ProcAttr{
		Dir:   cmd.Dir,
		Env:   cmd.Env,
		Files: []uintptr{stdin.Fd(), stdoutW.Fd(), stderrW.Fd()},
		Sys:   sys,
	}
	p.start = time.Now()
	p.pid, p.exited, err = processReaper().start(cmd.Path, cmd.Args, attr)
	// The child has its copies; ours of its ends must go so EOF can come.
	closeAll(child)
	if err != nil {
		closeAll(ours)
		return nil, startError(err, cmd.Prog, cmd.Cgroup)
	}
	p.log = cmd.Log
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	p.log = p.log.With("pid", p.pid, "program", cmd.Prog)
	return p, nil
}

// Pid is the process id of the command's leader, which is also its
// process group's id.
func (p *Process) Pid() int { return p.pid }

// Wait copies the command's output and stdin, and sees the command to its
// end: its leader exits, Timeout passes, or ctx ends. Whichever comes
// first, the whole group is killed before the leader is reaped. Output
// written before the group died is delivered in full, unless a process
// that left the group keeps a pipe open past DrainGrace; what it writes
// later is lost. The writers get nothing after Wait returns.
func (p *Process) Wait(ctx context.Context) Result {
	stdout, stderr := p.cmd.Stdout, p.cmd.Stderr
	if stdout == nil {
		stdout = io.Discard
	}
	if stderr == nil {
		stderr = io.Discard
	}
	var copies sync.WaitGroup
	copies.Go(func() { copyOutput(p.stdoutR, stdout) })
	copies.Go(func() { copyOutput(p.stderrR, stderr) })
	var stdinDone sync.WaitGroup
	if p.stdinW != nil {
		stdinDone.Go(func() {
			// Errors are expected (EPIPE when the command does not read
			// it all, ErrClosed once it ended) and mean nothing more.
			_, _ = io.Copy(p.stdinW, p.cmd.Stdin)
			_ = p.stdinW.Close()
		})
	}

	var timeout <-chan time.Time
	if p.cmd.Timeout > 0 {
		t := time.NewTimer(p.cmd.Timeout)
		defer t.Stop()
		timeout = t.C
	}
	var (
		ws                unix.WaitStatus
		timedOut, aborted bool
	)
	select {
	case ws = <-p.exited:
	case <-timeout:
		timedOut = true
	case <-ctx.Done():
		aborted = true
	}
	if timedOut || aborted {
		select {
		case ws = <-p.exited: // it ended on its own at the same moment
			timedOut, aborted = false, false
		default:
			if err := processReaper().killGroup(p.pid); err != nil {
				p.log.Warn("supervise: killing the process group failed", "err", err)
			}
			ws = <-p.exited
		}
	}
	// The reaper killed what was left of the group before reaping the
	// leader. End the stdin copy: at its next write, or now if the caller
	// can end a Read that waits for more.
	if p.stdinW != nil {
		_ = p.stdinW.Close()
		if p.cmd.StdinCloser != nil {
			_ = p.cmd.StdinCloser.Close()
			stdinDone.Wait()
		}
	}
	p.drain(&copies)

	res := Result{ExitCode: -1, TimedOut: timedOut, Aborted: aborted}
	switch {
	case timedOut || aborted:
	case ws.Exited():
		res.ExitCode = ws.ExitStatus()
	case ws.Signaled():
		res.Signal = unix.SignalName(ws.Signal())
	}
	res.Duration = time.Since(p.start)
	return res
}

// drain waits for the output copies to reach EOF, but bounded: only a
// process that escaped the group can still hold a pipe open now. Closing
// our read ends makes the copies return.
func (p *Process) drain(copies *sync.WaitGroup) {
	drained := make(chan struct{})
	go func() {
		copies.Wait()
		close(drained)
	}()
	grace := p.cmd.DrainGrace
	if grace <= 0 {
		grace = DefaultDrainGrace
	}
	t := time.NewTimer(grace)
	select {
	case <-drained:
	case <-t.C:
		p.log.Debug("supervise: a process that left the group holds the output open; closing it")
	}
	t.Stop()
	_ = p.stdoutR.Close()
	_ = p.stderrR.Close()
	<-drained
}

// copyBufferSize is the chunk copyOutput reads: the only memory a stream costs
// beyond what its writer keeps, and so the largest write a writer gets
// (the agent's exec frames are no larger).
const copyBufferSize = 32 << 10

// copyOutput copies r into w until EOF or until r is closed under it.
// Errors of w are ignored: the caller's writer decides what a broken
// reader means, and the command must never block on a full pipe because
// of one.
func copyOutput(r io.Reader, w io.Writer) {
	buf := make([]byte, copyBufferSize)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			_, _ = w.Write(buf[:n])
		}
		if err != nil {
			return
		}
	}
}
