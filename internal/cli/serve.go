package cli

import (
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/hutchsandbox/hutch/internal/daemon"
	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/imagebuild"
	"github.com/hutchsandbox/hutch/internal/service"
)

func newServeCmd(g *globals) *cobra.Command {
	var (
		modeFlag, tcp, platforms, adminAddr, adminURL, tlsCert, tlsKey string
		grace                                                          time.Duration
	)
	cmd := &cobra.Command{
		Use:   "serve [--sandbox MODE] [--state-dir DIR] [WORKSPACE]",
		Short: "Run the hutch daemon: the HTTP API on a unix socket",
		Long: `Run hutch as a long-lived daemon. It serves the HTTP API (docs/api.md) on
<state-dir>/hutch.sock (0600) and, with --listen-tcp, on TCP behind a bearer
token. A TCP listener (the API's, the admin portal's) on an address other
than loopback needs TLS (--tls-cert, --tls-key): the token and the
portal's session would cross the network in clear. At start it checks that its mode can work here (the engine answers,
the image is present, the container exists and runs), adopts the managed
runtimes of known offices and removes those nothing accounts for. While it
runs it stops idle runtimes (sandbox.idleTimeout, default 10m) and, in
image mode, keeps runtimes started ahead of new conversations (sandbox.pool,
default 2 per image in use), which it removes when it stops.

Before all that it migrates a workspace of the raw-id layout to offices
(see hutch migrate) and refuses to start while anything blocks that.

It also serves the admin portal, a web page to see and steer every office
and runtime, on loopback (--admin-listen; off turns it off). Sign in with a
one-time link from hutch admin link.

On SIGINT or SIGTERM it stops accepting work, lets running commands finish
for --grace, kills what is left, and exits 0.

WORKSPACE, when given, is the workspace root (like --workspace).`,
		Example: "  hutch image build    # builds " + imagebuild.DefaultTag(Version) + ", once\n  hutch serve --sandbox image:" + imagebuild.DefaultTag(Version) + "\n  hutch serve --listen-tcp 127.0.0.1:7878 /srv/agents",
		Args:    cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				if g.workspace != "" && g.workspace != args[0] {
					return errdefs.New(errdefs.ErrInvalid, "Give the workspace once: as --workspace or as the argument")
				}
				g.workspace = args[0]
			}
			mode, err := g.sandboxMode(modeFlag)
			if err != nil {
				return err
			}
			svc, err := g.service()
			if err != nil {
				return err
			}
			log, err := g.logger()
			if err != nil {
				return err
			}
			ps, err := platformsFlag(platforms)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			// Nothing is accepted before the workspace is on the office
			// layout: a blocker stops the start with its instructions.
			if err := runMigrate(ctx, g, svc, service.MigrateOptions{Platforms: ps, Startup: true}, migrateOutput{}); err != nil {
				return err
			}
			if adminAddr == "off" {
				adminAddr = ""
			}
			err = daemon.Run(ctx, daemon.Options{
				Service: svc, Mode: mode, TCP: tcp, Token: g.env("HUTCH_API_TOKEN"), Grace: grace,
				Version: Version, Out: g.stdout, Log: log, Admin: adminAddr, AdminURL: adminURL,
				TLSCert: tlsCert, TLSKey: tlsKey,
			})
			if err != nil {
				return err
			}
			return printf(g.stdout, "hutch serve: stopped\n")
		},
	}
	cmd.Flags().StringVar(&modeFlag, "sandbox", "", "where commands run (default $HUTCH_SANDBOX or host)")
	cmd.Flags().StringVar(&tcp, "listen-tcp", "", "also serve the API on this TCP address; a bearer token is then required ($HUTCH_API_TOKEN, or one generated into <state-dir>/api-token)")
	cmd.Flags().StringVar(&platforms, "platforms", "", "enabled platforms for the start-up migration, comma-separated (default: the platforms setting)")
	cmd.Flags().StringVar(&g.logFormat, "log-format", "text", "how log lines on stderr are written: text (key=value) or json (one object a line)")
	cmd.Flags().DurationVar(&grace, "grace", 30*time.Second, "at shutdown, how long running commands may finish before they are killed")
	cmd.Flags().StringVar(&adminAddr, "admin-listen", "127.0.0.1:0", "serve the admin portal on this TCP address (a free port on loopback by default; off: no portal)")
	cmd.Flags().StringVar(&tlsCert, "tls-cert", "", "PEM certificate (chain) the TCP listeners, --listen-tcp and --admin-listen, serve TLS with; without it they must be on a loopback address")
	cmd.Flags().StringVar(&tlsKey, "tls-key", "", "PEM private key of --tls-cert")
	cmd.Flags().StringVar(&adminURL, "admin-url", "", "where browsers reach the admin portal, when not at its listen address (a reverse proxy, TLS): https://host[:port]")
	return cmd
}
