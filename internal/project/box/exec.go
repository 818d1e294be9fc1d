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

// keepPath is the part of a command's wrapper that runs inside the login
// shell, after its profile: a profile such as Debian's sets PATH from
// scratch, which drops what the image put there (/usr/local/go/bin in a
// golang image), so every entry of the PATH the container had
// (HUTCH_IMAGE_PATH) that the profile left out is appended. Globbing is
// off while the entries are split on ':'.
const keepPath = `set -f; IFS=:; for d in $HUTCH_IMAGE_PATH; do [ -n "$d" ] || continue; case ":$PATH:" in *":$d:"*) ;; *) PATH="$PATH:$d" ;; esac; done; unset IFS HUTCH_IMAGE_PATH; set +f; export PATH; `

// withImagePath wraps a login shell's script: the outer shell, which
// still has the container's environment, hands its PATH on to the login
// shell, which restores it after the profile (keepPath).
func withImagePath(script string) []string {
	return []string{"/bin/sh", "-c", `HUTCH_IMAGE_PATH="$PATH" exec /bin/sh -lc '` + keepPath + script + `' sh "$@"`, "sh"}
}

// LoginShell is what `hutch project shell` runs: the profile read by a
// login sh, the image's PATH kept (withImagePath), then bash when the
// image has it, else sh.
var LoginShell = withImagePath(`command -v bash >/dev/null 2>&1 && exec bash; exec sh`)

// loginExec runs argv after a login shell's profile, so what the image's
// profile sets applies, with the image's PATH kept (withImagePath),
// passing every argument as it is: argv never goes through a shell's
// parser, whatever bytes it holds.
func loginExec(argv []string) []string {
	return append(withImagePath(`exec "$@"`), argv...)
}

// IO is a command's standard streams.
type IO struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
}

// Exec runs argv in the target's dir (the workdir when empty) through
// the agent, without a TTY, and returns how it ended.
func (t *Target) Exec(ctx context.Context, argv []string, dir string, stdio IO) (sandbox.ExecResult, error) {
	return t.exec(ctx, argv, dir, stdio, 0)
}

// exec is Exec with a timeout (0: none), past which the agent kills the
// command's process group and reports TimedOut.
func (t *Target) exec(ctx context.Context, argv []string, dir string, stdio IO, timeout time.Duration) (sandbox.ExecResult, error) {
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
		Argv:    loginExec(argv),
		Dir:     dir,
		Env:     env,
		Stdin:   stdio.Stdin,
		Stdout:  stdio.Stdout,
		Stderr:  stdio.Stderr,
		Timeout: timeout,
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
