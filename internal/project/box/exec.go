package box

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/moby/moby/client"
	"golang.org/x/term"

	"github.com/hutchsandbox/hutch/internal/engine"
	"github.com/hutchsandbox/hutch/internal/sandbox"
)

// LoginShell is what `hutch project shell` runs: bash as a login shell
// when the image has it, else sh.
var LoginShell = []string{"/bin/sh", "-c", "command -v bash >/dev/null 2>&1 && exec bash -l || exec sh -l"}

// loginExec runs argv in a login shell, so the image's profile (PATH)
// applies, passing every argument as it is: argv never goes through a
// shell's parser, whatever bytes it holds.
func loginExec(argv []string) []string {
	return append([]string{"/bin/sh", "-lc", `exec "$@"`, "sh"}, argv...)
}

// IO is a command's standard streams.
type IO struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
}

// Exec runs argv in the target's dir (the workdir when empty) through
// the agent, without a TTY, and returns how it ended.
func (t *Target) Exec(ctx context.Context, argv []string, dir string, stdio IO) (sandbox.ExecResult, error) {
	if dir == "" {
		dir = t.Workdir
	}
	env := map[string]string{}
	for _, kv := range t.Env {
		if k, v, ok := cut(kv); ok {
			env[k] = v
		}
	}
	return t.agent.Exec(ctx, sandbox.ExecRequest{
		Argv:   loginExec(argv),
		Dir:    dir,
		Env:    env,
		Stdin:  stdio.Stdin,
		Stdout: stdio.Stdout,
		Stderr: stdio.Stderr,
	})
}

func cut(kv string) (string, string, bool) {
	for i := 0; i < len(kv); i++ {
		if kv[i] == '=' {
			return kv[:i], kv[i+1:], true
		}
	}
	return "", "", false
}

// ExecTTY runs argv (LoginShell when login is set and argv empty) in the
// target with a real terminal: stdin is put in raw mode, the window size
// follows the terminal's, and the exit code is returned. in must be a
// terminal.
func (b *Box) ExecTTY(ctx context.Context, t *Target, argv []string, dir string, in *os.File, out io.Writer) (int, error) {
	if dir == "" {
		dir = t.Workdir
	}
	cmd := LoginShell
	if len(argv) > 0 {
		cmd = loginExec(argv)
	}
	fd := int(in.Fd())
	w, h, _ := term.GetSize(fd)
	api := b.opts.Engine.Client
	ex, err := api.ExecCreate(ctx, t.ID, client.ExecCreateOptions{
		User: t.User, TTY: true, AttachStdin: true, AttachStdout: true, AttachStderr: true,
		Env: t.Env, WorkingDir: dir, Cmd: cmd,
		ConsoleSize: client.ConsoleSize{Height: uint(h), Width: uint(w)},
	})
	if err != nil {
		return -1, engine.Classify(err, "exec in the sandbox "+t.Name)
	}
	att, err := api.ExecAttach(ctx, ex.ID, client.ExecAttachOptions{TTY: true, ConsoleSize: client.ConsoleSize{Height: uint(h), Width: uint(w)}})
	if err != nil {
		return -1, engine.Classify(err, "attach to the sandbox "+t.Name)
	}
	defer att.Close()
	old, err := term.MakeRaw(fd)
	if err != nil {
		return -1, fmt.Errorf("terminal raw mode: %w", err)
	}
	defer func() { _ = term.Restore(fd, old) }()

	// Follow window size changes until the session ends (no signal is
	// sent on winch once Stop returned, so closing it ends the loop).
	winch := make(chan os.Signal, 1)
	signal.Notify(winch, syscall.SIGWINCH)
	defer func() { signal.Stop(winch); close(winch) }()
	go func() {
		for range winch {
			if w, h, err := term.GetSize(fd); err == nil {
				_, _ = api.ExecResize(ctx, ex.ID, client.ExecResizeOptions{Height: uint(h), Width: uint(w)})
			}
		}
	}()

	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, _ = io.Copy(out, att.Reader)
	}()
	go func() {
		_, _ = io.Copy(att.Conn, in)
		_ = att.CloseWrite()
	}()
	wg.Wait()
	return execExitCode(ctx, api, ex.ID)
}

// execExitCode waits for an engine exec to be reported finished.
func execExitCode(ctx context.Context, api *client.Client, id string) (int, error) {
	for deadline := time.Now().Add(10 * time.Second); ; {
		in, err := api.ExecInspect(ctx, id, client.ExecInspectOptions{})
		if err != nil {
			return -1, engine.Classify(err, "inspect exec")
		}
		if !in.Running {
			return in.ExitCode, nil
		}
		if time.Now().After(deadline) {
			return -1, errors.New("the engine did not report the session's end")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
