package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/hutchsandbox/hutch/internal/atomicfile"
	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/project"
	"github.com/hutchsandbox/hutch/internal/project/box"
	"github.com/hutchsandbox/hutch/internal/project/teammcp"
)

// mcpCmd is `hutch project mcp`.
func (p *projectCmd) mcpCmd() *cobra.Command {
	var port int
	var printConfig bool
	cmd := &cobra.Command{
		Use:   "mcp [--port N] [--print-config]",
		Short: "Serve MCP tools scoped to the project's sandbox, for an agent team inside it",
		Long: `Serve, on the host, MCP tools that act inside the project's sandbox, so that
a supervisor agent running in the container can start and drive team members
that run in the container too:

  bash     run a shell command in the container; output over 2000 lines or
           50 KiB is saved where it ran (.hutch/output/<id>.log) and its
           tail returned; a non-zero exit is a tool error
  read     read a file, paged by lines (2000 lines / 50 KiB per call), or
           an image (png, jpeg, gif, webp)
  write    create or replace a file atomically, creating its parents
  edit     replace one exact occurrence of a text, with a diff
  members  list the team members' worktrees, with their branches

Each tool takes an optional member: the call then runs in the member's git
worktree .worktrees/<member> (branch <member>, created from HEAD by the
first call naming the member); without one, in the project root. Files
outside the project cannot be reached, symlinks included. bash, write and
edit of one member run one at a time.

The sandbox is brought up first. hutch listens on the host's address on the
container's network (the bridge gateway) at --port (default: any free
port), and writes an MCP client config to the project's relay directory,
which the container mounts read-only: agents inside read it at
/sandbox/relay/hutch.mcp.json. It names the server as
http://host.docker.internal:<port>/mcp (host.containers.internal under
Podman; 127.0.0.1 under sandbox-network host) with an Authorization header
carrying the project's bearer token, made once and kept in
<state-dir>/projects/<container>/mcp-token. Requests without it are refused.
--print-config also prints that config on stdout, for clients the relay
directory does not reach (an editor's container does not mount it). Under
sandbox-network none nothing on the host can be reached, and hutch refuses
to serve.

The server is streamable HTTP without sessions, answering in JSON: one POST
of a JSON-RPC tools/call is a whole call, so any HTTP client will do.

hutch serves until SIGINT or SIGTERM, then removes hutch.mcp.json. It counts
as one user of the container while it serves.`,
		Example: `  hutch project mcp
  hutch project mcp --port 7400 --print-config

  # then, in another terminal, a supervisor inside the sandbox:
  hutch project exec -- claude --mcp-config /sandbox/relay/hutch.mcp.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if port < 0 || port > 65535 {
				return errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("--port %d is not a TCP port: give 1-65535, or 0 for any free port", port))
			}
			return p.serveMCP(cmd.Context(), port, printConfig)
		},
	}
	cmd.Flags().IntVar(&port, "port", 0, "TCP port to listen on (0: any free port)")
	cmd.Flags().BoolVar(&printConfig, "print-config", false, "also print the MCP client config, token included, on stdout")
	return cmd
}

// serveMCP is hutch project mcp.
func (p *projectCmd) serveMCP(ctx context.Context, port int, printConfig bool) error {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	log, err := p.g.logger()
	if err != nil {
		return err
	}
	l, err := p.load(ctx, false)
	if err != nil {
		return err
	}
	defer func() { _ = l.eng.Close() }()
	if !l.settings.Enabled {
		return p.errDisabled(l, "")
	}
	svc, err := p.g.service()
	if err != nil {
		return err
	}
	stateDir, name := svc.Layout().StateDir, l.box.Spec().Name

	// The server is a user of the container, as a shell is: it joins
	// before the sandbox is brought up, under the lifecycle lock.
	sessions := box.NewSessions(box.SessionDir(stateDir, name))
	unlock, err := sessions.Lock()
	if err != nil {
		return err
	}
	leave, err := sessions.Join()
	if err != nil {
		unlock()
		return err
	}
	t, err := p.up(ctx, l, false)
	unlock()
	if err != nil {
		leave()
		return err
	}
	defer p.leave(ctx, l, t, sessions, leave)
	ag := t.Agent()
	defer func() { _ = ag.Close() }()

	ip, err := l.box.GatewayIP(ctx, t)
	if err != nil {
		return err
	}
	listenHost, urlHost := ip, project.GatewayHost(string(l.eng.Flavor))
	if ip == "" {
		// Host networking: the container's loopback is the host's.
		listenHost, urlHost = "127.0.0.1", "127.0.0.1"
	}
	addr := net.JoinHostPort(listenHost, strconv.Itoa(port))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s, the host's address on the sandbox's network: %w", addr, err)
	}
	defer func() { _ = ln.Close() }()
	url := "http://" + net.JoinHostPort(urlHost, strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)) + "/mcp"

	token, err := teammcp.LoadOrMakeToken(filepath.Join(stateDir, "projects", name, teammcp.TokenName))
	if err != nil {
		return fmt.Errorf("the project's MCP token: %w", err)
	}
	// The config holds the token and is 0644, so that whatever uid the
	// container's agents run as can read it. That exposes the token to
	// nobody new: the relay directory sits in hutch's state dir on the
	// host, and inside it is mounted into this project's container only,
	// which is exactly who the token admits.
	cfg := teammcp.ClientConfig(url, token)
	relay := box.RelayDir(stateDir, name)
	if err := os.MkdirAll(relay, 0o755); err != nil {
		return err
	}
	cfgPath := filepath.Join(relay, teammcp.ConfigName)
	if err := atomicfile.WriteFile(cfgPath, cfg, 0o644); err != nil {
		return err
	}
	defer removeOwnConfig(cfgPath, cfg)

	srv := teammcp.New(teammcp.Options{Box: l.box, Target: t, Version: Version, Log: log})
	mux := http.NewServeMux()
	mux.Handle("/mcp", teammcp.Handler(func(*http.Request) *mcp.Server { return srv }, token))
	hs := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		// A signal cancels the calls in flight: their commands are killed.
		BaseContext: func(net.Listener) context.Context { return ctx },
	}
	inside := path.Join(project.RelayTarget, teammcp.ConfigName)
	if err := printf(p.g.stdout, "Serving MCP tools for the sandbox %s on %s; agents inside find the client config at %s (%s).\n", t.Name, ln.Addr(), inside, url); err != nil {
		return err
	}
	if t.Foreign {
		p.printNotes([]string{fmt.Sprintf("%s is an editor's container, which does not mount %s; hand its agents the config that --print-config prints.", t.Name, project.RelayTarget)})
	}
	if printConfig {
		if _, err := p.g.stdout.Write(cfg); err != nil {
			return err
		}
	}

	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}

// removeOwnConfig removes the client config at path unless another
// `hutch project mcp` of the project replaced it meanwhile.
func removeOwnConfig(path string, cfg []byte) {
	if data, err := os.ReadFile(path); err == nil && bytes.Equal(data, cfg) {
		_ = os.Remove(path)
	}
}
