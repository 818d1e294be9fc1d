package cli

import (
	"context"
	"errors"
	"io"
	"os"
	"time"

	"github.com/hutchsandbox/hutch/client"
	"github.com/hutchsandbox/hutch/internal/api"
	"github.com/hutchsandbox/hutch/internal/daemon"
	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/events"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/service"
)

// daemon returns a client of the state dir's daemon when one answers and
// serves the mode asked for (explicit "" = any). Commands then run there,
// where the daemon tracks them; otherwise they run in this process.
func (g *globals) daemon(ctx context.Context, svc *service.Service, explicit string) (*client.Client, bool) {
	c := &client.Client{Socket: daemon.SocketPath(svc.Layout().StateDir), Surface: events.SurfaceCLI, Who: g.operator()}
	if _, err := os.Stat(c.Socket); err != nil {
		return nil, false
	}
	h, ok := c.Answers(ctx, 500*time.Millisecond)
	if !ok {
		return nil, false
	}
	if explicit != "" {
		m, err := sandbox.ParseMode(explicit)
		if err != nil || m.String() != h.Mode {
			return nil, false
		}
	}
	return c, true
}

// maxDaemonStdin bounds what hutch exec forwards from a piped stdin.
const maxDaemonStdin = 4 << 20

// execViaDaemon runs one exec through the daemon's API.
func execViaDaemon(ctx context.Context, c *client.Client, o service.ExecOptions, g *globals) (sandbox.ExecResult, error) {
	req := api.ExecRequest{
		Conversation:   api.Conversation{Platform: string(o.Address.Platform), ConversationID: o.Address.ConversationID, User: o.User},
		Cwd:            o.Dir,
		TimeoutSeconds: o.Timeout.Seconds(),
		MaxOutput:      o.OutputLimit,
	}
	if len(o.Argv) == 1 {
		req.Command = o.Argv[0]
	} else {
		req.Argv = o.Argv
	}
	// A terminal is not forwarded (reading it would wait for the user);
	// piped input is, up to a bound.
	if f, ok := o.Stdin.(*os.File); !ok || !isTerminal(f) {
		if o.Stdin != nil {
			data, err := io.ReadAll(io.LimitReader(o.Stdin, maxDaemonStdin+1))
			if err != nil {
				return sandbox.ExecResult{}, err
			}
			if len(data) > maxDaemonStdin {
				return sandbox.ExecResult{}, errdefs.New(errdefs.ErrInvalid, "Standard input is larger than 4 MiB, the most the daemon takes in one exec")
			}
			req.Stdin = string(data)
		}
	}
	if o.OutputLimit == 0 {
		// The daemon always caps what it holds; ask for a generous cap.
		req.MaxOutput = 1 << 40
	}
	r, err := c.Exec(ctx, req, nil, o.Stdout, o.Stderr)
	if errors.Is(err, context.Canceled) {
		return sandbox.ExecResult{Aborted: true, ExitCode: -1}, nil
	}
	if err != nil {
		return sandbox.ExecResult{}, classed(err)
	}
	return sandbox.ExecResult{
		ExitCode: r.ExitCode, Signal: r.Signal, TimedOut: r.TimedOut, KillUnconfirmed: r.KillUnconfirmed, Aborted: r.Aborted, OOMKilled: r.OOMKilled,
		StdoutTruncated: r.StdoutTruncated, StderrTruncated: r.StderrTruncated, StdoutBytes: r.StdoutBytes, StderrBytes: r.StderrBytes,
		Duration: time.Duration(r.DurationSeconds * float64(time.Second)), Timeout: o.Timeout,
	}, nil
}

func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// classed turns an error of the daemon's client into one of hutch's
// classes, as if the daemon's error had been returned in this process:
// an answered error by its code, a daemon that did not answer as
// unavailable. Other errors (a context's, a writer's) pass unchanged.
func classed(err error) error {
	var ce *client.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ce):
		return errdefs.FromCode(ce.Code, ce.Message)
	case errors.Is(err, client.ErrNoAnswer):
		return errdefs.New(errdefs.ErrUnavailable, err.Error())
	}
	return err
}
