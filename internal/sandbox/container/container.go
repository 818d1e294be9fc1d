// Package container is the mode container:<name>: commands run in an
// existing container that the operator created and manages. hutch
// validates it on use, copies its agent in, and speaks to the agent over
// one long-lived hijacked exec session (the agent serves HTTP/2 on its
// stdin and stdout), so a warm command costs a fork, not a docker exec.
// Vault env is injected per command; vault files, isolated offices and
// read-only memory are refused by policy before anything runs. hutch
// never stops or removes a container it did not create.
package container

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/client"

	"github.com/hutchsandbox/hutch/internal/agent"
	"github.com/hutchsandbox/hutch/internal/agentbin"
	"github.com/hutchsandbox/hutch/internal/engine"
	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/sandbox"
)

// agentDir is where the agent binary is copied inside the container.
const agentDir = "/.hutch"

// Config configures the container mode.
type Config struct {
	// Engine is the connected container engine.
	Engine *engine.Engine
	// Name is the existing container's name or id.
	Name string
	// Agent is the verified static hutch binary to copy in.
	Agent agentbin.Binary
	// Workspace is the host workspace, quoted in the hint for creating the container.
	Workspace string
	// Log receives debug lines; nil discards.
	Log *slog.Logger
	// User is the user the agent, and so every command, runs as (the
	// engine's --user); "" is the container's own.
	User string
}

// Runtime is the container mode.
type Runtime struct {
	cfg Config
	api engineAPI
	log *slog.Logger

	mu     sync.Mutex // guards the following
	client *agent.Client
	copied string // the container run (id@startedAt) the agent was copied into
}

var (
	_ sandbox.Runtime = (*Runtime)(nil)
	_ sandbox.Checker = (*Runtime)(nil)
)

// engineAPI is the part of the Engine API the container mode uses.
type engineAPI interface {
	ContainerInspect(ctx context.Context, id string, o client.ContainerInspectOptions) (client.ContainerInspectResult, error)
	ContainerStatPath(ctx context.Context, id string, o client.ContainerStatPathOptions) (client.ContainerStatPathResult, error)
	CopyToContainer(ctx context.Context, id string, o client.CopyToContainerOptions) (client.CopyToContainerResult, error)
	ExecCreate(ctx context.Context, id string, o client.ExecCreateOptions) (client.ExecCreateResult, error)
	ExecAttach(ctx context.Context, id string, o client.ExecAttachOptions) (client.ExecAttachResult, error)
}

