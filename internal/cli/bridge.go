package cli

import (
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/hutchsandbox/hutch/internal/bridge"
	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/imagebuild"
	"github.com/hutchsandbox/hutch/internal/sandbox"
)

// newBridgeCmd is `hutch bridge`: hutch as the far end of another hutch's
// cloudflare: mode.
func newBridgeCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bridge",
		Short: "Run commands for another hutch over HTTP",
		Long: `A bridge runs commands for hutch on another machine. hutch's
cloudflare:<sandbox-id> mode is its client: it reaches the bridge at
HUTCH_BRIDGE_URL with the bearer token HUTCH_BRIDGE_TOKEN. hutch bridge serve
makes this machine's hutch such a bridge. The protocol is in docs/bridge.md.`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newBridgeServeCmd(g))
	return cmd
}

func newBridgeServeCmd(g *globals) *cobra.Command {
	var (
		modeFlag, listen, cert, key string
		grace                       time.Duration
	)
	defaultMode := "image:" + imagebuild.DefaultTag(Version)
	cmd := &cobra.Command{
		Use:   "serve --listen ADDR [--sandbox MODE] [--tls-cert FILE --tls-key FILE] [--grace 30s]",
		Short: "Serve the bridge protocol over HTTP, backed by a local mode",
		Long: `Serve the bridge protocol (docs/bridge.md) on --listen, so that another
hutch's cloudflare:<sandbox-id> mode runs its commands on this machine. Point
its HUTCH_BRIDGE_URL here and give it the token as HUTCH_BRIDGE_TOKEN.

Every request needs "Authorization: Bearer <token>": $HUTCH_BRIDGE_TOKEN, or
else a token generated once into <state-dir>/bridge-token (0600); a wrong or
missing one is answered 401. GET /health says what the bridge speaks. POST
/exec runs one command: {"sandboxId", "command", "cwd", "timeoutSeconds",
"env"}, answered {"stdout", "stderr", "code", "error"}, with the extensions
stream (NDJSON output frames, then an exit line), cancel (closing the
connection, or POST /cancel, kills the command and everything it started),
execId (a repeat is answered 409 and runs nothing), argv and stdin.

Each sandboxId is the conversation web/<sandboxId> of this machine, run in
--sandbox with an office of its own, under the door policy, limits and idle
stop any conversation gets; /workspace in a request is that office. A
request's env reaches that command only and is never logged. With --tls-cert
and --tls-key it serves HTTPS.

At start it checks that the mode can work here. On SIGINT or SIGTERM it stops
accepting requests, lets running commands finish for --grace, kills what is
left, and exits 0.`,
		Example: "  hutch bridge serve --listen 127.0.0.1:7879\n" +
			"  hutch bridge serve --listen :7879 --tls-cert cert.pem --tls-key key.pem\n" +
			"  curl -H \"Authorization: Bearer $(cat ~/.hutch/bridge-token)\" -d '{\"sandboxId\":\"demo\",\"command\":\"uname -a\"}' http://127.0.0.1:7879/exec",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if listen == "" {
				return errdefs.New(errdefs.ErrInvalid, "Give the address to listen on, e.g. --listen 127.0.0.1:7879")
			}
			if modeFlag == "" {
				modeFlag = g.env("HUTCH_SANDBOX")
			}
			if modeFlag == "" {
				modeFlag = defaultMode
			}
			mode, err := sandbox.ParseMode(modeFlag)
			if err != nil {
				return err
			}
			svc, err := g.service()
			if err != nil {
				return err
			}
			defer func() { _ = svc.Close() }()
			log, err := g.logger()
			if err != nil {
				return err
			}
			token, from := g.env("HUTCH_BRIDGE_TOKEN"), "$HUTCH_BRIDGE_TOKEN"
			if token == "" {
				from = filepath.Join(svc.Layout().StateDir, bridge.TokenName)
				if token, err = bridge.LoadOrCreateToken(from); err != nil {
					return err
				}
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			err = bridge.Serve(ctx, bridge.ServeOptions{
				Options:   bridge.Options{Service: svc, Mode: mode, Token: token, Version: Version, Log: log},
				Listen:    listen,
				TLSCert:   cert,
				TLSKey:    key,
				Grace:     grace,
				TokenFrom: from,
				Out:       g.stdout,
			})
			if err != nil {
				return err
			}
			return printf(g.stdout, "hutch bridge: stopped\n")
		},
	}
	cmd.Flags().StringVar(&listen, "listen", "", "TCP address to serve on, e.g. 127.0.0.1:7879 (required)")
	cmd.Flags().StringVar(&modeFlag, "sandbox", "", "where commands run (default $HUTCH_SANDBOX or "+defaultMode+")")
	cmd.Flags().StringVar(&cert, "tls-cert", "", "PEM certificate (chain) file: serve HTTPS (with --tls-key)")
	cmd.Flags().StringVar(&key, "tls-key", "", "PEM private key file of --tls-cert")
	cmd.Flags().DurationVar(&grace, "grace", bridge.DefaultGrace, "at shutdown, how long running commands may finish before they are killed")
	return cmd
}
