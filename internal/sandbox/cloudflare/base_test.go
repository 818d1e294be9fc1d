package cloudflare_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/sandbox/cloudflare"
)

// baseRequest is everything a base bridge accepts; it refuses any other
// field, which proves the client sends a base bridge nothing else.
type baseRequest struct {
	SandboxID      string            `json:"sandboxId"`
	Command        string            `json:"command"`
	Cwd            string            `json:"cwd"`
	TimeoutSeconds float64           `json:"timeoutSeconds"`
	Env            map[string]string `json:"env"`
}

// baseBridge is a bridge of the protocol's base only, as bridges written
// for the reference system are: GET /health answers a plain 200, POST
// /exec runs `sh -c command` here and answers once it ended. Each sandbox
// id's /workspace is a directory of its own under root.
type baseBridge struct {
	root string
	url  string

	mu       sync.Mutex // guards the following
	requests []baseRequest
}

func (b *baseBridge) workspace(sandboxID string) string { return filepath.Join(b.root, sandboxID) }

func (b *baseBridge) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/health":
		_, _ = fmt.Fprint(w, "ok")
	case "/exec":
		var req baseRequest
		dec := json.NewDecoder(r.Body)
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			_ = json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
			return
		}
		b.mu.Lock()
		b.requests = append(b.requests, req)
		b.mu.Unlock()
		ws := b.workspace(req.SandboxID)
		if err := os.MkdirAll(ws, 0o700); err != nil {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		dir := req.Cwd
		if rest, ok := strings.CutPrefix(dir, "/workspace"); ok {
			dir = ws + rest
		}
		ctx := r.Context()
		if req.TimeoutSeconds > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, time.Duration(req.TimeoutSeconds*float64(time.Second)))
			defer cancel()
		}
		cmd := exec.CommandContext(ctx, "sh", "-c", req.Command)
		// The timeout and a closed request kill the whole group.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
		cmd.WaitDelay = time.Second
		cmd.Dir = dir
		cmd.Env = os.Environ()
		for k, v := range req.Env {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		resp := map[string]any{"stdout": stdout.String(), "stderr": stderr.String(), "code": cmd.ProcessState.ExitCode(), "error": ""}
		var exitErr *exec.ExitError
		switch {
		case ctx.Err() != nil && r.Context().Err() == nil:
			resp["code"], resp["error"] = -1, fmt.Sprintf("Command timed out after %v seconds", req.TimeoutSeconds)
		case err != nil && !errors.As(err, &exitErr):
			resp["code"], resp["error"] = -1, err.Error()
		}
		_ = json.NewEncoder(w).Encode(resp)
	default:
		http.NotFound(w, r)
	}
}

func (b *baseBridge) last(t *testing.T) baseRequest {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.requests) == 0 {
		t.Fatal("the bridge got no exec request")
	}
	return b.requests[len(b.requests)-1]
}

