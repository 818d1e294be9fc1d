package bridge_test

import (
	"bytes"
	"encoding/base64"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/hutchsandbox/hutch/internal/bridge"
	"github.com/hutchsandbox/hutch/internal/bridge/protocol"
	"github.com/hutchsandbox/hutch/internal/sandbox"
)

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

func TestNew_Validates(t *testing.T) {
	svc := newService(t, &logBuffer{}, nil)
	host := sandbox.Mode{Kind: sandbox.KindHost}
	for _, tt := range []struct {
		name string
		o    bridge.Options
		want string
	}{
		{"no_service", bridge.Options{Mode: host, Token: "t"}, "bridge: no service"},
		{"no_token", bridge.Options{Service: svc, Mode: host}, "bridge: a token is required"},
		{"bridged_mode", bridge.Options{Service: svc, Mode: sandbox.Mode{Kind: sandbox.KindCloudflare, Target: "x"}, Token: "t"},
			"A bridge runs commands on its own machine; 'cloudflare:x' would pass them to another bridge. Use host, container:<name>, image:<image> or gondolin:default"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := bridge.New(tt.o); err == nil || err.Error() != tt.want {
				t.Errorf("New: %v; want %q", err, tt.want)
			}
		})
	}
}

func TestHealth(t *testing.T) {
	f := hostFixture(t)
	code, body := f.do(http.MethodGet, "/health", "", "Bearer "+testToken)
	want := `{"ok":true,"bridge":"hutch","version":"test","extensions":["stream","cancel","execId","argv","stdin"]}` + "\n"
	if code != http.StatusOK || body != want {
		t.Errorf("GET /health: %d %s; want 200 %s", code, body, want)
	}
}

func TestAuth(t *testing.T) {
	f := hostFixture(t)
	const refusal = `{"error":"Missing or wrong bearer token"}` + "\n"
	for _, tt := range []struct{ name, auth string }{
		{"none", ""},
		{"wrong", "Bearer not-the-token"},
		{"prefix", "Bearer " + testToken[:10]},
		{"longer", "Bearer " + testToken + "x"},
		{"basic", "Basic " + testToken},
		{"bare", testToken},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for _, path := range []string{"/health", "/exec", "/cancel", "/nowhere"} {
				method := http.MethodPost
				if path == "/health" {
					method = http.MethodGet
				}
				code, body := f.do(method, path, `{"sandboxId":"auth","command":"touch pwned"}`, tt.auth)
				if code != http.StatusUnauthorized || body != refusal {
					t.Errorf("%s %s with %q: %d %s; want 401 %s", method, path, tt.auth, code, body, refusal)
				}
			}
		})
	}
	if _, err := os.Stat(filepath.Join(f.officeDir("auth"), "pwned")); !os.IsNotExist(err) {
		t.Errorf("an unauthenticated exec ran (stat: %v)", err)
	}
	// The scheme is case-insensitive.
	if code, body := f.do(http.MethodGet, "/health", "", "bearer "+testToken); code != http.StatusOK {
		t.Errorf("lower-case scheme: %d %s", code, body)
	}
	if strings.Contains(f.logs.String(), testToken[:10]) {
		t.Errorf("the log holds (part of) a token:\n%s", f.logs.String())
	}
}

func TestExec_Base(t *testing.T) {
	f := hostFixture(t)
	res := f.exec(protocol.ExecRequest{SandboxID: "base", Command: `echo out; echo err >&2; echo $((6*7)); exit 3`})
	want := protocol.ExecResponse{Stdout: "out\n42\n", Stderr: "err\n", Code: 3}
	if diff := cmp.Diff(want, res); diff != "" {
		t.Errorf("exec (-want +got):\n%s", diff)
	}
	// Unknown fields are ignored.
	code, body := f.do(http.MethodPost, "/exec", `{"sandboxId":"base","command":"echo ok","futureField":{"x":1}}`, "Bearer "+testToken)
	if code != http.StatusOK || body != `{"stdout":"ok\n","stderr":"","code":0,"error":""}`+"\n" {
		t.Errorf("exec with an unknown field: %d %s", code, body)
	}
}

