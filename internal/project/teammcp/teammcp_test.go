package teammcp_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/hutchsandbox/hutch/internal/project"
	"github.com/hutchsandbox/hutch/internal/project/box"
	"github.com/hutchsandbox/hutch/internal/project/teammcp"
)

// newServer is a server of a project at /p whose container is never
// reached: enough for what is decided before a call goes to the agent.
func newServer() *mcp.Server {
	b := box.New(box.Options{}, "/p", project.Spec{Name: "hutch-sbx-p"})
	return teammcp.New(teammcp.Options{Box: b, Target: &box.Target{Name: "hutch-sbx-p", Workdir: "/p"}})
}

const token = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// post sends one JSON-RPC message as a client without a session would.
func post(t *testing.T, url, auth, body string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	answer, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, answer
}

// TestHandler_Token: a request without the bearer token, or with another,
// is refused with 401 and a JSON body; with it, one POST of a tools/call
// is a whole call (no session, no initialize) answered in JSON.
func TestHandler_Token(t *testing.T) {
	srv := newServer()
	ts := httptest.NewServer(teammcp.Handler(func(*http.Request) *mcp.Server { return srv }, token))
	t.Cleanup(ts.Close)
	call := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"bash","arguments":{"member":"../x","command":"pwd"}}}`

	for _, tt := range []struct{ name, auth string }{
		{"none", ""},
		{"wrong", "Bearer " + strings.Repeat("f", 64)},
		{"prefix", "Bearer " + token[:32]},
		{"no_scheme", token},
		{"basic", "Basic " + token},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := post(t, ts.URL+"/mcp", tt.auth, call)
			var eb struct{ Error, Code string }
			if err := json.Unmarshal(body, &eb); err != nil {
				t.Fatalf("%v: %s", err, body)
			}
			if resp.StatusCode != http.StatusUnauthorized || eb.Code != "unauthorized" || !strings.HasPrefix(eb.Error, "Missing or wrong bearer token") {
				t.Errorf("got %d %s, want 401 unauthorized", resp.StatusCode, body)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q", ct)
			}
			if strings.Contains(string(body), token) {
				t.Error("the refusal shows the token")
			}
		})
	}

	resp, body := post(t, ts.URL+"/mcp", "Bearer "+token, call)
	var r struct {
		ID     int `json:"id"`
		Result struct {
			Content []struct{ Text string } `json:"content"`
			IsError bool                    `json:"isError"`
		} `json:"result"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	if resp.StatusCode != http.StatusOK || r.ID != 7 || !r.Result.IsError || len(r.Result.Content) != 1 ||
		r.Result.Content[0].Text != `Member name "../x" must be 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit` {
		t.Errorf("tools/call with the token: %d %s", resp.StatusCode, body)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("answered as %q, want JSON", ct)
	}

	// An empty token admits nobody.
	open := httptest.NewServer(teammcp.Handler(func(*http.Request) *mcp.Server { return srv }, ""))
	t.Cleanup(open.Close)
	for _, auth := range []string{"", "Bearer ", "Bearer"} {
		if resp, body := post(t, open.URL+"/mcp", auth, call); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("empty token, Authorization %q: %d %s", auth, resp.StatusCode, body)
		}
	}
}

// TestNew_Tools: the tools, each taking a member, described as running
// in the project's sandbox; bad member names are refused before anything
// reaches the container.
func TestNew_Tools(t *testing.T) {
	ctx := context.Background()
	ct, st := mcp.NewInMemoryTransports()
	if _, err := newServer().Connect(ctx, st, nil); err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cs.Close() }()
	res, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
		if !strings.Contains(tool.Description, "/p") || !strings.Contains(tool.Description, "sandbox container") {
			t.Errorf("%s: the description does not say it acts in the project's sandbox container:\n%s", tool.Name, tool.Description)
		}
		schema, err := json.Marshal(tool.InputSchema)
		if err != nil {
			t.Fatal(err)
		}
		var s struct {
			Properties map[string]json.RawMessage `json:"properties"`
			Required   []string                   `json:"required"`
		}
		if err := json.Unmarshal(schema, &s); err != nil {
			t.Fatal(err)
		}
		if _, ok := s.Properties["member"]; !ok && tool.Name != "members" {
			t.Errorf("%s takes no member: %s", tool.Name, schema)
		}
		for _, r := range s.Required {
			if r == "member" {
				t.Errorf("%s requires a member", tool.Name)
			}
		}
	}
	sort.Strings(names)
	if got, want := strings.Join(names, " "), "bash edit members read write"; got != want {
		t.Errorf("tools %q, want %q", got, want)
	}

	args := map[string]map[string]any{
		"bash":  {"command": "pwd"},
		"read":  {"path": "a"},
		"write": {"path": "a", "content": "x"},
		"edit":  {"path": "a", "oldText": "a", "newText": "b"},
	}
	for tool, a := range args {
		for _, bad := range []string{"../x", "a/b", ".hidden", "-rf", strings.Repeat("x", 65)} {
			a["member"] = bad
			r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: a})
			if err != nil {
				t.Fatal(err)
			}
			if text := r.Content[0].(*mcp.TextContent).Text; !r.IsError || !strings.HasPrefix(text, "Member name ") {
				t.Errorf("%s as %q: IsError=%v %q", tool, bad, r.IsError, text)
			}
		}
	}
}

