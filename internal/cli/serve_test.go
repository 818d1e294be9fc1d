package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/internal/testenv"
)

// serveProc is the test binary running as `hutch serve`.
type serveProc struct {
	cmd      *exec.Cmd
	out, err bytes.Buffer
	client   *http.Client
}

// startServe runs `hutch serve` and waits for its socket to answer.
func startServe(t *testing.T, e *env, args ...string) *serveProc {
	t.Helper()
	p := &serveProc{cmd: e.hutchCmd(append([]string{"serve"}, args...)...)}
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.err
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.cmd.Process.Kill(); _ = p.cmd.Wait() })
	sock := filepath.Join(e.state, "hutch.sock")
	p.client = &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if resp, err := p.client.Get("http://hutch/v1/health"); err == nil {
			_ = resp.Body.Close()
			return p
		}
		if time.Now().After(deadline) {
			t.Fatalf("hutch serve did not answer: %s %s", p.out.String(), p.err.String())
		}
	}
}

// TestServe_GracefulShutdown sends SIGTERM while a command runs: a short
// command finishes within the grace period, a long one is killed when it
// ends, and the daemon exits 0 either way.
func TestServe_GracefulShutdown(t *testing.T) {
	for _, tc := range []struct {
		name, grace, command, want string
	}{
		{"finishes", "20s", "sleep 1; echo finished", `"exitCode":0`},
		{"killed", "1s", "sleep 60; echo never", `"aborted":true`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.ok("door", "set", "web/serve", "shared")
			p := startServe(t, e, "--grace", tc.grace)
			done := make(chan string, 1)
			go func() {
				resp, err := p.client.Post("http://hutch/v1/exec", "application/json",
					strings.NewReader(`{"conversation":{"platform":"web","conversationId":"serve"},"command":"`+tc.command+`"}`))
				if err != nil {
					done <- "error: " + err.Error()
					return
				}
				defer func() { _ = resp.Body.Close() }()
				b, _ := io.ReadAll(resp.Body)
				done <- string(b)
			}()
			time.Sleep(300 * time.Millisecond)
			if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			body := <-done
			if !strings.Contains(body, tc.want) {
				t.Errorf("exec answer %q lacks %s", body, tc.want)
			}
			if err := p.cmd.Wait(); err != nil {
				t.Errorf("hutch serve exited with %v; stderr %s", err, p.err.String())
			}
			if !strings.Contains(p.out.String(), "hutch serve: stopped") {
				t.Errorf("stdout %q", p.out.String())
			}
		})
	}
}

// TestServe_RefusesBadMode: startup validation refuses with the reason.
// TestServe_RefusesModeThatCannotWork: serve checks its mode before it
// listens; gondolin without guest assets says how to build them.
func TestServe_RefusesModeThatCannotWork(t *testing.T) {
	e := newEnv(t)
	e.extra = map[string]string{"HUTCH_AGENT_BINARY": testenv.HutchBinary(t)}
	_, errOut, code := e.run("", "serve", "--sandbox", "gondolin:default")
	want := "hutch: No microVM guest in " + filepath.Join(e.state, "microvm", "default") + ": build one with hutch microvm image build\n"
	if code != 1 || errOut != want {
		t.Errorf("exit %d, %q; want %q", code, errOut, want)
	}
}

// TestExec_UsesDaemon: with a daemon answering, hutch exec runs the
// command there (its parent is the daemon), piped stdin included.
func TestExec_UsesDaemon(t *testing.T) {
	e := newEnv(t)
	e.ok("door", "set", "web/serve", "shared")
	p := startServe(t, e)
	cmd := e.hutchCmd("exec", "--conversation", "web/serve", "--", `echo "$PPID"; cat; exit 5`)
	cmd.Stdin = strings.NewReader("piped\n")
	out, err := cmd.Output()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 5 {
		t.Fatalf("hutch exec: %v (want exit 5)", err)
	}
	want := strconv.Itoa(p.cmd.Process.Pid) + "\npiped\n"
	if string(out) != want {
		t.Errorf("output %q, want %q (the command's parent should be the daemon)", out, want)
	}
	resp, err := p.client.Get("http://hutch/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if !strings.Contains(string(metrics), `hutch_commands_total{mode="host",outcome="failed"} 1`) {
		t.Errorf("/metrics does not count the command:\n%s", metrics)
	}
	// A different mode than the daemon's runs in-process.
	cmd = e.hutchCmd("exec", "--sandbox", "image:x", "--conversation", "web/serve", "--", "true")
	if out, err := cmd.CombinedOutput(); err == nil || strings.Contains(string(out), "daemon") {
		t.Errorf("exec in another mode: %v %s", err, out)
	}
}