func TestExec_Cwd(t *testing.T) {
	f := hostFixture(t)
	f.exec(protocol.ExecRequest{SandboxID: "cwd", Command: "mkdir -p sub/deeper"})
	dir := f.officeDir("cwd")
	other := t.TempDir()
	for _, tt := range []struct{ name, cwd, want string }{
		{"none", "", dir},
		{"workspace", "/workspace", dir},
		{"workspace_slash", "/workspace/", dir},
		{"workspace_sub", "/workspace/sub", filepath.Join(dir, "sub")},
		{"workspace_sub_unclean", "/workspace//sub/./deeper/", filepath.Join(dir, "sub", "deeper")},
		{"relative", "sub", filepath.Join(dir, "sub")},
		{"absolute", other, other},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res := f.exec(protocol.ExecRequest{SandboxID: "cwd", Command: "pwd -P", Cwd: tt.cwd})
			want, err := filepath.EvalSymlinks(tt.want)
			if err != nil {
				t.Fatal(err)
			}
			if res.Code != 0 || res.Stdout != want+"\n" {
				t.Errorf("pwd in cwd %q: %+v; want %s", tt.cwd, res, want)
			}
		})
	}
	code, body := f.post("/exec", protocol.ExecRequest{SandboxID: "cwd", Command: "pwd", Cwd: "/workspace/missing"})
	if code != http.StatusBadRequest || !strings.Contains(errorOf(t, body), "Working directory does not exist") {
		t.Errorf("missing cwd: %d %s; want 400 naming the directory", code, body)
	}
}

// TestExec_TwoSandboxes: two sandbox ids are two conversations, with two
// offices.
func TestExec_TwoSandboxes(t *testing.T) {
	f := hostFixture(t)
	pwd := map[string]string{}
	for _, id := range []string{"alpha", "beta"} {
		res := f.exec(protocol.ExecRequest{SandboxID: id, Command: "pwd; echo " + id + " > mine"})
		pwd[id] = strings.TrimSpace(res.Stdout)
		if pwd[id] != f.officeDir(id) {
			t.Errorf("sandbox %s runs in %s; want its office %s", id, pwd[id], f.officeDir(id))
		}
	}
	if pwd["alpha"] == pwd["beta"] {
		t.Fatalf("both sandbox ids ran in %s", pwd["alpha"])
	}
	for _, id := range []string{"alpha", "beta"} {
		if got := f.exec(protocol.ExecRequest{SandboxID: id, Command: "cat mine"}).Stdout; got != id+"\n" {
			t.Errorf("sandbox %s reads %q from its office; want %q", id, got, id+"\n")
		}
	}
}

// TestExec_EnvHost: host mode injects no env, so a request with env is
// refused (and does not run), and its value shows nowhere.
func TestExec_EnvHost(t *testing.T) {
	f := hostFixture(t)
	const secret = "s3cret-bridge-value-9f2c"
	code, body := f.post("/exec", protocol.ExecRequest{SandboxID: "env", Command: "touch ran; echo $HUTCH_T", Env: map[string]string{"HUTCH_T": secret}})
	if code != http.StatusBadRequest || errorOf(t, body) != "Sandbox 'host' does not inject vault env" {
		t.Errorf("exec with env in host mode: %d %s; want 400 and the host refusal", code, body)
	}
	if _, err := os.Stat(filepath.Join(f.officeDir("env"), "ran")); !os.IsNotExist(err) {
		t.Errorf("the refused command ran (stat: %v)", err)
	}
	for what, text := range map[string]string{"answer": body, "log": f.logs.String()} {
		if strings.Contains(text, secret) {
			t.Errorf("the %s holds the env value:\n%s", what, text)
		}
	}
	if !strings.Contains(f.logs.String(), "HUTCH_T") {
		t.Errorf("the log does not name the env key HUTCH_T:\n%s", f.logs.String())
	}
}

