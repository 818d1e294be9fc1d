package cli

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/hutchsandbox/hutch/internal/api"
	"github.com/hutchsandbox/hutch/internal/errdefs"
)

// newAdminCmd is `hutch admin`, the admin portal's helpers.
func newAdminCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "admin",
		Short: "Admin portal helpers",
		Long: `hutch serve serves an admin portal: a web page to see every office and
runtime and to steer them (door policies, limits, boosts, stops). A browser
signs in with a one-time link.`,
	}
	cmd.AddCommand(newAdminLinkCmd(g))
	return cmd
}

func newAdminLinkCmd(g *globals) *cobra.Command {
	var ttl time.Duration
	cmd := &cobra.Command{
		Use:   "link [--ttl 30m]",
		Short: "Print a one-time sign-in link to the admin portal",
		Long: `Ask the running daemon for a link that signs one browser in to the admin
portal. The link works once and only for --ttl; opening it shows a sign-in
button, and the session it starts is recorded in the portal's audit log as
yours. Anyone holding an unused link can sign in: send it only over a
channel you trust.`,
		Example: "  hutch admin link\n  hutch admin link --ttl 10m",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			svc, err := g.service()
			if err != nil {
				return err
			}
			defer func() { _ = svc.Close() }()
			c, ok := g.daemon(cmd.Context(), svc, "")
			if !ok {
				return errdefs.New(errdefs.ErrUnavailable, "No hutch serve answers for this state dir: the admin portal is part of the daemon, start it first")
			}
			res, err := c.AdminLink(cmd.Context(), api.AdminLinkRequest{Who: g.localUser(), TTL: ttl.String()})
			if err != nil {
				return classed(err)
			}
			if err := printf(g.stdout, "%s\n", res.URL); err != nil {
				return err
			}
			note(g.stderr, "Good once, until %s.\n", res.Expires.Local().Format("15:04 MST"))
			return nil
		},
	}
	cmd.Flags().DurationVar(&ttl, "ttl", 30*time.Minute, "how long the link is good for (1m to 24h)")
	return cmd
}

// localUser names the person at this terminal for the audit log.
func (g *globals) localUser() string {
	if who := g.operator(); who != "" {
		return who + " (hutch admin link)"
	}
	return "hutch admin link"
}