// New returns the container mode.
func New(cfg Config) (*Runtime, error) {
	if cfg.Engine == nil || cfg.Name == "" || cfg.Agent.Path == "" {
		return nil, fmt.Errorf("container mode: engine, name and agent are required")
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	r := &Runtime{cfg: cfg, api: cfg.Engine.Client, log: cfg.Log.With("mode", "container", "container", cfg.Name)}
	return r, nil
}

// Mode returns container:<name>.
func (r *Runtime) Mode() sandbox.Mode {
	return sandbox.Mode{Kind: sandbox.KindContainer, Target: r.cfg.Name}
}

// Capabilities returns the container mode's capabilities.
func (r *Runtime) Capabilities() sandbox.Capabilities {
	return sandbox.CapabilitiesOf(sandbox.KindContainer)
}

// Validate checks that the container exists and runs, with the seed's
// texts and a hint for each case.
func (r *Runtime) Validate(ctx context.Context) (string, error) {
	id, _, err := r.running(ctx)
	return id, err
}

// running is Validate that also returns when the container's current run
// began.
func (r *Runtime) running(ctx context.Context) (id, startedAt string, err error) {
	res, err := r.api.ContainerInspect(ctx, r.cfg.Name, client.ContainerInspectOptions{})
	if engine.IsNotFound(err) {
		ws := r.cfg.Workspace
		if ws == "" {
			ws = "<workspace>"
		}
		return "", "", errdefs.New(errdefs.ErrFailedPrecondition, fmt.Sprintf(
			"Container '%s' does not exist. Create it with: docker run -d --name %s -v %s:/workspace <image> sleep infinity", r.cfg.Name, r.cfg.Name, ws))
	}
	if err != nil {
		return "", "", engine.Classify(err, "inspect container "+r.cfg.Name)
	}
	if res.Container.State == nil || !res.Container.State.Running {
		return "", "", errdefs.New(errdefs.ErrFailedPrecondition, fmt.Sprintf(
			"Container '%s' is not running. Start it with: docker start %s", r.cfg.Name, r.cfg.Name))
	}
	return res.Container.ID, res.Container.State.StartedAt, nil
}

// Exec validates the container, makes sure the agent is in it, and runs
// one command through the agent.
func (r *Runtime) Exec(ctx context.Context, spec sandbox.Spec, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	cl, err := r.agent(ctx)
	if err != nil {
		return sandbox.ExecResult{}, err
	}
	switch {
	case req.Dir == "":
		req.Dir = spec.OfficeRuntimePath
	case !path.IsAbs(req.Dir):
		req.Dir = path.Join(spec.OfficeRuntimePath, req.Dir)
	}
	res, err := cl.Exec(ctx, req)
	if errdefs.IsInvalid(err) && req.Dir == spec.OfficeRuntimePath {
		// The usual cause: the operator did not mount the workspace.
		return res, fmt.Errorf("%w (mount the workspace at /workspace: docker run -v %s:/workspace ...)", err, r.cfg.Workspace)
	}
	return res, err
}

// Check verifies the container exists and runs.
func (r *Runtime) Check(ctx context.Context) error {
	_, err := r.Validate(ctx)
	return err
}

// Agent returns the agent client of the container, for file operations.
func (r *Runtime) Agent(ctx context.Context) (*agent.Client, error) { return r.agent(ctx) }

func (r *Runtime) agent(ctx context.Context) (*agent.Client, error) {
	id, startedAt, err := r.running(ctx)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	// A restart keeps the id but ends every exec, the agent's stream
	// included. The old connection's end may reach hutch only after the
	// next request went out on it (seen on Podman under load: "agent
	// connection lost: unexpected EOF"), so a new run of the container
	// gets a new connection at once.
	if run := id + "@" + startedAt; r.copied != run {
		if err := r.copyAgent(ctx, id); err != nil {
			return nil, err
		}
		r.copied = run
		if r.client != nil {
			_ = r.client.Close()
			r.client = nil
		}
	}
	if r.client == nil {
		bin := r.agentPath()
		r.client = agent.NewClient(func(ctx context.Context) (net.Conn, error) {
			return r.dial(ctx, bin)
		}, r.log)
	}
	return r.client, nil
}

func (r *Runtime) agentPath() string {
	return agentDir + "/hutch-" + r.cfg.Agent.SHA256[:16]
}

// copyAgent puts the agent binary into the container unless it is there.
func (r *Runtime) copyAgent(ctx context.Context, id string) error {
	if _, err := r.api.ContainerStatPath(ctx, id, client.ContainerStatPathOptions{Path: r.agentPath()}); err == nil {
		return nil
	}
	// Streamed, not built in memory: the binary is 80 MB, and its tar
	// held whole in a growing buffer took the container suite's process
	// to 4.8 GB of memory and 133 s of CPU under -race (streamed: 970 MB,
	// 48 s).
	f, err := os.Open(r.cfg.Agent.Path)
	if err != nil {
		return fmt.Errorf("read agent binary: %w", err)
	}
	defer func() { _ = f.Close() }()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("read agent binary: %w", err)
	}
	pr, pw := io.Pipe()
	// The request ends before the tar only on an error; closing the
	// reader then ends the writer below.
	defer func() { _ = pr.Close() }()
	go func() { _ = pw.CloseWithError(r.writeAgentTar(pw, f, fi.Size())) }()
	if _, err := r.api.CopyToContainer(ctx, id, client.CopyToContainerOptions{DestinationPath: "/", Content: pr}); err != nil {
		// Another hutch process copying the same binary at the same
		// moment makes Podman's copier fail with "file exists"; the file
		// is then there (the same bytes: its name is their digest).
		if strings.Contains(err.Error(), "file exists") {
			if _, serr := r.api.ContainerStatPath(ctx, id, client.ContainerStatPathOptions{Path: r.agentPath()}); serr == nil {
				return nil
			}
		}
		return engine.Classify(err, "copy the agent into container "+r.cfg.Name)
	}
	r.log.Info("copied agent into container", "path", r.agentPath())
	return nil
}

// writeAgentTar writes a tar of the agent's directory and the agent, its
// size bytes read from bin, to w.
func (r *Runtime) writeAgentTar(w io.Writer, bin io.Reader, size int64) error {
	tw := tar.NewWriter(w)
	now := time.Now()
	hdrs := []*tar.Header{
		{Typeflag: tar.TypeDir, Name: agentDir[1:] + "/", Mode: 0o755, ModTime: now},
		{Typeflag: tar.TypeReg, Name: r.agentPath()[1:], Mode: 0o755, Size: size, ModTime: now},
	}
	for _, h := range hdrs {
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
	}
	if _, err := io.CopyN(tw, bin, size); err != nil {
		return fmt.Errorf("read agent binary: %w", err)
	}
	return tw.Close()
}

// agentStartWindow bounds how long dial keeps trying an agent that exits
// before it says anything (see dial). Podman copies slowly under load:
// in CI, with the image and project suites beside it, the copies of
// three first uses at once outlasted 10 s ("text file busy").
const agentStartWindow = 30 * time.Second

// errAgentNotStarted is a dial whose agent ended its output streams
// before writing a byte to stdout.
var errAgentNotStarted = errors.New("the agent exited before it answered")