// TestSandboxCommands_UseDaemon: with an image-mode daemon answering,
// hutch sandbox status sees the command the daemon is running.
func TestSandboxCommands_UseDaemon(t *testing.T) {
	e, mode := dockerEnv(t)
	p := startServe(t, e, "--sandbox", mode)
	done := make(chan struct{})
	go func() {
		defer close(done)
		resp, err := p.client.Post("http://hutch/v1/exec", "application/json",
			strings.NewReader(`{"conversation":{"platform":"web","conversationId":"busy"},"command":"sleep 3"}`))
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
		}
	}()
	var out []byte
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		out, _ = e.hutchCmd("sandbox", "status", "web/busy").Output()
		if strings.Contains(string(out), "Running:       1 commands") {
			break
		}
	}
	if !strings.Contains(string(out), "Running:       1 commands") {
		t.Errorf("sandbox status did not see the daemon's running command:\n%s", out)
	}
	<-done
	// The lists through the daemon carry the daemon's mode.
	if out, err := e.hutchCmd("sandbox", "ls", "--json").Output(); err != nil || !strings.Contains(string(out), `"conversationId":"busy"`) || !strings.Contains(string(out), `"mode":"image"`) {
		t.Errorf("sandbox ls --json via the daemon: %v %s", err, out)
	}
	if out, err := e.hutchCmd("sandbox", "stop", "web/busy").CombinedOutput(); err != nil || !strings.Contains(string(out), "Stopped the runtime of web/busy") {
		t.Errorf("sandbox stop via the daemon: %v %s", err, out)
	}
	// The daemon stopped it for a hutch command: the log says so, and
	// who ran the command.
	me, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	events, err := e.hutchCmd("events", "--json").Output()
	if err != nil {
		t.Fatal(err)
	}
	want := `"surface":"cli","who":"` + me.Username + `","action":"runtime.stopped","target":"` + key(t, "web", "busy") + `"`
	if !strings.Contains(string(events), want) {
		t.Errorf("the events lack %s:\n%s", want, events)
	}
}

// TestServe_LogFormatJSON: with --log-format json every line the daemon
// logs on stderr is one JSON object (slog's), and a format hutch does not
// know is refused before anything starts.
func TestServe_LogFormatJSON(t *testing.T) {
	e := newEnv(t)
	p := startServe(t, e, "--log-format", "json", "--log-level", "info")
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Wait(); err != nil {
		t.Fatalf("serve: %v\n%s", err, p.err.String())
	}
	lines := strings.Split(strings.TrimSuffix(p.err.String(), "\n"), "\n")
	if len(lines) == 0 || !strings.Contains(p.err.String(), `"msg":"shutting down`) {
		t.Fatalf("no shutdown line at info:\n%s", p.err.String())
	}
	for _, line := range lines {
		var obj map[string]any
		if err := json.Unmarshal([]byte(line), &obj); err != nil || obj["msg"] == nil || obj["level"] == nil || obj["time"] == nil {
			t.Errorf("not a slog JSON line: %q (%v)", line, err)
		}
	}
	_, errOut, code := e.run("", "serve", "--log-format", "yaml")
	if code != 1 || errOut != "hutch: --log-format \"yaml\": use text or json\n" {
		t.Errorf("--log-format yaml: exit %d, %q", code, errOut)
	}
}
