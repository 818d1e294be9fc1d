package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/sandbox"
)

func unixClient(t *testing.T, path string) *Client {
	t.Helper()
	c := NewClient(func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", path)
	}, testLogger(t))
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// waitPing pings until the agent answers.
func waitPing(t *testing.T, c *Client) Info {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		info, err := c.Ping(ctx)
		cancel()
		if err == nil {
			return info
		}
		if time.Now().After(deadline) {
			t.Fatalf("agent did not answer: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestRun_NeedsExactlyOneTransport(t *testing.T) {
	for _, tt := range []struct {
		name string
		opts Options
	}{
		{"neither", Options{}},
		{"both", Options{Listen: "/tmp/x.sock", Stdio: true}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := Run(context.Background(), tt.opts)
			if !errdefs.IsInvalid(err) || err.Error() != "Agent needs exactly one of --listen and --stdio" {
				t.Errorf("Run error got %v", err)
			}
		})
	}
}

func TestRun_Listen(t *testing.T) {
	base := filepath.Dir(socketPath(t))

	t.Run("creates_dir_and_owner_only_socket", func(t *testing.T) {
		path := filepath.Join(base, "new", "agent.sock")
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- Run(ctx, Options{Listen: path, Version: "v-test", Log: testLogger(t)}) }()
		info := waitPing(t, unixClient(t, path))
		if diff := cmp.Diff(Info{Version: "v-test", PID: os.Getpid()}, info); diff != "" {
			t.Errorf("Ping mismatch (-want +got):\n%s", diff)
		}
		for p, want := range map[string]os.FileMode{filepath.Dir(path): 0o700 | os.ModeDir, path: 0o600 | os.ModeSocket} {
			fi, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode() != want {
				t.Errorf("%s mode got %v, want %v", p, fi.Mode(), want)
			}
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run after cancel: %v", err)
		}
	})

	t.Run("removes_stale_socket", func(t *testing.T) {
		path := filepath.Join(base, "stale.sock")
		l, err := net.Listen("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		l.(*net.UnixListener).SetUnlinkOnClose(false)
		_ = l.Close()
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- Run(ctx, Options{Listen: path, Log: testLogger(t)}) }()
		waitPing(t, unixClient(t, path))
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run after cancel: %v", err)
		}
	})

	t.Run("refuses_live_socket", func(t *testing.T) {
		path := filepath.Join(base, "live.sock")
		l, err := net.Listen("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = l.Close() }()
		err = Run(context.Background(), Options{Listen: path})
		if !errdefs.IsConflict(err) || err.Error() != "Another agent is already listening on "+path {
			t.Errorf("Run error got %v", err)
		}
	})

	t.Run("refuses_other_file", func(t *testing.T) {
		path := filepath.Join(base, "file.sock")
		if err := os.WriteFile(path, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		err := Run(context.Background(), Options{Listen: path})
		if !errdefs.IsConflict(err) || err.Error() != "Agent socket path exists and is not a socket: "+path {
			t.Errorf("Run error got %v", err)
		}
	})
}

func TestRun_Stdio(t *testing.T) {
	// Two pipes make the agent's stdin and stdout, as a hijacked exec
	// session or `ssh host hutch agent --stdio` would.
	toAgentR, toAgentW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	fromAgentR, fromAgentW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		done <- Run(context.Background(), Options{Stdio: true, Stdin: toAgentR, Stdout: fromAgentW, Log: testLogger(t)})
	}()
	var once sync.Once
	c := NewClient(func(context.Context) (net.Conn, error) {
		err := errors.New("the stdio connection was already used")
		var conn net.Conn
		once.Do(func() { conn, err = NewStdioConn(fromAgentR, toAgentW), nil })
		return conn, err
	}, testLogger(t))
	var out, errOut bytes.Buffer
	res := mustExec(t, c, sandbox.ExecRequest{Argv: []string{"cat; echo done >&2"}, Stdin: strings.NewReader("over stdio\n"), Stdout: &out, Stderr: &errOut})
	if res.ExitCode != 0 || out.String() != "over stdio\n" || errOut.String() != "done\n" {
		t.Errorf("got exit %d stdout %q stderr %q", res.ExitCode, out.String(), errOut.String())
	}
	_ = c.Close() // the daemon goes: the agent's stdin ends
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
}

// agentProcess is `hutch agent --listen` in a process of its own.
type agentProcess struct {
	cmd    *exec.Cmd
	client *Client
	stderr *bytes.Buffer
}

// startAgent starts the agent helper; init asks for --init, sys for
// process attributes (a pid namespace).
func startAgent(t *testing.T, init bool, sys *syscall.SysProcAttr) (*agentProcess, error) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	path := socketPath(t)
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), helperEnv+"=agent", "HUTCH_AGENT_TEST_SOCKET="+path, "HUTCH_AGENT_TEST_INIT="+map[bool]string{true: "1"}[init])
	stderr := new(bytes.Buffer)
	cmd.Stderr = &lockedBuffer{b: stderr}
	cmd.SysProcAttr = sys
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	a := &agentProcess{cmd: cmd, client: unixClient(t, path), stderr: stderr}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
		if t.Failed() {
			t.Logf("agent stderr:\n%s", a.stderr)
		}
	})
	return a, nil
}