// dial starts `hutch agent --stdio` in the container through one exec
// and returns its stdin and stdout as a connection. The exec lives as
// long as the connection; when hutch goes away the agent's stdin ends,
// and it kills what it was running.
//
// An agent that exits before it writes anything to stdout is started
// again for a while. Several hutch processes using one container for the
// first time each copy the agent in (see copyAgent), and on Podman an exec
// that lands while another process's copy rewrites the file fails: its
// copy creates the file 0600, writes it, then chmods it, so the exec fails
// with "permission denied" or "text file busy", reported on stderr. The
// copy ends within moments and the next exec works. (Docker reports a
// failed exec on stdout, so there nothing is retried.)
func (r *Runtime) dial(ctx context.Context, bin string) (net.Conn, error) {
	deadline := time.Now().Add(agentStartWindow)
	delay := 20 * time.Millisecond
	for {
		c, err := r.dialOnce(ctx, bin)
		if !errors.Is(err, errAgentNotStarted) || time.Now().After(deadline) {
			return c, err
		}
		r.log.Debug("agent did not start; starting it again", "error", err)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(delay):
		}
		delay = min(2*delay, 500*time.Millisecond)
	}
}

// dialOnce starts the agent once and waits until it writes its first
// byte (the HTTP/2 server's SETTINGS frame) or its streams end.
func (r *Runtime) dialOnce(ctx context.Context, bin string) (net.Conn, error) {
	ex, err := r.api.ExecCreate(ctx, r.cfg.Name, client.ExecCreateOptions{
		Cmd:          []string{bin, "agent", "--stdio"},
		User:         r.cfg.User,
		AttachStdin:  true,
		AttachStdout: true,
		AttachStderr: true,
	})
	if err != nil {
		return nil, engine.Classify(err, "start the agent in container "+r.cfg.Name)
	}
	att, err := r.api.ExecAttach(ctx, ex.ID, client.ExecAttachOptions{})
	if err != nil {
		return nil, engine.Classify(err, "attach to the agent in container "+r.cfg.Name)
	}
	c := newExecConn(att.HijackedResponse, r.log)
	select {
	case <-c.started:
		return c, nil
	case <-c.done:
		select {
		case <-c.started:
			return c, nil
		default:
		}
		_ = c.Close()
		if msg := c.stderr.String(); msg != "" {
			return nil, fmt.Errorf("container %s: %w: %s", r.cfg.Name, errAgentNotStarted, msg)
		}
		return nil, fmt.Errorf("container %s: %w", r.cfg.Name, errAgentNotStarted)
	case <-ctx.Done():
		_ = c.Close()
		return nil, ctx.Err()
	}
}

// execConn is a hijacked exec session seen as a connection: writes go to
// the agent's stdin, reads come from its stdout, demultiplexed from the
// engine's stdout/stderr framing; the agent's stderr goes to the log.
type execConn struct {
	hj      client.HijackedResponse
	pr      *io.PipeReader
	started chan struct{} // closed at the first byte of stdout
	done    chan struct{} // closed when the streams end
	stderr  *headWriter   // the start of stderr, for errors
}

func newExecConn(hj client.HijackedResponse, log *slog.Logger) *execConn {
	pr, pw := io.Pipe()
	c := &execConn{hj: hj, pr: pr, started: make(chan struct{}), done: make(chan struct{}), stderr: &headWriter{}}
	go func() {
		defer close(c.done)
		stdout := &firstWrite{w: pw, first: c.started}
		_, err := stdcopy.StdCopy(stdout, io.MultiWriter(c.stderr, logWriter{log}), hj.Reader)
		if err == nil {
			err = io.EOF
		}
		pw.CloseWithError(err)
	}()
	return c
}

func (c *execConn) Read(p []byte) (int, error)  { return c.pr.Read(p) }
func (c *execConn) Write(p []byte) (int, error) { return c.hj.Conn.Write(p) }
func (c *execConn) Close() error {
	_ = c.hj.CloseWrite()
	c.hj.Close()
	return c.pr.Close()
}
func (c *execConn) LocalAddr() net.Addr                { return c.hj.Conn.LocalAddr() }
func (c *execConn) RemoteAddr() net.Addr               { return c.hj.Conn.RemoteAddr() }
func (c *execConn) SetDeadline(t time.Time) error      { return c.hj.Conn.SetWriteDeadline(t) }
func (c *execConn) SetReadDeadline(time.Time) error    { return nil }
func (c *execConn) SetWriteDeadline(t time.Time) error { return c.hj.Conn.SetWriteDeadline(t) }

// firstWrite closes first before its first non-empty write to w.
type firstWrite struct {
	w     io.Writer
	first chan struct{}
	once  sync.Once
}

func (f *firstWrite) Write(p []byte) (int, error) {
	if len(p) > 0 {
		f.once.Do(func() { close(f.first) })
	}
	return f.w.Write(p)
}

// headWriter keeps the first 1 KiB written to it.
type headWriter struct {
	mu sync.Mutex
	b  []byte
}

func (t *headWriter) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if room := 1024 - len(t.b); room > 0 {
		t.b = append(t.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (t *headWriter) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(bytes.TrimSpace(t.b))
}

// logWriter sends the agent's stderr to the log, a line per write.
type logWriter struct{ log *slog.Logger }

func (w logWriter) Write(p []byte) (int, error) {
	w.log.Debug("agent stderr", "text", string(bytes.TrimRight(p, "\n")))
	return len(p), nil
}
