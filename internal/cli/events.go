package cli

import (
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/events"
)

func newEventsCmd(g *globals) *cobra.Command {
	var (
		follow, asJSON bool
		n              int
	)
	cmd := &cobra.Command{
		Use:   "events",
		Short: "Show the log of changes: runtimes, limits, doors, vaults, refusals",
		Long: `Show the event log: every change made through any surface (the CLI, the
HTTP API, chat, MCP's sandbox tool, the admin portal, the daemon on its
own), oldest first. Runtimes created, re-created (with why), stopped and
removed; limits set and boosts; door policies; vault variables and files
set or removed and placeholder marks (names only, never a value);
global settings; refusals. The portal's audit page and GET /v1/events
show the same log.

It is read from the state dir (<state-dir>/events.jsonl and the one older
file kept when it rotates), with or without a daemon. Each line is the
time (UTC), the surface, who when known, the action, what it was on and
a detail; --json prints the events as JSON lines instead, one object a
line: {time, surface, who, action, target, detail} (docs/api.md, Events).
--follow keeps printing new events until interrupted.`,
		Example: "  hutch events -n 50\n  hutch events --follow\n  hutch events --json | jq -r 'select(.action == \"refused\") | .detail'",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if n < 0 || n > events.MaxLast {
				return errdefs.New(errdefs.ErrInvalid, "-n must be between 0 and 1000")
			}
			svc, err := g.service()
			if err != nil {
				return err
			}
			emit := func(e events.Event) error { return printEvent(g.stdout, e, asJSON) }
			if !follow {
				evs, err := svc.Events().Last(n)
				if err != nil {
					return err
				}
				for _, e := range evs {
					if err := emit(e); err != nil {
						return err
					}
				}
				return nil
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return svc.Events().Follow(ctx, n, emit)
		},
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing new events until interrupted")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON lines: one event object a line")
	cmd.Flags().IntVarP(&n, "lines", "n", 20, "how many past events to show first (at most 1000)")
	return cmd
}

// printEvent writes e as a line of text (time first) or of JSON.
func printEvent(w io.Writer, e events.Event, asJSON bool) error {
	if asJSON {
		_, err := w.Write(e.Line())
		return err
	}
	_, err := io.WriteString(w, e.Text()+"\n")
	return err
}
