package api_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/internal/api"
	"github.com/hutchsandbox/hutch/internal/metrics"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/service"
	"github.com/hutchsandbox/hutch/internal/vault"
)

// hostDaemon is a daemon in host mode with its service and metrics at hand.
type hostDaemon struct {
	svc     *service.Service
	metrics *metrics.Set
	ts      *httptest.Server
}

func newHostDaemon(t *testing.T, configure func(*api.Server)) hostDaemon {
	t.Helper()
	layout, err := service.ResolveLayout(service.LayoutOptions{StateDir: filepath.Join(t.TempDir(), "state"), Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	svc := service.New(layout, nil)
	m := metrics.New("")
	svc.SetMetrics(m)
	srv := &api.Server{Service: svc, Mode: sandbox.Mode{Kind: sandbox.KindHost}, Version: "test", Metrics: m.Handler()}
	if configure != nil {
		configure(srv)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	return hostDaemon{svc: svc, metrics: m, ts: ts}
}

// execFrames splits an exec answer into its frames.
func execFrames(t *testing.T, body string) []api.Frame {
	t.Helper()
	var frames []api.Frame
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		var f api.Frame
		if err := json.Unmarshal(sc.Bytes(), &f); err != nil {
			t.Fatalf("frame %q: %v", sc.Text(), err)
		}
		frames = append(frames, f)
	}
	return frames
}

// TestExec_UserVault: /v1/exec takes the platform user, as `hutch exec
// --user` does, and host mode checks that user's vault: a vault with a
// credential file is refused (host cannot project files), another user's
// command runs, and the vault's env is not injected on the host (seed
// 000: host mode never gets vault env, through the CLI or the daemon).
// A user id that could alias another's vault, or that would garble logs,
// is refused as invalid.
func TestExec_UserVault(t *testing.T) {
	d := newHostDaemon(t, nil)
	if code, body := post(t, d.ts, "/v1/door", `{`+conv+`,"policy":"shared"}`); code != 200 {
		t.Fatalf("door: %d %s", code, body)
	}
	if code, body := post(t, d.ts, "/v1/vault/set", `{"user":"U042","vars":{"USER_TOKEN":"from-the-user-vault"}}`); code != 200 {
		t.Fatalf("vault set: %d %s", code, body)
	}
	withUser := func(user string) string {
		return `{"conversation":{"platform":"web","conversationId":"api-1","user":` + user + `},"command":"echo \"token=$USER_TOKEN\""}`
	}
	code, body := post(t, d.ts, "/v1/exec", withUser(`"U042"`))
	if code != 200 || !strings.Contains(body, `"exitCode":0`) {
		t.Fatalf("exec as U042: %d %s", code, body)
	}
	var out strings.Builder
	for _, f := range execFrames(t, body) {
		out.Write(f.Data)
	}
	if out.String() != "token=\n" {
		t.Errorf("host mode injected vault env: stdout %q, want %q", out.String(), "token=\n")
	}

	// A credential file in U042's vault: host mode refuses U042's commands.
	src := filepath.Join(t.TempDir(), "cred")
	if err := os.WriteFile(src, []byte("secret-file"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := d.svc.Vaults().PutFile(vault.UserKey("U042"), "gh.json", src); err != nil {
		t.Fatal(err)
	}
	code, body = post(t, d.ts, "/v1/exec", withUser(`"U042"`))
	if code != 412 || !strings.Contains(body, `Sandbox type \"host\" does not support vault file mounts`) {
		t.Errorf("exec as U042 with a vault file: %d %s; want 412 naming the file-mount refusal", code, body)
	}
	if code, body = post(t, d.ts, "/v1/exec", withUser(`"U777"`)); code != 200 || !strings.Contains(body, `"exitCode":0`) {
		t.Errorf("exec as U777: %d %s; want it to run (U042's vault is not U777's)", code, body)
	}

	for _, tc := range []struct{ name, user, want string }{
		{"blank", `"  "`, "User id must not be blank"},
		{"control", `"U1\n"`, "User id must not contain control characters"},
		{"replacement", `"U1\ufffd"`, "User id must not contain U+FFFD"},
		{"bidi", `"U1\u202e"`, "User id must not contain bidirectional control characters"},
		{"too_long", `"` + strings.Repeat("u", 257) + `"`, "User id must be at most 256 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := post(t, d.ts, "/v1/exec", withUser(tc.user))
			if code != 400 || !strings.Contains(body, tc.want) || !strings.Contains(body, `"code":"invalid"`) {
				t.Errorf("user %s: %d %s; want 400 invalid containing %q", tc.user, code, body, tc.want)
			}
		})
	}
}

// scrape returns the daemon's /metrics text.
func scrape(t *testing.T, ts *httptest.Server) string {
	t.Helper()
	resp, err := ts.Client().Get(ts.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// TestExec_RefusalCounted: a command the policy refuses over /v1/exec is
// counted as refused in /metrics, as one refused through the CLI or MCP,
// and as a refusal of the API's for its reason, admission; a boost in a
// mode without managed runtimes is not_supported; bad input and a
// missing route are no refusals.
func TestExec_RefusalCounted(t *testing.T) {
	d := newHostDaemon(t, nil)
	// An isolated conversation (the default) is refused in host mode.
	code, body := post(t, d.ts, "/v1/exec", `{"conversation":{"platform":"web","conversationId":"refused"},"command":"true"}`)
	if code != 412 || !strings.Contains(body, "Sandbox 'host' cannot provide an isolated conversation office") {
		t.Fatalf("exec: %d %s; want the isolation refusal", code, body)
	}
	if code, body := post(t, d.ts, "/v1/sandbox/boost", `{`+conv+`}`); code != 501 {
		t.Errorf("boost in host mode: %d %s; want 501", code, body)
	}
	if code, _ := post(t, d.ts, "/v1/exec", `{"conversation":`); code != 400 {
		t.Errorf("malformed exec: %d; want 400", code)
	}
	if code, _ := post(t, d.ts, "/v1/nothing", `{}`); code != 404 {
		t.Errorf("no such route: %d; want 404", code)
	}
	got := scrape(t, d.ts)
	for _, want := range []string{
		`hutch_commands_total{mode="host",outcome="refused"} 1`,
		`hutch_refusals_total{reason="admission",surface="api"} 1`,
		`hutch_refusals_total{reason="not_supported",surface="api"} 1`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("metrics lack %s:\n%s", want, grepLines(got, "hutch_"))
		}
	}
	counted := 0
	for _, line := range strings.Split(got, "\n") {
		if strings.HasPrefix(line, "hutch_refusals_total{") && !strings.HasSuffix(line, "} 0") {
			counted++
		}
	}
	if n := counted; n != 2 {
		t.Errorf("%d refusal series counted, want 2:\n%s", n, grepLines(got, "hutch_refusals_total"))
	}
}

func grepLines(text, substr string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestExec_InvalidInput: a command that cannot be run as given is bad
// input (400 invalid, before anything runs), never a 200 with an error
// frame and never "unavailable" (which tells a client to retry).
func TestExec_InvalidInput(t *testing.T) {
	d := newHostDaemon(t, func(s *api.Server) { s.MaxBody = 16 << 20 })
	if code, body := post(t, d.ts, "/v1/door", `{`+conv+`,"policy":"shared"}`); code != 200 {
		t.Fatalf("door: %d %s", code, body)
	}
	big := strings.Repeat("x", 7<<20)
	tests := []struct{ name, fields, want string }{
		{"empty_command", `"command":""`, "No command given: set command (a shell string) or argv"},
		{"blank_command", `"command":" \t\n "`, "command is blank: give the shell string to run"},
		{"empty_program", `"argv":[""]`, "argv[0] is empty: name the program to run"},
		{"blank_program", `"argv":[" ","x"]`, "argv[0] is empty: name the program to run"},
		{"huge_command", `"command":"` + big + `"`, "The command is 7340032 bytes; one argument can be at most 131071 bytes"},
		{"huge_argument", `"argv":["echo","` + big + `"]`, "argv[1] is 7340032 bytes; one argument can be at most 131071 bytes"},
		{"nul_in_command", `"command":"echo a\u0000b"`, "command contains a NUL byte"},
		{"negative_max_output", `"command":"true","maxOutput":-1`, "maxOutput must not be negative"},
		{"negative_timeout", `"command":"true","timeoutSeconds":-1`, "timeoutSeconds must not be negative"},
		{"huge_timeout", `"command":"true","timeoutSeconds":1e300`, "timeoutSeconds must be at most"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, body := post(t, d.ts, "/v1/exec", `{`+conv+`,`+tc.fields+`}`)
			if len(body) > 400 {
				body = body[:400] + "..."
			}
			if code != 400 || !strings.Contains(body, tc.want) || !strings.Contains(body, `"code":"invalid"`) {
				t.Errorf("%d %s; want 400 invalid containing %q", code, body, tc.want)
			}
		})
	}
	if got := scrape(t, d.ts); strings.Contains(got, `hutch_commands_total{`) {
		t.Errorf("bad input was counted as a command:\n%s", grepLines(got, "hutch_commands_total"))
	}
}

// endpoints are the routes docs/api.md lists, as method and a path that
// reaches them.
func endpoints(t *testing.T) [][2]string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "docs", "api.md"))
	if err != nil {
		t.Fatal(err)
	}
	var out [][2]string
	row := regexp.MustCompile("(?m)^\\| `(GET|POST) (/[^`?]*)")
	for _, m := range row.FindAllStringSubmatch(string(data), -1) {
		path := strings.ReplaceAll(m[2], "{bash,read,write,edit}", "bash")
		out = append(out, [2]string{m[1], path})
	}
	if len(out) < 20 {
		t.Fatalf("found %d endpoints in docs/api.md's table; the row pattern no longer matches", len(out))
	}
	return out
}

// TestRoutes_WrongMethod: every documented route asked with a method it
// does not serve answers 405 with an Allow header naming the one it does,
// in the API's error shape; a path no route has stays 404.
func TestRoutes_WrongMethod(t *testing.T) {
	d := newHostDaemon(t, func(s *api.Server) {
		s.AdminLink = func(string, time.Duration) (string, time.Time, error) { return "", time.Time{}, nil }
	})
	for _, ep := range endpoints(t) {
		method, path := ep[0], ep[1]
		allow := method
		if method == "GET" {
			allow = "GET, HEAD"
		}
		for _, wrong := range []string{"GET", "POST", "PUT", "DELETE"} {
			if wrong == method {
				continue
			}
			t.Run(wrong+strings.ReplaceAll(path, "/", "_"), func(t *testing.T) {
				req, err := http.NewRequest(wrong, d.ts.URL+path, strings.NewReader(`{}`))
				if err != nil {
					t.Fatal(err)
				}
				resp, err := d.ts.Client().Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer func() { _ = resp.Body.Close() }()
				var eb api.ErrorBody
				derr := json.NewDecoder(resp.Body).Decode(&eb)
				want := fmt.Sprintf("Method %s is not allowed on %s; use %s", wrong, path, method)
				if resp.StatusCode != 405 || resp.Header.Get("Allow") != allow || derr != nil || eb.Code != "method_not_allowed" || eb.Error != want {
					t.Errorf("%s %s: %d Allow %q %+v (%v); want 405 Allow %q {%q, method_not_allowed}", wrong, path, resp.StatusCode, resp.Header.Get("Allow"), eb, derr, allow, want)
				}
			})
		}
	}
	code, body := post(t, d.ts, "/v1/nothing", `{}`)
	if code != 404 || !strings.Contains(body, `"code":"not_found"`) {
		t.Errorf("unknown path: %d %s; want 404 not_found", code, body)
	}
}

// TestServer_StalledBodyIsCutOff: a client that sends a request's headers
// and then stalls its body does not hold a handler (and its connection)
// forever: once no byte has come for BodyTimeout, the request is answered
// 400 and the connection closed.
func TestServer_StalledBodyIsCutOff(t *testing.T) {
	d := newHostDaemon(t, func(s *api.Server) { s.BodyTimeout = 300 * time.Millisecond })
	conn, err := net.Dial("tcp", d.ts.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	start := time.Now()
	// Half the body now, the rest never.
	if _, err := io.WriteString(conn, "POST /v1/exec HTTP/1.1\r\nHost: hutch\r\nContent-Type: application/json\r\nContent-Length: 200\r\n\r\n{\"conversation\":"); err != nil {
		t.Fatal(err)
	}
	if err := conn.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer %v after the body stalled: %v", time.Since(start), err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != 400 || !strings.Contains(string(body), "The request body stalled: no byte came for 300ms") || !resp.Close {
		t.Errorf("%d close=%v %s; want 400 naming the stall, connection closed", resp.StatusCode, resp.Close, body)
	}
}

// TestServer_SlowBodyIsNotCutOff: a body that keeps coming, however
// slowly, is read whole: the timeout is for a stall, not for a slow link.
func TestServer_SlowBodyIsNotCutOff(t *testing.T) {
	d := newHostDaemon(t, func(s *api.Server) { s.BodyTimeout = 300 * time.Millisecond })
	pr, pw := io.Pipe()
	go func() {
		body := `{"conversation":{"platform":"web","conversationId":"slow"}}`
		for i := 0; i < len(body); i += 10 {
			time.Sleep(100 * time.Millisecond)
			_, _ = io.WriteString(pw, body[i:min(i+10, len(body))])
		}
		_ = pw.Close()
	}()
	resp, err := d.ts.Client().Post(d.ts.URL+"/v1/policy", "application/json", pr)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !strings.Contains(string(b), `"policy":"isolated / conversation / public"`) {
		t.Errorf("slow body: %d %s; want the policy", resp.StatusCode, b)
	}
}
