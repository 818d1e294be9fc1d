// Package agent is hutch's in-sandbox agent and the daemon's client of it.
//
// The hutch binary runs inside a sandbox as `hutch agent` and serves
// commands and file operations over one long-lived connection. The framing
// is HTTP/2 cleartext (prior knowledge) over that connection, so many
// requests share it and cancelling one request (RST_STREAM) aborts only
// its command. The protocol is versioned by path:
//
//   - GET /v1/ping: JSON Info.
//   - POST /v1/exec: the body is a JSON object (argv, dir, env, timeoutMs)
//     followed by the command's stdin; the 200 response streams stdout and
//     stderr multiplexed as stdcopy frames, flushed as they come, and ends
//     with the trailer Hutch-Result holding JSON {exitCode, signal,
//     timedOut, aborted, oomKilled}. A command that cannot start gets a
//     4xx with JSON {class, message}.
//   - GET /v1/file?path=ABS: the file's bytes. PUT /v1/file?path=ABS[&mode=0644]:
//     replaces the file atomically (stage in the same directory, fsync,
//     rename).
//   - GET /v1/stat?path=ABS: JSON FileInfo. GET /v1/list?path=ABS: JSON
//     array of FileInfo, sorted by name, symlinks not followed.
//   - The file endpoints take repeated root=ABS parameters: the path must
//     then resolve, symlinks included, within those roots (see confine.go
//     and ReadFileWithin); without any, nothing is confined.
//   - POST /v1/egress: one relay stream of the egress relay (see
//     egress.go and Client.RelayEgress), served only by an agent started
//     with --egress (others answer 404). It waits until a command's
//     connection to the agent's egress address is waiting (none: until
//     the request is cancelled, answering nothing), then answers 200 and
//     joins the two: the request body is copied to the connection raw,
//     its end a half-close; what the connection sends comes back in the
//     response as length-prefixed frames, a frame of length 0 when it
//     finished sending. The stream ends once both directions have.
//   - Only an agent that is a microVM's init (Server.Guest set; others
//     answer 404): POST /v1/guest/setup, a JSON GuestSetup (withdrawn
//     files, volatile tmpfs dirs, virtiofs mounts, files held in memory,
//     the commands' pids and memory limits, their time zone, the network
//     card and proxy), 204 once applied;
//     POST /v1/guest/poweroff kills every command, answers 204 and then
//     powers the VM off.
//
// A microVM's virtio port carries one host session after the other, and
// a fast reconnect can overlap the previous session: each session there
// starts with a sync line the guest echoes (see SyncSession), before
// HTTP/2 starts.
//
// Every command runs in a process group of its own (and, with
// Server.CommandCgroup, in that cgroup from its first instruction). The
// agent kills the whole group when the command times out (its own timer,
// so a vanished daemon does not matter), when its request is cancelled or
// its connection drops, and when the group's leader exits. One reaper
// collects every exit status (see reaper), which also makes the agent a
// correct pid 1 of a container: with Options.Init it reaps orphans and, on
// SIGTERM or SIGINT, kills every command and exits.
package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hutchsandbox/hutch/internal/errdefs"
)

