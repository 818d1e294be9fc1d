package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/hutchsandbox/hutch/internal/mcpserver"
)

// lockedBuffer is a bytes.Buffer safe for a writer and a reader at once.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startMCP runs `hutch mcp args...` in-process with its stdin and stdout
// on pipes, and returns the pipes' other ends and the command's result.
func startMCP(t *testing.T, e *env, args ...string) (io.ReadCloser, io.WriteCloser, *lockedBuffer, <-chan error) {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	stderr := &lockedBuffer{}
	g := &globals{stdin: inR, stdout: outW, stderr: stderr, getenv: e.getenv, logLevel: "warn"}
	cmd := newMCPCmd(g)
	cmd.SetArgs(args)
	cmd.SetOut(stderr)
	cmd.SetErr(stderr)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	done := make(chan error, 1)
	go func() {
		err := cmd.ExecuteContext(context.Background())
		_ = outW.Close()
		_ = inR.Close()
		done <- err
	}()
	return outR, inW, stderr, done
}

func TestMCP_Stdio(t *testing.T) {
	e := newEnv(t)
	e.ok("door", "set", "web/mcp-stdio", "shared")
	out, in, stderr, done := startMCP(t, e, "--conversation", "web/mcp-stdio")

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).
		Connect(ctx, &mcp.IOTransport{Reader: out, Writer: in}, nil)
	if err != nil {
		t.Fatalf("connect: %v; stderr: %s", err, stderr)
	}
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(tools.Tools); got != 5 {
		t.Errorf("%d tools, want 5", got)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": "echo hi; exit 3"}})
	if err != nil {
		t.Fatal(err)
	}
	if tc, ok := res.Content[0].(*mcp.TextContent); !res.IsError || !ok || tc.Text != "hi\n\nCommand exited with code 3" {
		t.Errorf("bash: IsError=%v %+v", res.IsError, res.Content[0])
	}
	// Closing stdin ends the server, and the command, cleanly.
	if err := cs.Close(); err != nil {
		t.Error(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("hutch mcp ended with %v; stderr: %s", err, stderr)
		}
	case <-ctx.Done():
		t.Fatal("hutch mcp did not end when stdin closed")
	}
	if s := stderr.String(); s != "" {
		t.Errorf("stderr: %s", s)
	}
}

// TestMCP_Refusals: a refusal before the handshake still completes it,
// lists the tools, and answers every tool call with the reason as a tool
// error, so that an MCP client shows why (not "Connection closed"); the
// reason is on stderr too, and the process ends with exit 1 when the
// client closes stdin.
func TestMCP_Refusals(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  func(*testing.T, *env)
		want string
	}{
		{"no_conversation", []string{}, nil, "--conversation <platform>/<conversation-id> is required"},
		{"bad_conversation", []string{"--conversation", "slack"}, nil, "Conversation must be written <platform>/<conversation-id>, e.g. slack/C0123ABC"},
		{"bad_mode", []string{"--conversation", "web/x", "--sandbox", "docker:x"}, nil, "docker"},
		// Host mode cannot enforce the isolated office a web conversation gets by default.
		{"host_isolated", []string{"--conversation", "web/x"}, nil, "Sandbox 'host' cannot provide an isolated conversation office"},
		// A client that starts hutch with a minimal environment: no
		// HOME, no HUTCH_STATE_DIR, so no state dir.
		{"no_home", []string{"--conversation", "web/x"}, func(t *testing.T, e *env) {
			e.state = ""
			t.Setenv("HOME", "")
		}, "Cannot find a home directory for the state dir; pass --state-dir or set HUTCH_STATE_DIR"},
		// The mode came from $HUTCH_SANDBOX: its refusal names it.
		{"mode_from_environment", []string{"--conversation", "web/x"}, func(_ *testing.T, e *env) {
			e.extra = map[string]string{"HUTCH_SANDBOX": "cloudflare:x"}
		}, "cloudflare"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			if tt.env != nil {
				tt.env(t, e)
			}
			out, in, stderr, done := startMCP(t, e, tt.args...)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).
				Connect(ctx, &mcp.IOTransport{Reader: out, Writer: in}, nil)
			if err != nil {
				t.Fatalf("connect: %v; stderr: %s", err, stderr)
			}
			if ins := cs.InitializeResult().Instructions; !strings.HasPrefix(ins, mcpserver.RefusalPrefix) || !strings.Contains(ins, tt.want) {
				t.Errorf("instructions %q, want the refusal", ins)
			}
			tools, err := cs.ListTools(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := len(tools.Tools); got != 5 {
				t.Errorf("%d tools, want 5", got)
			}
			// Every call, whatever its tool or arguments, gets the reason.
			for _, p := range []*mcp.CallToolParams{
				{Name: "bash", Arguments: map[string]any{"command": "echo hi"}},
				{Name: "read", Arguments: map[string]any{"no": "such argument"}},
				{Name: "nosuchtool"},
			} {
				res, err := cs.CallTool(ctx, p)
				if err != nil {
					t.Fatalf("%s: %v", p.Name, err)
				}
				text := ""
				if len(res.Content) == 1 {
					if tc, ok := res.Content[0].(*mcp.TextContent); ok {
						text = tc.Text
					}
				}
				if !res.IsError || !strings.HasPrefix(text, mcpserver.RefusalPrefix) || !strings.Contains(text, tt.want) {
					t.Errorf("%s: IsError=%v %q, want a tool error %q...%q", p.Name, res.IsError, text, mcpserver.RefusalPrefix, tt.want)
				}
			}
			_ = cs.Close()
			select {
			case err := <-done:
				var ee *exitError
				if !errors.As(err, &ee) || ee.code != 1 {
					t.Errorf("hutch mcp ended with %v, want exit 1", err)
				}
			case <-ctx.Done():
				t.Fatal("hutch mcp did not end when stdin closed")
			}
			if s := stderr.String(); !strings.HasPrefix(s, "hutch: ") || !strings.Contains(s, tt.want) {
				t.Errorf("stderr %q, want the refusal", s)
			}
		})
	}
}

