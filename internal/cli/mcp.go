package cli

import (
	"errors"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/imagebuild"
	"github.com/hutchsandbox/hutch/internal/mcpserver"
	"github.com/hutchsandbox/hutch/internal/office"
)

func init() { mcpserver.Version = Version }

func newMCPCmd(g *globals) *cobra.Command {
	var modeFlag, conv, user string
	cmd := &cobra.Command{
		Use:   "mcp --conversation <platform>/<conversation-id> [--sandbox MODE] [--user ID]",
		Short: "Serve a conversation's sandbox tools over MCP on stdin and stdout",
		Long: `Serve the agent tools of one conversation as a Model Context Protocol
server on stdin and stdout, for an MCP client that starts hutch as a
subprocess. Logs go to stderr; stdout carries only the protocol.

The tools run in the conversation's sandbox (--sandbox), exactly as
hutch exec runs commands:

  bash     run a shell command in the office; output over 2000 lines or
           50 KiB is saved in the office (.hutch/output/<id>.log) and its
           tail returned; a non-zero exit is a tool error
  read     read a file, paged by lines (2000 lines / 50 KiB per call),
           or an image (png, jpeg, gif, webp)
  write    create or replace a file atomically, creating its parents
  edit     replace one exact occurrence of a text, with a diff
  sandbox  show the sandbox's limits, or set temporary ones (image mode)

Paths are relative to the office or absolute inside the sandbox; nothing
outside what the door policy projects can be reached, symlinks included.

Before serving, hutch checks that the mode can run here and can enforce
the conversation's door policy and vault, and refuses with the reason if
not. Host mode needs an explicit trusted door policy (hutch door set
<conversation> shared).

The daemon (hutch serve) serves the same tools over streamable HTTP,
choosing the conversation per connection.`,
		Example: `  hutch door set slack/C0123ABC shared
  hutch mcp --conversation slack/C0123ABC

  # in an MCP client's configuration:
  # (image:` + imagebuild.DefaultTag(Version) + ` is what hutch image build builds)
  {"command": "hutch", "args": ["mcp", "--conversation", "web/demo", "--sandbox", "image:` + imagebuild.DefaultTag(Version) + `"]}`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if conv == "" {
				return errdefs.New(errdefs.ErrInvalid, "--conversation <platform>/<conversation-id> is required")
			}
			addr, err := office.ParseAddress(conv)
			if err != nil {
				return err
			}
			mode, err := g.sandboxMode(modeFlag)
			if err != nil {
				return err
			}
			log, err := g.logger()
			if err != nil {
				return err
			}
			svc, err := g.service()
			if err != nil {
				return err
			}
			defer func() { _ = svc.Close() }()
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
			defer stop()
			pol, err := svc.Resolve(addr, mode, user)
			if err != nil {
				return err
			}
			if pol.Refusal != nil {
				return pol.Refusal
			}
			if err := svc.ValidateMode(ctx, mode); err != nil {
				return err
			}
			srv := mcpserver.New(svc, mode, addr, user, log)
			// The same as mcp.StdioTransport, over the command's streams
			// rather than the process's.
			t := &mcp.IOTransport{Reader: io.NopCloser(g.stdin), Writer: nopWriteCloser{g.stdout}}
			err = srv.Run(ctx, t)
			if ctx.Err() != nil || errors.Is(err, io.EOF) {
				return nil // a signal or the client closing stdin: a normal end
			}
			return err
		},
	}
	cmd.Flags().StringVar(&conv, "conversation", "", "the conversation, as <platform>/<conversation-id> (required)")
	cmd.Flags().StringVar(&modeFlag, "sandbox", "", "where the tools run: host, container:<name>, image:<image>, cloudflare:<id>, gondolin:default, kube:<image> (default $HUTCH_SANDBOX or host)")
	cmd.Flags().StringVar(&user, "user", "", "platform user whose vault host mode checks")
	return cmd
}

// nopWriteCloser lets the server close its writer without closing stdout.
type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