// Options configure Run.
type Options struct {
	// Listen is a unix socket path to serve on. Exactly one of Listen,
	// Stdio and Connect is set.
	Listen string
	// Stdio serves exactly one connection made of Stdin and Stdout, and
	// returns when it ends.
	Stdio bool
	// Stdin and Stdout are the stdio connection; nil means os.Stdin and
	// os.Stdout.
	Stdin  io.Reader
	Stdout io.Writer
	// Connect serves the connections it returns one after the other (see
	// Server.ServeConns): the host's sessions on a microVM's virtio port.
	Connect func(ctx context.Context) (net.Conn, error)
	// Guest and CommandCgroup are the Server's fields of those names.
	Guest         GuestOps
	CommandCgroup string
	// Init does pid-1 duties: reap every child (orphans re-parented to the
	// agent included; when the agent is not pid 1 it makes itself a child
	// subreaper so that orphans come to it).
	Init bool
	// Version is what ping reports.
	Version string
	// KeyFile is the channel key file (see channel.go) the agent proves
	// it holds; empty: it holds none, and hosts that require a proof
	// refuse it.
	KeyFile string
	// OOMCounterPath overrides the cgroup file read for OOM kills.
	OOMCounterPath string
	// Egress, when set, is a loopback TCP address (127.0.0.1:3128) the
	// agent listens on for its commands' outbound connections, relayed to
	// the host's egress proxy (see egress.go); every command gets it as
	// its HTTP_PROXY and kin. Failing to listen fails Run.
	Egress string
	// EgressCA, when set, is an absolute path to the egress proxy's CA
	// certificate (PEM, certificates only). Run writes a trust bundle of
	// the system's roots and it to EgressCABundle, and every command's
	// TLS variables name them (see Server.EgressCA).
	EgressCA string
	// EgressCAPEM, when set, is the CA certificate's PEM, base64-encoded,
	// which Run first writes to EgressCA (atomically, mode 0644), for
	// runtimes that cannot mount a file.
	EgressCAPEM string
	// EgressCABundle is where the trust bundle goes; empty means
	// /etc/hutch-egress-ca-bundle.pem.
	EgressCABundle string
	// Log receives the agent's log; nil discards.
	Log *slog.Logger
}

// shutdownGrace bounds how long Run waits, after SIGTERM, SIGINT or ctx,
// for the requests in flight to finish once their commands were killed.
const shutdownGrace = 5 * time.Second

// Run serves the agent protocol until ctx is cancelled, SIGTERM or SIGINT
// arrives, or (Stdio) the connection ends. Every running command's process
// group is killed before it returns. A signal or a cancelled ctx is a clean
// end: Run returns nil.
func Run(ctx context.Context, opts Options) error {
	if opts.Connect != nil && (opts.Listen != "" || opts.Stdio) {
		return errdefs.New(errdefs.ErrInvalid, "Agent serves a guest port alone: not with --listen or --stdio")
	}
	if opts.Connect == nil && (opts.Listen == "") == !opts.Stdio {
		return errdefs.New(errdefs.ErrInvalid, "Agent needs exactly one of --listen and --stdio")
	}
	if opts.Egress != "" {
		if _, err := parseEgressAddr(opts.Egress); err != nil {
			return err
		}
	}
	if err := checkEgressCAOptions(opts); err != nil {
		return err
	}
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := processReaper()
	if opts.Init || os.Getpid() == 1 {
		if os.Getpid() != 1 {
			if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
				return fmt.Errorf("agent: become a child subreaper: %w", err)
			}
		}
		r.reapAll(log)
		warmThreads(initThreads)
	}
	// pid 1 has no default action for these: without a handler it would
	// ignore them. Any agent kills its commands before it goes.
	ctx, stop := signal.NotifyContext(ctx, unix.SIGTERM, unix.SIGINT)
	defer stop()
	// A write to a stdout nobody reads any more (--stdio, the daemon went
	// away) must fail with EPIPE, which ends the connection and so kills
	// its commands, not kill the agent with SIGPIPE and leave them running.
	// Notify, not Ignore: an ignored signal would stay ignored in commands.
	sigpipe := make(chan os.Signal, 1)
	signal.Notify(sigpipe, unix.SIGPIPE)
	defer signal.Stop(sigpipe)

	var key []byte
	if opts.KeyFile != "" {
		var err error
		if key, err = readChannelKey(opts.KeyFile); err != nil {
			return err
		}
	}
	var egress net.Listener
	if opts.Egress != "" {
		l, err := listenEgress(opts.Egress)
		if err != nil {
			return err
		}
		defer func() { _ = l.Close() }()
		egress = l
		log.Info("agent relaying egress", "addr", l.Addr().String())
	}
	var bundle string
	if opts.EgressCA != "" {
		var err error
		if bundle, err = prepareEgressCA(opts); err != nil {
			return err
		}
		log.Info("agent wrote the egress CA bundle", "ca", opts.EgressCA, "bundle", bundle)
	}
	srv := &Server{
		Egress:         egress,
		EgressCA:       opts.EgressCA,
		EgressCABundle: bundle,
		Key:            key,
		Log:            log,
		Version:        opts.Version,
		Init:           opts.Init || os.Getpid() == 1,
		OOMCounterPath: opts.OOMCounterPath,
		Guest:          opts.Guest,
		CommandCgroup:  opts.CommandCgroup,
	}
	serveCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	switch {
	case opts.Connect != nil:
		log.Info("agent serving on its guest port", "pid", os.Getpid(), "init", srv.Init)
		go func() { done <- srv.ServeConns(serveCtx, opts.Connect) }()
	case opts.Stdio:
		c := newStdioConn(opts.Stdin, opts.Stdout)
		log.Info("agent serving on stdio", "pid", os.Getpid(), "init", srv.Init)
		go func() {
			srv.ServeConn(serveCtx, c)
			done <- nil
		}()
	default:
		l, err := listenUnix(opts.Listen)
		if err != nil {
			return err
		}
		log.Info("agent listening", "socket", opts.Listen, "pid", os.Getpid(), "init", srv.Init)
		go func() { done <- srv.Serve(serveCtx, l) }()
	}

	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		log.Info("agent stopping", "cause", context.Cause(ctx))
		cancel()
		if n := r.killAll(); n > 0 {
			log.Info("agent killed the running commands", "count", n)
		}
		select {
		case err = <-done:
		case <-time.After(shutdownGrace):
			log.Warn("agent: requests still in flight at exit")
		}
	}
	r.killAll()
	return err
}