func TestExec_Argv(t *testing.T) {
	f := hostFixture(t)
	res := f.exec(protocol.ExecRequest{SandboxID: "argv", Argv: []string{"printf", "%s|", "a b", "$HOME", "*"}})
	if res.Code != 0 || res.Stdout != "a b|$HOME|*|" {
		t.Errorf("argv: %+v; want the arguments untouched by a shell", res)
	}
	// One element is a program, not a shell string.
	if res := f.exec(protocol.ExecRequest{SandboxID: "argv", Argv: []string{"true"}}); res.Code != 0 {
		t.Errorf("argv [true]: %+v", res)
	}
	if res := f.exec(protocol.ExecRequest{SandboxID: "argv", Argv: []string{"echo hi"}}); res.Code != 127 || res.Stdout != "" {
		t.Errorf(`argv ["echo hi"]: %+v; want exit 127 (no such program), not a shell running echo`, res)
	}

	// argvBase64 carries bytes that are not UTF-8.
	arg := "\xff\xfe-not-utf8-\x80"
	s := f.openStream(protocol.ExecRequest{SandboxID: "argv", ArgvBase64: []string{b64("sh"), b64("-c"), b64(`printf %s "$1" > arg.bin; printf %s "$1"`), b64("sh"), b64(arg)}})
	out, _, exit := s.rest()
	if exit.Code != 0 || string(out) != arg {
		t.Errorf("argvBase64: stdout %q, exit %+v; want %q", out, exit, arg)
	}
	if got, err := os.ReadFile(filepath.Join(f.officeDir("argv"), "arg.bin")); err != nil || string(got) != arg {
		t.Errorf("argvBase64: the command saw %q (%v); want %q", got, err, arg)
	}
}

func TestExec_Stdin(t *testing.T) {
	f := hostFixture(t)
	in := "line one\n\x00\xff binary\n"
	s := f.openStream(protocol.ExecRequest{SandboxID: "stdin", Command: "cat", Stdin: base64.StdEncoding.EncodeToString([]byte(in))})
	out, _, exit := s.rest()
	if exit.Code != 0 || string(out) != in {
		t.Errorf("cat with stdin: %q, %+v; want %q", out, exit, in)
	}
	res := f.exec(protocol.ExecRequest{SandboxID: "stdin", Command: "wc -c | tr -d ' '", Stdin: b64("12345")})
	if res.Stdout != "5\n" {
		t.Errorf("wc -c of 5 bytes of stdin: %+v", res)
	}
	// Without stdin, stdin is empty.
	if res := f.exec(protocol.ExecRequest{SandboxID: "stdin", Command: "wc -c | tr -d ' '"}); res.Stdout != "0\n" {
		t.Errorf("wc -c without stdin: %+v", res)
	}
}

