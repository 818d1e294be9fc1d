package cli

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"syscall"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/hutchsandbox/hutch/client"
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
<conversation> shared). A refusal still completes the MCP handshake and
answers every tool call with the reason, so that the MCP client shows
it; from a terminal, hutch prints it and exits 1.

When a daemon (hutch serve) serves the state dir, the tools run in it,
as hutch exec's commands do: hutch mcp passes the calls on to the
daemon's MCP endpoint, and the daemon's mode and policy apply (--sandbox,
if given, must name the daemon's mode, or the tools run here).

The daemon serves that endpoint itself, for MCP clients that speak
streamable HTTP: /mcp on its socket (<state-dir>/hutch.sock), and on
its TCP address (serve --listen-tcp) with its bearer token, one conversation
per session, named in the URL:
  /mcp?platform=<platform>&conversationId=<conversation-id>[&user=<id>]`,
		Example: `  hutch door set slack/C0123ABC shared
  hutch mcp --conversation slack/C0123ABC

  # in an MCP client's configuration:
  # (image:` + imagebuild.DefaultTag(Version) + ` is what hutch image build builds)
  {"command": "hutch", "args": ["mcp", "--conversation", "web/demo", "--sandbox", "image:` + imagebuild.DefaultTag(Version) + `"]}`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
			defer stop()
			log, err := g.logger()
			if err != nil {
				log = slog.New(slog.NewTextHandler(g.stderr, nil))
			}
			srv, closeFn, err := g.mcpServer(ctx, conv, modeFlag, user, log)
			refused := err != nil
			if refused {
				if f, ok := g.stdin.(*os.File); ok && isTerminal(f) {
					return err // a person typed the command: tell them
				}
				// An MCP client started hutch: a refusal that ended the
				// process would show as "Connection closed". Serve the
				// handshake and answer every call with the reason.
				note(g.stderr, "hutch: %s\n", err)
				srv = mcpserver.Refusing(err, log)
			}
			defer closeFn()
			err = srv.Run(ctx, &mcpserver.StdioTransport{Reader: g.stdin, Writer: g.stdout, Log: log})
			switch {
			case refused:
				return &exitError{code: 1} // the reason is on stderr already
			case ctx.Err() != nil || errors.Is(err, io.EOF):
				return nil // a signal or the client closing stdin: a normal end
			}
			return err
		},
	}
	cmd.Flags().StringVar(&conv, "conversation", "", "the conversation, as <platform>/<conversation-id> (required)")
	cmd.Flags().StringVar(&modeFlag, "sandbox", "", "where the tools run: host, container:<name>, image:<image>, cloudflare:<id>, gondolin:default, kube:<image> (default: the daemon's when one serves the state dir, else $HUTCH_SANDBOX or host)")
	cmd.Flags().StringVar(&user, "user", "", "platform user whose vault host mode checks")
	return cmd
}

// mcpServer returns the server `hutch mcp` runs on stdio, and what ends
// it: a proxy of the daemon's /mcp endpoint when a daemon serves the
// state dir (and the mode asked for, as hutch exec decides), else the
// tools served in this process once the conversation's policy and the
// mode are checked. An error is a refusal to serve.
func (g *globals) mcpServer(ctx context.Context, conv, modeFlag, user string, log *slog.Logger) (*mcp.Server, func(), error) {
	nothing := func() {}
	if conv == "" {
		return nil, nothing, errdefs.New(errdefs.ErrInvalid, "--conversation <platform>/<conversation-id> is required")
	}
	addr, err := office.ParseAddress(conv)
	if err != nil {
		return nil, nothing, err
	}
	if _, err := g.logger(); err != nil {
		return nil, nothing, err
	}
	mode, err := g.sandboxMode(modeFlag)
	if err != nil {
		return nil, nothing, err
	}
	svc, err := g.service()
	if err != nil {
		return nil, nothing, err
	}
	closeSvc := func() { _ = svc.Close() }
	if c, ok := g.daemon(ctx, svc, modeFlag); ok {
		closeSvc()
		p, err := mcpserver.DialProxy(ctx, daemonMCPEndpoint(addr, user), daemonHTTP(c), log)
		if err != nil {
			return nil, nothing, err
		}
		srv, err := p.Server(ctx)
		if err != nil {
			_ = p.Close()
			return nil, nothing, err
		}
		return srv, func() { _ = p.Close() }, nil
	}
	pol, err := svc.Resolve(addr, mode, user)
	if err == nil && pol.Refusal != nil {
		err = pol.Refusal
	}
	if err == nil {
		err = svc.ValidateMode(ctx, mode)
	}
	if err != nil {
		closeSvc()
		return nil, nothing, err
	}
	return mcpserver.New(svc, mode, addr, user, log), closeSvc, nil
}

// daemonMCPEndpoint is the URL of the daemon's MCP endpoint for one
// conversation, as mcpserver.HTTPHandler reads it.
func daemonMCPEndpoint(addr office.Address, user string) string {
	q := url.Values{"platform": {string(addr.Platform)}, "conversationId": {addr.ConversationID}}
	if user != "" {
		q.Set("user", user)
	}
	return "http://hutch/mcp?" + q.Encode()
}

// daemonHTTP is an HTTP client of c's daemon: over its unix socket, with
// its token when it has one, as the client package's own requests.
func daemonHTTP(c *client.Client) *http.Client {
	sock := c.Socket
	var rt http.RoundTripper = &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}
	if c.Token != "" {
		rt = bearer{token: c.Token, next: rt}
	}
	return &http.Client{Transport: rt}
}

// bearer adds a bearer token to every request.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}