// listenUnix listens on the unix socket path, owner-only. A stale socket
// left by a previous agent is removed; a live one (something answers) or
// any other file at path is refused. A missing parent is created 0700.
func listenUnix(path string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("agent: create the socket directory: %w", err)
	}
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("agent: %w", err)
	case fi.Mode()&fs.ModeSocket == 0:
		return nil, errdefs.New(errdefs.ErrConflict, "Agent socket path exists and is not a socket: "+path)
	default:
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			_ = c.Close()
			return nil, errdefs.New(errdefs.ErrConflict, "Another agent is already listening on "+path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("agent: remove the stale socket: %w", err)
		}
	}
	// The umask is process-wide, so it is left alone: a socket directory
	// the agent creates is 0700, and the socket is made 0600 at once.
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		_ = l.Close()
		return nil, fmt.Errorf("agent: %w", err)
	}
	return l, nil
}

// stdioConn is a net.Conn made of a reader and a writer (the agent's stdin
// and stdout, or one file both ways: a virtio port). Closing it closes
// both when they can be closed (one file once), which ends a Read blocked
// on a pipe.
type stdioConn struct {
	r       io.Reader
	w       io.Writer
	oneFile bool // r and w are one *os.File, closed once

	once sync.Once
}

func newStdioConn(r io.Reader, w io.Writer) *stdioConn {
	if r == nil {
		r = os.Stdin
	}
	if w == nil {
		w = os.Stdout
	}
	rf, rok := r.(*os.File)
	wf, wok := w.(*os.File)
	if rok && wok && rf == wf {
		f := pollable(rf)
		return &stdioConn{r: f, w: f, oneFile: true}
	}
	if rok {
		r = pollable(rf)
	}
	if wok {
		w = pollable(wf)
	}
	return &stdioConn{r: r, w: w}
}