// rawMCP speaks JSON-RPC lines to a `hutch mcp` started by startMCP.
type rawMCP struct {
	t     *testing.T
	in    io.Writer
	lines chan string
}

func newRawMCP(t *testing.T, in io.Writer, out io.Reader) *rawMCP {
	r := &rawMCP{t: t, in: in, lines: make(chan string)}
	go func() {
		defer close(r.lines)
		br := bufio.NewReaderSize(out, 1<<20)
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				return
			}
			r.lines <- strings.TrimSuffix(line, "\n")
		}
	}()
	return r
}

func (r *rawMCP) send(line string) {
	r.t.Helper()
	if _, err := io.WriteString(r.in, line+"\n"); err != nil {
		r.t.Fatalf("write: %v", err)
	}
}

// receive returns the next line hutch wrote; a silence of 30 s fails.
func (r *rawMCP) receive() string {
	r.t.Helper()
	select {
	case line, ok := <-r.lines:
		if !ok {
			r.t.Fatal("hutch mcp closed stdout")
		}
		return line
	case <-time.After(30 * time.Second):
		r.t.Fatal("no answer in 30 s")
	}
	return ""
}

// TestMCP_MalformedFrames: a line that is not a JSON-RPC message is
// answered with JSON-RPC's parse error or invalid request, with the
// request's id when it has a valid one, and the server goes on: the next
// request is answered. A malformed response is not answered (answering
// it could start an endless exchange of errors).
func TestMCP_MalformedFrames(t *testing.T) {
	e := newEnv(t)
	e.ok("door", "set", "web/mcp-frames", "shared")
	out, in, stderr, done := startMCP(t, e, "--conversation", "web/mcp-frames")
	r := newRawMCP(t, in, out)
	r.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"test","version":"1"}}}`)
	if got := r.receive(); !strings.Contains(got, `"id":0,"result":{`) {
		t.Fatalf("initialize: %s; stderr: %s", got, stderr)
	}
	r.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)

	parseError := func(msg string) string {
		return `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error: ` + msg + `"}}`
	}
	invalid := func(id, msg string) string {
		return `{"jsonrpc":"2.0","id":` + id + `,"error":{"code":-32600,"message":"Invalid Request: ` + msg + `"}}`
	}
	tests := []struct {
		name, frame, want string
	}{
		{"truncated_object", `{"jsonrpc":"2.0","id":1,"method":"tools/list"`, parseError("unexpected end of JSON input")},
		{"not_json", `hello`, parseError("invalid character 'h' looking for beginning of value")},
		{"batch", `[{"jsonrpc":"2.0","id":2,"method":"tools/list"}]`, invalid("null", "batches are not supported; send one message per line")},
		{"object_id", `{"jsonrpc":"2.0","id":{"a":1},"method":"tools/list"}`, invalid("null", `\"id\" must be a string or a number`)},
		{"null_id", `{"jsonrpc":"2.0","id":null,"method":"tools/list"}`, invalid("null", `\"id\" must be a string or a number`)},
		{"missing_jsonrpc", `{"id":3,"method":"tools/list"}`, invalid("3", `\"jsonrpc\" must be \"2.0\"`)},
		{"wrong_jsonrpc", `{"jsonrpc":"1.0","id":"x","method":"tools/list"}`, invalid(`"x"`, `\"jsonrpc\" must be \"2.0\"`)},
		{"method_not_string", `{"jsonrpc":"2.0","id":4,"method":7}`, invalid("4", `\"method\" must be a string`)},
		{"no_method_no_id", `{"jsonrpc":"2.0","params":{}}`, invalid("null", `a request needs a \"method\", a response an \"id\"`)},
		{"not_an_object", `42`, invalid("null", "a message is a JSON object")},
		{"nul_byte", "{\"jsonrpc\":\"2.0\",\x00\"id\":5,\"method\":\"tools/list\"}", parseError(`invalid character '\\x00' looking for beginning of object key string`)},
		{"over_long_line", `{"jsonrpc":"2.0","id":6,"method":"tools/list","params":{"x":"` + strings.Repeat("a", 16<<20) + `"}}`,
			parseError("the line is longer than 16777216 bytes, the most hutch reads as one message")},
		{"deep_nesting", `{"jsonrpc":"2.0","id":7,"method":"tools/list","params":` + strings.Repeat(`{"a":`, 2000) + "1" + strings.Repeat("}", 2000) + "}",
			parseError("the message nests deeper than 128 levels")},
		{"deeper_than_go_parses", strings.Repeat("[", 20000) + strings.Repeat("]", 20000), parseError("the message nests deeper than 128 levels")},
		// A malformed response gets no answer: the next line read is the
		// answer to the valid request.
		{"malformed_response", `{"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":"x"}}`, ""},
	}
	for i, tt := range tests {
		ok := t.Run(tt.name, func(t *testing.T) {
			r.t = t
			r.send(tt.frame)
			if tt.want != "" {
				if got := r.receive(); got != tt.want {
					t.Errorf("answer\n got %s\nwant %s", got, tt.want)
				}
			}
			id := 100 + i
			r.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/list"}`, id))
			got := r.receive()
			var resp struct {
				ID     int `json:"id"`
				Result struct {
					Tools []struct{ Name string } `json:"tools"`
				} `json:"result"`
			}
			if err := json.Unmarshal([]byte(got), &resp); err != nil || resp.ID != id || len(resp.Result.Tools) != 5 {
				t.Fatalf("the next request was not answered: %.300s (%v); stderr: %.2000s", got, err, stderr)
			}
		})
		if !ok {
			break // the server's state is unknown: judging the next frames on it says nothing
		}
	}
	r.t = t
	_ = in.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("hutch mcp ended with %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("hutch mcp did not end when stdin closed")
	}
}

