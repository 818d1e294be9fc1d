package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The test binary doubles as helper processes, chosen by this variable.
const helperEnv = "HUTCH_AGENT_TEST_HELPER"

func TestMain(m *testing.M) {
	switch os.Getenv(helperEnv) {
	case "agent":
		agentHelper()
		return
	case "stdio-agent":
		err := Run(context.Background(), Options{Stdio: true, Log: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))})
		if err != nil {
			fmt.Fprintln(os.Stderr, "agent helper:", err)
			os.Exit(1)
		}
		os.Exit(0)
	case "orphan":
		orphanHelper(os.Args[1])
		return
	case "threads-cold", "threads-warm":
		threadsHelper(os.Getenv(helperEnv) == "threads-warm")
		return
	}
	os.Exit(m.Run())
}

// waitFor is how long a test waits for something that happens
// asynchronously (a process to die, a file to appear). It is a bound
// against hangs, not a timing assertion.
const waitFor = 20 * time.Second

// socketPath returns a short unix socket path (t.TempDir can exceed the
// 108-byte limit of sun_path).
func socketPath(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "hutch-agent-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return filepath.Join(dir, "agent.sock")
}

// fixture is a Server on a real unix socket and a Client dialling it.
type fixture struct {
	srv    *Server
	client *Client
	path   string

	mu          sync.Mutex
	dials       int
	clientConns []net.Conn
	serverConns []net.Conn
}

// recordingListener remembers the connections it accepts.
type recordingListener struct {
	net.Listener
	f *fixture
}

func (l recordingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.f.mu.Lock()
		l.f.serverConns = append(l.f.serverConns, c)
		l.f.mu.Unlock()
	}
	return c, err
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// testWriter sends log lines to t.Log (shown with -v or on failure).
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// newFixture serves srv (nil: a default Server) on a fresh socket.
func newFixture(t *testing.T, srv *Server) *fixture {
	t.Helper()
	if srv == nil {
		srv = &Server{}
	}
	if srv.Log == nil {
		srv.Log = testLogger(t)
	}
	f := &fixture{srv: srv, path: socketPath(t)}
	l, err := net.Listen("unix", f.path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, recordingListener{l, f}) }()
	f.client = NewClient(f.dial, testLogger(t))
	t.Cleanup(func() {
		_ = f.client.Close()
		cancel()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return f
}

func (f *fixture) dial(ctx context.Context) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", f.path)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.dials++
	f.clientConns = append(f.clientConns, c)
	return c, nil
}

func (f *fixture) dialCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.dials
}

// waitFile waits until path exists and returns its content.
func waitFile(t *testing.T, path string) string {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for {
		b, err := os.ReadFile(path)
		if err == nil {
			return string(b)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not appear: %v", path, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// readPid reads a pid file written by a test command.
func readPid(t *testing.T, path string) int {
	t.Helper()
	pid, err := strconv.Atoi(strings.TrimSpace(waitFile(t, path)))
	if err != nil {
		t.Fatalf("pid file %s: %v", path, err)
	}
	return pid
}

// procState returns a process's state letter and parent, or ok false when
// it no longer exists.
func procState(pid int) (state string, ppid int, ok bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if errors.Is(err, fs.ErrNotExist) {
		return "", 0, false
	}
	if err != nil {
		return "?", 0, true
	}
	i := bytes.LastIndexByte(b, ')')
	fields := strings.Fields(string(b[i+1:]))
	if len(fields) < 2 {
		return "?", 0, true
	}
	ppid, _ = strconv.Atoi(fields[1])
	return fields[0], ppid, true
}

// waitDead waits until pid is gone, or a zombie that is not this test's
// child (its reaper is someone else's business).
func waitDead(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for {
		state, ppid, ok := procState(pid)
		if !ok || ((state == "Z" || state == "X") && ppid != os.Getpid()) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d still alive: state %s, parent %d", pid, state, ppid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitGone waits until pid does not exist at all (it was reaped).
func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for {
		state, ppid, ok := procState(pid)
		if !ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d was not reaped: state %s, parent %d", pid, state, ppid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// agentHelper runs `hutch agent --listen $SOCKET [--init]` in a process of
// its own.
func agentHelper() {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	err := Run(context.Background(), Options{
		Listen:  os.Getenv("HUTCH_AGENT_TEST_SOCKET"),
		Init:    os.Getenv("HUTCH_AGENT_TEST_INIT") == "1",
		Version: "test",
		Log:     log,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "agent helper:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// orphanHelper leaves its process group (so the group kill at the end of
// the command that started it misses it), says so, waits until its parent
// has exited and it has been re-parented, writes "<pid> <ppid>" (pid as
// /proc sees it, ppid as its own pid namespace does) and exits, leaving a
// zombie that only its new parent can reap.
func orphanHelper(out string) {
	if _, err := unix.Setsid(); err != nil {
		os.Exit(2)
	}
	parent := os.Getppid()
	if err := os.WriteFile(out+".ready", nil, 0o600); err != nil {
		os.Exit(2)
	}
	for os.Getppid() == parent {
		time.Sleep(5 * time.Millisecond)
	}
	self, err := os.Readlink("/proc/self")
	if err != nil {
		os.Exit(2)
	}
	if err := os.WriteFile(out+".tmp", []byte(self+" "+strconv.Itoa(os.Getppid())), 0o600); err != nil {
		os.Exit(2)
	}
	if err := os.Rename(out+".tmp", out); err != nil {
		os.Exit(2)
	}
	os.Exit(0)
}