// pollable returns f, or, when f is a pipe or socket in blocking mode (a
// process's stdin and stdout usually are), a duplicate of it in
// non-blocking mode, which Go's poller serves: only then does Close end a
// Read or Write blocked on it (a net.Conn must), so that a connection
// whose writes fail is torn down even while its reads wait. The original
// is left open.
func pollable(f *os.File) *os.File {
	sc, err := f.SyscallConn()
	if err != nil {
		return f
	}
	var dup *os.File
	_ = sc.Control(func(fd uintptr) {
		var st unix.Stat_t
		if err := unix.Fstat(int(fd), &st); err != nil {
			return
		}
		if t := st.Mode & unix.S_IFMT; t != unix.S_IFIFO && t != unix.S_IFSOCK {
			return // a tty or a file: leave its mode alone
		}
		flags, err := unix.FcntlInt(fd, unix.F_GETFL, 0)
		if err != nil || flags&unix.O_NONBLOCK != 0 {
			return // already non-blocking: os.File polls it
		}
		nfd, err := unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 0)
		if err != nil {
			return
		}
		if err := unix.SetNonblock(nfd, true); err != nil {
			_ = unix.Close(nfd)
			return
		}
		dup = os.NewFile(uintptr(nfd), f.Name())
	})
	if dup == nil {
		return f
	}
	return dup
}

func (c *stdioConn) Read(p []byte) (int, error)  { return c.r.Read(p) }
func (c *stdioConn) Write(p []byte) (int, error) { return c.w.Write(p) }

func (c *stdioConn) Close() error {
	var err error
	c.once.Do(func() {
		if rc, ok := c.r.(io.Closer); ok {
			err = rc.Close()
		}
		if wc, ok := c.w.(io.Closer); ok && !c.oneFile {
			if werr := wc.Close(); err == nil {
				err = werr
			}
		}
	})
	return err
}

// stdioAddr names both ends of a stdio connection.
type stdioAddr struct{}

func (stdioAddr) Network() string { return "stdio" }
func (stdioAddr) String() string  { return "stdio" }

func (c *stdioConn) LocalAddr() net.Addr  { return stdioAddr{} }
func (c *stdioConn) RemoteAddr() net.Addr { return stdioAddr{} }

// Deadlines are passed on when the ends support them (os.File pipes do);
// the HTTP/2 server sets none, since it has no timeouts configured.
func (c *stdioConn) SetDeadline(t time.Time) error {
	if err := c.SetReadDeadline(t); err != nil {
		return err
	}
	return c.SetWriteDeadline(t)
}

func (c *stdioConn) SetReadDeadline(t time.Time) error {
	if d, ok := c.r.(interface{ SetReadDeadline(time.Time) error }); ok {
		return d.SetReadDeadline(t)
	}
	return nil
}

func (c *stdioConn) SetWriteDeadline(t time.Time) error {
	if d, ok := c.w.(interface{ SetWriteDeadline(time.Time) error }); ok {
		return d.SetWriteDeadline(t)
	}
	return nil
}

// NewStdioConn returns a net.Conn made of r and w, for a client that
// reaches an agent through a process's stdin and stdout. r and w may be
// one file read and written both ways, such as a virtio port.
func NewStdioConn(r io.Reader, w io.Writer) net.Conn { return newStdioConn(r, w) }

// initThreads is how many OS threads an init agent makes at start.
const initThreads = 16

// warmThreads makes n OS threads now and leaves them idle in the Go
// runtime's pool. A command that fork-bombs the sandbox up to its pid
// ceiling leaves no room for a new thread, and a Go program that cannot
// make one when it needs it dies ("failed to create new OS thread"),
// taking every command with it. The runtime keeps idle threads and reuses
// them, so an agent that already has enough never needs to make one under
// that pressure.
func warmThreads(n int) {
	var made, done sync.WaitGroup
	release := make(chan struct{})
	for range n {
		made.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			runtime.LockOSThread()
			made.Done()
			<-release
			// Unlocked, not exited while locked: the thread goes back to
			// the idle pool instead of being destroyed.
			runtime.UnlockOSThread()
		}()
	}
	made.Wait()
	close(release)
	done.Wait()
}