// newBaseBridge starts a base bridge and a runtime of cloudflare:box
// that talks to it.
func newBaseBridge(t *testing.T) (*baseBridge, *cloudflare.Runtime) {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	b := &baseBridge{root: root}
	srv := httptest.NewServer(b)
	t.Cleanup(srv.Close)
	b.url = srv.URL
	rt, err := cloudflare.New(cloudflare.Config{SandboxID: "box", URL: srv.URL, HTTPClient: srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	return b, rt
}

// closedURL returns the URL of a loopback port nothing listens on.
func closedURL(t *testing.T) string {
	srv := httptest.NewServer(http.NotFoundHandler())
	srv.Close()
	return srv.URL
}

// spec is the conversation every fake-bridge test runs for.
var spec = sandbox.Spec{OfficeKey: "v1-web-chat-0123456789abcdef", OfficeRuntimePath: "/workspace/v1-web-chat-0123456789abcdef"}

// remoteID is the bridge sandbox id of spec under cloudflare:box.
const remoteID = "box-v1-web-chat-0123456789abcdef"

// execute runs req through rt, capturing both streams unless req sets writers.
func execute(t *testing.T, rt sandbox.Runtime, req sandbox.ExecRequest) (sandbox.ExecResult, string, string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	if req.Stdout == nil {
		req.Stdout = &out
	}
	if req.Stderr == nil {
		req.Stderr = &errb
	}
	res, err := rt.Exec(t.Context(), spec, req)
	return res, out.String(), errb.String(), err
}

func TestBaseBridge(t *testing.T) {
	t.Parallel()
	b, rt := newBaseBridge(t)
	h, err := rt.Health(t.Context())
	if err != nil {
		t.Fatalf("Health: %v", err)
	}
	if diff := cmp.Diff(cloudflare.Health{}, h); diff != "" {
		t.Errorf("Health of a base bridge mismatch (-want +got):\n%s", diff)
	}
	ws := b.workspace(remoteID)
	if err := os.MkdirAll(filepath.Join(ws, "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name         string
		req          sandbox.ExecRequest
		wantCode     int
		wantStdout   string
		wantCommand  string
		wantCwd      string
		wantTimeoutS float64
	}{
		{name: "exit_code", req: sandbox.ExecRequest{Argv: []string{"exit 3"}}, wantCode: 3, wantCommand: "exit 3", wantCwd: "/workspace"},
		{name: "argv_exit_code", req: sandbox.ExecRequest{Argv: []string{"sh", "-c", "exit 7"}}, wantCode: 7, wantCommand: `exec 'sh' '-c' 'exit 7'`, wantCwd: "/workspace"},
		{
			name:        "quoted_argv",
			req:         sandbox.ExecRequest{Argv: []string{"printf", "%s|", "a b", "$HOME", "*", ";", `"q"`, "it's", `\'`, ""}},
			wantStdout:  `a b|$HOME|*|;|"q"|it's|\'||`,
			wantCommand: `exec 'printf' '%s|' 'a b' '$HOME' '*' ';' '"q"' 'it'\''s' '\'\''' ''`,
			wantCwd:     "/workspace",
		},
		{
			name:       "env",
			req:        sandbox.ExecRequest{Argv: []string{`printf %s "$HUTCH_T"`}, Env: map[string]string{"HUTCH_T": "s3cret value with spaces"}},
			wantStdout: "s3cret value with spaces", wantCommand: `printf %s "$HUTCH_T"`, wantCwd: "/workspace",
		},
		{name: "cwd_default", req: sandbox.ExecRequest{Argv: []string{"pwd"}}, wantStdout: ws + "\n", wantCommand: "pwd", wantCwd: "/workspace"},
		{name: "cwd_relative", req: sandbox.ExecRequest{Argv: []string{"pwd"}, Dir: "sub"}, wantStdout: ws + "/sub\n", wantCommand: "pwd", wantCwd: "/workspace/sub"},
		{name: "cwd_absolute", req: sandbox.ExecRequest{Argv: []string{"pwd"}, Dir: "/workspace/sub"}, wantStdout: ws + "/sub\n", wantCommand: "pwd", wantCwd: "/workspace/sub"},
		{name: "cwd_elsewhere", req: sandbox.ExecRequest{Argv: []string{"pwd"}, Dir: ws}, wantStdout: ws + "\n", wantCommand: "pwd", wantCwd: ws},
		{name: "timeout_rounded_up", req: sandbox.ExecRequest{Argv: []string{"true"}, Timeout: 1200 * time.Millisecond}, wantCommand: "true", wantCwd: "/workspace", wantTimeoutS: 2},
		{name: "empty_stdin_is_fine", req: sandbox.ExecRequest{Argv: []string{"true"}, Stdin: strings.NewReader("")}, wantCommand: "true", wantCwd: "/workspace"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Not parallel: each case reads the bridge's last request.
			res, stdout, stderr, err := execute(t, rt, tt.req)
			if err != nil {
				t.Fatalf("Exec(%q): %v", tt.req.Argv, err)
			}
			if res.ExitCode != tt.wantCode || stdout != tt.wantStdout {
				t.Errorf("Exec(%q): exit %d, stdout %q, stderr %q; want exit %d, stdout %q", tt.req.Argv, res.ExitCode, stdout, stderr, tt.wantCode, tt.wantStdout)
			}
			want := baseRequest{SandboxID: remoteID, Command: tt.wantCommand, Cwd: tt.wantCwd, TimeoutSeconds: tt.wantTimeoutS, Env: tt.req.Env}
			if diff := cmp.Diff(want, b.last(t)); diff != "" {
				t.Errorf("request the bridge got mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestBaseBridge_Results(t *testing.T) {
	t.Parallel()
	_, rt := newBaseBridge(t)
	t.Run("output_limit", func(t *testing.T) {
		t.Parallel()
		var out bytes.Buffer
		res, _, _, err := execute(t, rt, sandbox.ExecRequest{Argv: []string{"head -c 5000 /dev/zero; echo err >&2"}, Stdout: &out, OutputLimit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		want := sandbox.ExecResult{StdoutTruncated: true, StdoutBytes: 5000, StderrBytes: 4}
		if diff := cmp.Diff(want, res, ignoreDuration); diff != "" {
			t.Errorf("result mismatch (-want +got):\n%s", diff)
		}
		if out.Len() != 1000 {
			t.Errorf("kept %d bytes of stdout, want 1000", out.Len())
		}
	})
	t.Run("timeout", func(t *testing.T) {
		t.Parallel()
		res, _, _, err := execute(t, rt, sandbox.ExecRequest{Argv: []string{"sleep 30"}, Timeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		want := sandbox.ExecResult{ExitCode: -1, TimedOut: true, Timeout: time.Second}
		if diff := cmp.Diff(want, res, ignoreDuration); diff != "" {
			t.Errorf("result mismatch (-want +got):\n%s", diff)
		}
		if got, want := res.Message(), "Command timed out after 1 second"; got != want {
			t.Errorf("Message() = %q, want %q", got, want)
		}
	})
	t.Run("stdin_refused", func(t *testing.T) {
		t.Parallel()
		res, _, _, err := execute(t, rt, sandbox.ExecRequest{Argv: []string{"cat"}, Stdin: strings.NewReader("hello")})
		want := "does not take standard input (it does not advertise the stdin extension); the command was not run"
		if !errdefs.IsNotSupported(err) || !strings.Contains(err.Error(), want) {
			t.Errorf("Exec with stdin on a base bridge: %+v, %v; want ErrNotSupported saying %q", res, err, want)
		}
	})
	t.Run("not_utf8_refused", func(t *testing.T) {
		t.Parallel()
		_, _, _, err := execute(t, rt, sandbox.ExecRequest{Argv: []string{"printf", "\xff"}})
		if !errdefs.IsNotSupported(err) || !strings.Contains(err.Error(), "not valid UTF-8") {
			t.Errorf("Exec with a non-UTF-8 argument on a base bridge: %v; want ErrNotSupported", err)
		}
	})
	t.Run("abort", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
		defer cancel()
		res, err := rt.Exec(ctx, spec, sandbox.ExecRequest{Argv: []string{"sleep 30"}})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(sandbox.ExecResult{ExitCode: -1, Aborted: true}, res, ignoreDuration); diff != "" {
			t.Errorf("result mismatch (-want +got):\n%s", diff)
		}
	})
	t.Run("empty_command", func(t *testing.T) {
		t.Parallel()
		if _, _, _, err := execute(t, rt, sandbox.ExecRequest{Argv: []string{"  "}}); !errdefs.IsInvalid(err) {
			t.Errorf("Exec of an empty command: %v; want ErrInvalid", err)
		}
	})
}

// TestShellQuote runs quoted argvs through sh and checks every argument
// arrives as it was.
func TestShellQuote(t *testing.T) {
	t.Parallel()
	for _, argv := range [][]string{
		{"printf", "%s\\0", "plain"},
		{"printf", "%s\\0", "", "a b", "'", "''", `'\''`, "\"", "$(id)", "`id`", "a\nb", "\\", "*", "~", "-n", "ü"},
	} {
		out, err := exec.Command("sh", "-c", cloudflare.ShellQuote(argv)).Output()
		if err != nil {
			t.Fatalf("sh -c %q: %v", cloudflare.ShellQuote(argv), err)
		}
		got := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
		if diff := cmp.Diff(argv[2:], got); diff != "" {
			t.Errorf("arguments through sh -c %q mismatch (-want +got):\n%s", cloudflare.ShellQuote(argv), diff)
		}
	}
	if got, want := cloudflare.ShellQuote([]string{"-x", "a"}), `'-x' 'a'`; got != want {
		t.Errorf("ShellQuote of a program starting with '-' = %q, want %q (no exec, which would read it as an option)", got, want)
	}
}