// lockedBuffer lets exec's copy goroutine and the test share a buffer.
type lockedBuffer struct {
	mu sync.Mutex
	b  *bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// terminate sends SIGTERM and checks the agent exits 0.
func (a *agentProcess) terminate(t *testing.T) {
	t.Helper()
	if err := a.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := a.cmd.Wait(); err != nil {
		t.Errorf("agent after SIGTERM: %v, want exit 0", err)
	}
}

func TestRun_SIGTERMKillsCommandsAndExitsZero(t *testing.T) {
	a, err := startAgent(t, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	waitPing(t, a.client)
	pidfile := filepath.Join(t.TempDir(), "pid")
	type outcome struct {
		res sandbox.ExecResult
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := a.client.Exec(context.Background(), sandbox.ExecRequest{Argv: []string{backgroundCommand(pidfile)}})
		done <- outcome{res, err}
	}()
	pid := readPid(t, pidfile)
	a.terminate(t)
	waitDead(t, pid)
	if o := <-done; !(o.err == nil && o.res.Aborted) && !errdefs.IsUnavailable(o.err) {
		t.Errorf("Exec got %+v, %v; want Aborted or a lost connection", o.res, o.err)
	}
}

// TestRun_InitReapsOrphans checks the pid-1 duties: a process that left a
// command's group (setsid) and outlived it is re-parented to the agent,
// which reaps it when it exits. As pid 1 of a new pid namespace (what a
// container gives it) when this process may create one, and as a child
// subreaper (what --init does when the agent is not pid 1) always.
func TestRun_InitReapsOrphans(t *testing.T) {
	tests := []struct {
		name string
		sys  *syscall.SysProcAttr
	}{
		{"pid_namespace", &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID}},
		{"subreaper", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := startAgent(t, true, tt.sys)
			if err != nil {
				if tt.sys != nil && (errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EINVAL)) {
					t.Skipf("cannot create a pid namespace here: %v", err)
				}
				t.Fatal(err)
			}
			info := waitPing(t, a.client)
			wantPid, wantPpid := a.cmd.Process.Pid, a.cmd.Process.Pid
			if tt.sys != nil {
				wantPid, wantPpid = 1, 1
			}
			if diff := cmp.Diff(Info{Version: "test", PID: wantPid, Init: true}, info); diff != "" {
				t.Errorf("Ping mismatch (-want +got):\n%s", diff)
			}

			exe, err := os.Executable()
			if err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(t.TempDir(), "orphan")
			res, err := a.client.Exec(context.Background(), sandbox.ExecRequest{
				Argv: []string{fmt.Sprintf(`%s=orphan %q %q & while [ ! -e %q ]; do sleep 0.01; done`, helperEnv, exe, out, out+".ready")},
			})
			if err != nil || res.ExitCode != 0 {
				t.Fatalf("Exec got %+v, %v", res, err)
			}
			fields := strings.Fields(waitFile(t, out))
			if len(fields) != 2 {
				t.Fatalf("orphan wrote %q", fields)
			}
			orphan, _ := strconv.Atoi(fields[0])
			ppid, _ := strconv.Atoi(fields[1])
			if ppid != wantPpid {
				t.Errorf("orphan re-parented to %d, want %d (the agent)", ppid, wantPpid)
			}
			waitGone(t, orphan)

			t.Run("sigterm_exits_zero", func(t *testing.T) {
				a.terminate(t)
			})
		})
	}
}

// TestRun_StdioReaderGone: nobody reads the agent's stdout any more (the
// daemon died, the exec session broke) while a command prints, and the
// agent's next write fails before it sees its stdin end. The agent must
// get EPIPE (not die of SIGPIPE, which would leave the command running),
// end the connection, kill the command's group and exit 0.
func TestRun_StdioReaderGone(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), helperEnv+"=stdio-agent")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = stdin.Close() }()
	agentOut, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := new(bytes.Buffer)
	cmd.Stderr = &lockedBuffer{b: stderr}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if t.Failed() {
			t.Logf("agent stderr:\n%s", stderr)
		}
	}()
	// A relay between the agent's stdout and the client, so that the
	// agent's stdout can break while the client's side stays quietly open
	// (a client that saw an error would cancel the command itself).
	clientR, clientW := io.Pipe()
	defer func() { _ = clientW.Close() }()
	go func() { _, _ = io.Copy(clientW, agentOut) }()
	var once sync.Once
	c := NewClient(func(context.Context) (net.Conn, error) {
		err := errors.New("the stdio connection was already used")
		var conn net.Conn
		once.Do(func() { conn, err = NewStdioConn(clientR, struct{ io.Writer }{stdin}), nil })
		return conn, err
	}, testLogger(t))
	pidfile := filepath.Join(t.TempDir(), "pid")
	go func() {
		_, _ = c.Exec(context.Background(), sandbox.ExecRequest{
			Argv: []string{fmt.Sprintf("sleep 300 & echo $! > %[1]s.tmp && mv %[1]s.tmp %[1]s; while :; do echo tick; sleep 0.01; done", pidfile)},
		})
	}()
	pid := readPid(t, pidfile)
	_ = agentOut.Close() // the agent's stdout has no reader any more; its stdin stays open
	if err := cmd.Wait(); err != nil {
		t.Errorf("agent ended with %v, want exit 0", err)
	}
	waitDead(t, pid)
}