func TestExec_ExecIDRunsOnce(t *testing.T) {
	f := hostFixture(t)
	count := filepath.Join(f.officeDir("once"), "count")
	id := newExecID()
	req := protocol.ExecRequest{SandboxID: "once", Command: "echo run >> count", ExecID: id}
	if res := f.exec(req); res.Code != 0 {
		t.Fatalf("first exec: %+v", res)
	}
	for _, again := range []protocol.ExecRequest{
		req,
		{SandboxID: "once", Command: "echo run >> count", ExecID: strings.ToUpper(id)},
		{SandboxID: "other", Command: "echo run >> " + count, ExecID: id},
		{SandboxID: "once", Command: "echo run >> count", ExecID: id, Stream: true},
	} {
		code, body := f.post("/exec", again)
		if code != http.StatusConflict || !strings.Contains(errorOf(t, body), "already ran") {
			t.Errorf("repeat %+v: %d %s; want 409", again, code, body)
		}
	}
	if data, err := os.ReadFile(count); err != nil || string(data) != "run\n" {
		t.Errorf("count file %q (%v); want the command run once", data, err)
	}

	// A repeat while the first still runs is refused too.
	id2 := newExecID()
	s := f.openStream(protocol.ExecRequest{SandboxID: "once", Command: "echo started; while [ ! -e go ]; do sleep 0.02; done; echo run >> count", ExecID: id2})
	s.untilStdout()
	code, body := f.post("/exec", protocol.ExecRequest{SandboxID: "once", Command: "echo run >> count", ExecID: id2})
	if code != http.StatusConflict {
		t.Errorf("repeat while running: %d %s; want 409", code, body)
	}
	if err := os.WriteFile(filepath.Join(f.officeDir("once"), "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, exit := s.rest(); exit.Code != 0 {
		t.Errorf("first run: %+v", exit)
	}
	if data, err := os.ReadFile(count); err != nil || string(data) != "run\nrun\n" {
		t.Errorf("count file %q (%v); want two runs in all", data, err)
	}
}

// TestExec_Stream: frames come as output comes. The command cannot end
// before the test creates a file, which it does only once the first frame
// has arrived; a bridge that held output back would fail the hang guard.
func TestExec_Stream(t *testing.T) {
	f := hostFixture(t)
	s := f.openStream(protocol.ExecRequest{SandboxID: "stream", Command: "echo a; echo e1 >&2; while [ ! -e go ]; do sleep 0.02; done; echo b; echo e2 >&2; exit 5"})
	if got := s.untilStdout(); got != "a\n" {
		t.Fatalf("first stdout %q, want %q", got, "a\n")
	}
	if err := os.WriteFile(filepath.Join(f.officeDir("stream"), "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	out, errb, exit := s.rest()
	if string(out) != "a\nb\n" || string(errb) != "e1\ne2\n" {
		t.Errorf("streams %q and %q; want %q and %q", out, errb, "a\nb\n", "e1\ne2\n")
	}
	if diff := cmp.Diff(protocol.Exit{Code: 5}, exit); diff != "" {
		t.Errorf("exit line (-want +got):\n%s", diff)
	}
	// A command silent for a while gets its 200 before it ends: openStream
	// returns with the headers, and only then is the command let go.
	s = f.openStream(protocol.ExecRequest{SandboxID: "stream", Command: "while [ ! -e go2 ]; do sleep 0.02; done"})
	if err := os.WriteFile(filepath.Join(f.officeDir("stream"), "go2"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, _, exit := s.rest(); len(out) != 0 || exit.Code != 0 {
		t.Errorf("silent command: %q, %+v", out, exit)
	}
	// A signal that ends the command on its own is named.
	s = f.openStream(protocol.ExecRequest{SandboxID: "stream", Command: "kill -SEGV $$"})
	if _, _, exit := s.rest(); exit.Signal != "SIGSEGV" || exit.Code != -1 || exit.Error != "Command was killed by SIGSEGV" {
		t.Errorf("exit of a command killed by SIGSEGV: %+v", exit)
	}
	// Errors before the command starts keep their status.
	code, body := f.post("/exec", protocol.ExecRequest{SandboxID: "stream", Argv: []string{"no-such-program-x", "arg"}, Stream: true})
	if code != http.StatusBadRequest || errorOf(t, body) != "Program not found: no-such-program-x" {
		t.Errorf("streamed exec of a missing program: %d %s; want 400", code, body)
	}
}

// TestExec_CancelByClose: closing a streamed exec's connection kills the
// command and every process it started.
func TestExec_CancelByClose(t *testing.T) {
	f := hostFixture(t)
	s := f.openStream(protocol.ExecRequest{SandboxID: "close", Command: "sleep 300 & echo $!; wait"})
	child := pidOf(t, s.untilStdout())
	s.close()
	waitGone(t, child)
	waitFor(t, "the bridge logs the aborted command", func() bool {
		return strings.Contains(f.logs.String(), "aborted=true")
	})
}

func TestCancel(t *testing.T) {
	f := hostFixture(t)
	id := newExecID()
	s := f.openStream(protocol.ExecRequest{SandboxID: "cancel", Command: "sleep 300 & echo $!; wait", ExecID: id})
	child := pidOf(t, s.untilStdout())

	for _, tt := range []struct {
		name string
		req  protocol.CancelRequest
	}{
		{"unknown_id", protocol.CancelRequest{SandboxID: "cancel", ExecID: newExecID()}},
		{"other_sandbox", protocol.CancelRequest{SandboxID: "other", ExecID: id}},
	} {
		code, body := f.post("/cancel", tt.req)
		if code != http.StatusOK || body != `{"cancelled":false}`+"\n" {
			t.Errorf("%s: %d %s; want 200 {\"cancelled\":false}", tt.name, code, body)
		}
	}
	code, body := f.post("/cancel", protocol.CancelRequest{SandboxID: "cancel", ExecID: id})
	if code != http.StatusOK || body != `{"cancelled":true}`+"\n" {
		t.Fatalf("cancel: %d %s; want 200 {\"cancelled\":true}", code, body)
	}
	waitGone(t, child)
	_, _, exit := s.rest()
	if diff := cmp.Diff(protocol.Exit{Code: -1, Error: "Command aborted"}, exit); diff != "" {
		t.Errorf("exit line of the cancelled command (-want +got):\n%s", diff)
	}
	code, body = f.post("/cancel", protocol.CancelRequest{SandboxID: "cancel", ExecID: id})
	if code != http.StatusOK || body != `{"cancelled":false}`+"\n" {
		t.Errorf("cancel after the end: %d %s; want {\"cancelled\":false}", code, body)
	}
	for _, tt := range []struct{ body, want string }{
		{`{"execId":"` + id + `"}`, "sandboxId is required"},
		{`{"sandboxId":"cancel"}`, "execId is required"},
		{`{"sandboxId":"cancel","execId":"xyz"}`, "execId must be 32 hex digits"},
	} {
		code, body := f.do(http.MethodPost, "/cancel", tt.body, "Bearer "+testToken)
		if code != http.StatusBadRequest || errorOf(t, body) != tt.want {
			t.Errorf("cancel %s: %d %s; want 400 %q", tt.body, code, body, tt.want)
		}
	}
}

func TestExec_Timeout(t *testing.T) {
	f := hostFixture(t)
	res := f.exec(protocol.ExecRequest{SandboxID: "timeout", Command: "sleep 300 & echo $!; wait", TimeoutSeconds: 1})
	if res.Code != -1 || res.Error != "Command timed out after 1 second" {
		t.Errorf("base exec past its timeout: %+v", res)
	}
	waitGone(t, pidOf(t, res.Stdout))

	s := f.openStream(protocol.ExecRequest{SandboxID: "timeout", Command: "echo x; sleep 300", TimeoutSeconds: 0.5})
	_, _, exit := s.rest()
	if diff := cmp.Diff(protocol.Exit{Code: -1, TimedOut: true, Error: "Command timed out after 0.5 seconds"}, exit); diff != "" {
		t.Errorf("streamed exec past its timeout (-want +got):\n%s", diff)
	}
}

func TestExec_Truncated(t *testing.T) {
	f := hostFixture(t)
	res := f.exec(protocol.ExecRequest{SandboxID: "big", Command: "yes | head -c 11534336; echo small >&2"})
	if len(res.Stdout) != bridge.OutputLimit || res.Stderr != "small\n" || res.Code != 0 {
		t.Errorf("11 MiB of stdout: %d bytes kept, stderr %q, code %d; want %d, small", len(res.Stdout), res.Stderr, res.Code, bridge.OutputLimit)
	}
	if want := "[output truncated: stdout 11.0 MiB, only the first 10.0 MiB kept]"; res.Error != want {
		t.Errorf("error %q, want %q", res.Error, want)
	}
}

func TestExec_Invalid(t *testing.T) {
	f := hostFixture(t)
	for _, tt := range []struct{ name, body, want string }{
		{"empty", ``, "Request body is empty; send a JSON object"},
		{"not_json", `not json`, "Malformed JSON body: invalid character 'o' in literal null (expecting 'u')"},
		{"two_values", `{"sandboxId":"x","command":"true"} {}`, "Malformed JSON body: more than one JSON value"},
		{"no_sandbox", `{"command":"true"}`, "sandboxId is required"},
		{"sandbox_type", `{"sandboxId":5,"command":"true"}`, "sandboxId must be a JSON string, not number"},
		{"sandbox_slash", `{"sandboxId":"a/b","command":"true"}`, "sandboxId: Conversation id must not contain path separators or control characters"},
		{"sandbox_marker", `{"sandboxId":"..","command":"true"}`, "sandboxId: Conversation id must be non-empty and not a path marker"},
		{"no_command", `{"sandboxId":"x"}`, "command is required (or argv, or argvBase64)"},
		{"command_and_argv", `{"sandboxId":"x","command":"true","argv":["true","x"]}`, "Give one of command, argv and argvBase64"},
		{"argv_type", `{"sandboxId":"x","argv":"true"}`, "argv must be a JSON array, not string"},
		{"argv_base64", `{"sandboxId":"x","argvBase64":["dHJ1ZQ==","!!"]}`, "argvBase64[1] is not standard base64"},
		{"stdin_base64", `{"sandboxId":"x","command":"cat","stdin":"not base64!"}`, "stdin is not standard base64"},
		{"exec_id", `{"sandboxId":"x","command":"true","execId":"1234"}`, "execId must be 32 hex digits"},
		{"exec_id_hex", `{"sandboxId":"x","command":"true","execId":"0123456789abcdef0123456789abcdeg"}`, "execId must be 32 hex digits"},
		{"env_name", `{"sandboxId":"x","command":"true","env":{"1X":"v"}}`, `env: invalid variable name "1X"`},
		{"env_nul", `{"sandboxId":"x","command":"true","env":{"X":"a\u0000b"}}`, "env: the value of X contains a NUL byte"},
		{"timeout", `{"sandboxId":"x","command":"true","timeoutSeconds":-1}`, "timeoutSeconds must be positive"},
		{"timeout_huge", `{"sandboxId":"x","command":"true","timeoutSeconds":1e300}`, "timeoutSeconds is too large"},
		{"stream_type", `{"sandboxId":"x","command":"true","stream":"yes"}`, "stream must be a JSON boolean, not string"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, body := f.do(http.MethodPost, "/exec", tt.body, "Bearer "+testToken)
			if code != http.StatusBadRequest || errorOf(t, body) != tt.want {
				t.Errorf("POST /exec %s: %d %s; want 400 %q", tt.body, code, body, tt.want)
			}
		})
	}
	big := `{"sandboxId":"x","command":"true","stdin":"` + strings.Repeat("A", bridge.MaxBody) + `"}`
	if code, body := f.do(http.MethodPost, "/exec", big, "Bearer "+testToken); code != http.StatusBadRequest || errorOf(t, body) != "Request body is larger than 33554432 bytes" {
		t.Errorf("a body over the limit: %d %s", code, body)
	}
}

func TestRoutes(t *testing.T) {
	f := hostFixture(t)
	for _, tt := range []struct {
		method, path string
		code         int
		want         string
	}{
		{http.MethodGet, "/exec", http.StatusMethodNotAllowed, "Use POST /exec"},
		{http.MethodPost, "/health", http.StatusMethodNotAllowed, "Use GET /health"},
		{http.MethodGet, "/cancel", http.StatusMethodNotAllowed, "Use POST /cancel"},
		{http.MethodGet, "/v1/exec", http.StatusNotFound, "No such endpoint: GET /v1/exec"},
		{http.MethodPost, "/", http.StatusNotFound, "No such endpoint: POST /"},
	} {
		code, body := f.do(tt.method, tt.path, "{}", "Bearer "+testToken)
		if code != tt.code || errorOf(t, body) != tt.want {
			t.Errorf("%s %s: %d %s; want %d %q", tt.method, tt.path, code, body, tt.code, tt.want)
		}
	}
}

// TestExec_Refusal: the service's refusals keep their text; host mode
// cannot give a conversation an isolated office.
func TestExec_Refusal(t *testing.T) {
	f := newFixture(t, sandbox.Mode{Kind: sandbox.KindHost}, nil)
	code, body := f.post("/exec", protocol.ExecRequest{SandboxID: "iso", Command: "touch ran"})
	want := "Sandbox 'host' cannot provide an isolated conversation office; use image:*, or explicitly choose trusted workspace policy"
	if code != http.StatusBadRequest || errorOf(t, body) != want {
		t.Errorf("exec needing an isolated office in host mode: %d %s; want 400 %q", code, body, want)
	}
	code, body = f.post("/exec", protocol.ExecRequest{SandboxID: "iso", Command: "touch ran", Stream: true})
	if code != http.StatusBadRequest || errorOf(t, body) != want {
		t.Errorf("streamed: %d %s; want 400 %q", code, body, want)
	}
}

// TestExec_Concurrent: commands of several sandboxes run side by side.
func TestExec_Concurrent(t *testing.T) {
	f := hostFixture(t)
	// The first command of all creates the workspace root (which
	// workspace.EnsureRoot does not yet do safely from two requests at once).
	f.exec(protocol.ExecRequest{SandboxID: "c0", Command: "true"})
	var wg sync.WaitGroup
	for i, id := range []string{"c1", "c2", "c3", "c4"} {
		wg.Go(func() {
			s := f.openStream(protocol.ExecRequest{SandboxID: id, Command: "printf %s " + id, ExecID: newExecID()})
			out, _, exit := s.rest()
			if exit.Code != 0 || !bytes.Equal(out, []byte(id)) {
				t.Errorf("exec %d: %q %+v", i, out, exit)
			}
		})
	}
	wg.Wait()
}
