package box

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/hutchsandbox/hutch/internal/atomicfile"
	"github.com/hutchsandbox/hutch/internal/devcontainer"
	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/project"
)

// createHooks run once in a container's life, after it is first
// started, in this order; postStartCommand follows on every start.
var createHooks = []string{"onCreateCommand", "updateContentCommand", "postCreateCommand"}

// runLifecycle runs the devcontainer's lifecycle commands that are due
// in the sandbox t, as the spec orders them: the create hooks once per
// container (id), then postStartCommand when this Up started it. They
// run as every command does (the sandbox's user, limits, environment
// and network, nothing of the host), their output shown on Progress.
//
// The create hooks are recorded as run for the container before they
// start: one that fails is not run again by the next command, which
// would find the same failure in its way; the error says how to run it
// again.
func (b *Box) runLifecycle(ctx context.Context, t *Target, id string, started bool) error {
	if len(b.spec.Lifecycle) == 0 {
		return nil
	}
	marker := filepath.Join(b.opts.StateDir, "projects", b.spec.Name, "created-hooks")
	if have, err := os.ReadFile(marker); err != nil || strings.TrimSpace(string(have)) != id {
		if err := os.MkdirAll(filepath.Dir(marker), 0o700); err != nil {
			return fmt.Errorf("lifecycle marker: %w", err)
		}
		if err := atomicfile.WriteFile(marker, []byte(id+"\n"), 0o600); err != nil {
			return fmt.Errorf("lifecycle marker: %w", err)
		}
		for _, h := range createHooks {
			if err := b.RunHook(ctx, t, h); err != nil {
				return err
			}
		}
		started = true
	}
	if started {
		return b.RunHook(ctx, t, "postStartCommand")
	}
	return nil
}

// RunHook runs one lifecycle hook's commands in t: its entries one after
// the other (image metadata and features first, the file last), the
// commands of one entry (the object form) at once. The first failure
// ends the hook with an error naming the hook, where the command came
// from and how it ended.
func (b *Box) RunHook(ctx context.Context, t *Target, hook string) error {
	for _, entry := range b.spec.Lifecycle[hook] {
		if len(entry.Commands) == 0 {
			continue
		}
		b.stage(fmt.Sprintf("Running %s from %s…", hook, entry.Origin))
		out := &lockedWriter{w: b.opts.Progress}
		errs := make([]error, len(entry.Commands))
		var wg sync.WaitGroup
		for i, c := range entry.Commands {
			wg.Go(func() {
				var w io.Writer = out
				if len(entry.Commands) > 1 {
					w = &prefixWriter{w: out, prefix: "[" + c.Name + "] "}
				}
				errs[i] = b.runCommand(ctx, t, hook, entry.Origin, c, w)
				if pw, ok := w.(*prefixWriter); ok {
					pw.flush()
				}
			})
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// runCommand runs one command of a hook: the string form in /bin/sh -c,
// the array form as it is, both after the login shell every command
// gets (the image's profile and PATH).
func (b *Box) runCommand(ctx context.Context, t *Target, hook, origin string, c devcontainer.Command, w io.Writer) error {
	argv := c.Argv
	what := strings.Join(c.Argv, " ")
	if c.Shell != "" {
		argv = []string{"/bin/sh", "-c", c.Shell}
		what = c.Shell
	}
	limit := cmp.Or(b.spec.LifecycleTimeout, project.DefaultLifecycleTimeout)
	res, err := t.exec(ctx, argv, "", IO{Stdin: strings.NewReader(""), Stdout: w, Stderr: w}, limit)
	if err != nil {
		return fmt.Errorf("%s from %s (%s): %w", hook, origin, what, err)
	}
	how := ""
	switch {
	case res.TimedOut:
		how = fmt.Sprintf("was still running after %s (sandbox-lifecycle-timeout) and was stopped", project.FormatDuration(limit))
	case res.Aborted:
		how = "was interrupted"
	case res.OOMKilled:
		how = "ran out of the sandbox's memory (sandbox-memory)"
	case res.Signal != "":
		how = "was killed by " + res.Signal
	case res.ExitCode != 0:
		how = fmt.Sprintf("exited with %d", res.ExitCode)
	default:
		return nil
	}
	again := "Fix it, then run `hutch project rebuild` to run the create commands again, or run it yourself with `hutch project exec`."
	if hook == "postStartCommand" || hook == "postAttachCommand" {
		again = "Fix it; it runs again the next time the sandbox starts. Meanwhile the sandbox is up: `hutch project exec` works."
	}
	return errdefs.New(errdefs.ErrFailedPrecondition, fmt.Sprintf("The %s from %s (%s) %s. %s", hook, origin, what, how, again))
}

// lockedWriter serialises writes from commands running at once.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// maxPrefixLine is the longest line a prefixWriter holds back: a
// command that writes without newlines (its output is the checkout's,
// which agents edit) is cut into lines of this length rather than
// filling hutch's memory.
const maxPrefixLine = 4096

// prefixWriter writes whole lines, each with a prefix (the command's
// name), so the output of commands running at once stays readable.
type prefixWriter struct {
	w      io.Writer
	prefix string
	buf    []byte
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.buf = append(p.buf, b...)
	for {
		i := bytes.IndexByte(p.buf, '\n')
		if i < 0 {
			if len(p.buf) < maxPrefixLine {
				break
			}
			// A line this long is written in pieces, each a line.
			p.buf = slices.Insert(p.buf, maxPrefixLine, '\n')
			i = maxPrefixLine
		}
		if _, err := p.w.Write(append([]byte(p.prefix), p.buf[:i+1]...)); err != nil {
			return 0, err
		}
		p.buf = p.buf[i+1:]
	}
	return len(b), nil
}

// flush writes what is left of a last line without a newline.
func (p *prefixWriter) flush() {
	if len(p.buf) > 0 {
		_, _ = p.w.Write(append([]byte(p.prefix), append(p.buf, '\n')...))
		p.buf = nil
	}
}