// TestLoadOrMakeToken: made once (64 hex digits, 0600), then reused, by
// concurrent callers too; a file holding no token is replaced.
func TestLoadOrMakeToken(t *testing.T) {
	path := filepath.Join(t.TempDir(), "projects", "p", teammcp.TokenName)
	var wg sync.WaitGroup
	toks := make([]string, 8)
	errs := make([]error, 8)
	for i := range toks {
		wg.Go(func() { toks[i], errs[i] = teammcp.LoadOrMakeToken(path) })
	}
	wg.Wait()
	for i := range toks {
		if errs[i] != nil || toks[i] != toks[0] || len(toks[0]) != 64 {
			t.Fatalf("concurrent LoadOrMakeToken: %q %v, first %q", toks[i], errs[i], toks[0])
		}
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("token file: %v %v, want 0600", fi.Mode(), err)
	}
	if again, err := teammcp.LoadOrMakeToken(path); err != nil || again != toks[0] {
		t.Errorf("again: %q %v, want %q", again, err, toks[0])
	}
	if err := os.WriteFile(path, []byte("garbage\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	fresh, err := teammcp.LoadOrMakeToken(path)
	if err != nil || len(fresh) != 64 || fresh == toks[0] {
		t.Errorf("over garbage: %q %v", fresh, err)
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Errorf("left behind: %v", entries)
	}
}

func TestClientConfig(t *testing.T) {
	got := string(teammcp.ClientConfig("http://host.docker.internal:7400/mcp", token))
	want := `{
  "mcpServers": {
    "hutch": {
      "type": "http",
      "url": "http://host.docker.internal:7400/mcp",
      "headers": {
        "Authorization": "Bearer ` + token + `"
      }
    }
  }
}
`
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

// endless is a body that never ends, counting what was read of it.
type endless struct{ read atomic.Int64 }

func (e *endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = ' '
	}
	e.read.Add(int64(len(p)))
	return len(p), nil
}

// TestHandler_AttackHugeBody: the agents hold the token, and the handler
// reads a POST's body itself (to look for a progress token). A body that
// never ends, with a progress token or without, is refused with 413 once
// it passes the bound, and no more of it than that and what the sockets'
// buffers hold is read. (Without the bound the handler read on until the
// client gave up after 10 s, past this test's 64 MiB: checked.)
func TestHandler_AttackHugeBody(t *testing.T) {
	srv := newServer()
	ts := httptest.NewServer(teammcp.Handler(func(*http.Request) *mcp.Server { return srv }, token))
	t.Cleanup(ts.Close)
	for _, prefix := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"progressToken":1},"name":"bash","arguments":{"command":"`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"bash","arguments":{"command":"`,
	} {
		body := &endless{}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, ts.URL+"/mcp", io.MultiReader(strings.NewReader(prefix), body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		cancel()
		if err != nil {
			// The server may close the connection while the body is still
			// being sent; what it read is what counts.
			t.Logf("the request: %v", err)
		} else {
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusRequestEntityTooLarge {
				t.Errorf("an endless body: %s, want 413", resp.Status)
			}
		}
		if n := body.read.Load(); n > 16*teammcp.MaxBody {
			t.Errorf("%d bytes of the endless body were read; the bound is %d", n, teammcp.MaxBody)
		}
	}
}