// TestMCP_ThroughDaemon: with a daemon serving the state dir, hutch mcp
// serves the daemon's tools on stdio and its bash runs in the daemon
// (the command's parent is the daemon), as hutch exec's commands do.
func TestMCP_ThroughDaemon(t *testing.T) {
	e := newEnv(t)
	e.ok("door", "set", "web/mcp-daemon", "shared")
	p := startServe(t, e)
	out, in, stderr, done := startMCP(t, e, "--conversation", "web/mcp-daemon")

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).
		Connect(ctx, &mcp.IOTransport{Reader: out, Writer: in}, nil)
	if err != nil {
		t.Fatalf("connect: %v; stderr: %s", err, stderr)
	}
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
	}
	if got := strings.Join(names, " "); got != "bash edit read sandbox write" {
		t.Errorf("tools %s, want bash edit read sandbox write", got)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": `echo "$PPID"`}})
	if err != nil {
		t.Fatal(err)
	}
	text := ""
	if tc, ok := res.Content[0].(*mcp.TextContent); ok {
		text = tc.Text
	}
	if want := strconv.Itoa(p.cmd.Process.Pid); res.IsError || strings.TrimSpace(text) != want {
		t.Errorf("bash: IsError=%v %q, want the daemon's pid %s (the command should run in the daemon)", res.IsError, text, want)
	}
	// A tool error of the daemon comes back as a tool error.
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": "echo hi; exit 3"}})
	if err != nil {
		t.Fatal(err)
	}
	if tc, ok := res.Content[0].(*mcp.TextContent); !res.IsError || !ok || tc.Text != "hi\n\nCommand exited with code 3" {
		t.Errorf("bash: IsError=%v %+v", res.IsError, res.Content[0])
	}
	if err := cs.Close(); err != nil {
		t.Error(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("hutch mcp ended with %v; stderr: %s", err, stderr)
		}
	case <-ctx.Done():
		t.Fatal("hutch mcp did not end when stdin closed")
	}
}
