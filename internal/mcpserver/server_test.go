package mcpserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/hutchsandbox/hutch/internal/mcpserver"
	"github.com/hutchsandbox/hutch/internal/office"
	"github.com/hutchsandbox/hutch/internal/projection"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/service"
)

var update = flag.Bool("update", false, "rewrite golden files")

// hostEnv is a service over a temporary state dir with one conversation
// whose door policy is shared, so host mode admits it.
type hostEnv struct {
	svc    *service.Service
	layout service.Layout
	addr   office.Address
}

func newHostEnv(t *testing.T, ids ...string) *hostEnv {
	t.Helper()
	layout, err := service.ResolveLayout(service.LayoutOptions{
		StateDir: filepath.Join(t.TempDir(), "state"),
		Getenv:   func(string) string { return "" },
	})
	if err != nil {
		t.Fatal(err)
	}
	svc := service.New(layout, nil)
	t.Cleanup(func() { _ = svc.Close() })
	shared, err := projection.ParseDoorWord("shared")
	if err != nil {
		t.Fatal(err)
	}
	var first office.Address
	for i, id := range append([]string{"mcp-test"}, ids...) {
		addr, err := office.NewAddress("web", id)
		if err != nil {
			t.Fatal(err)
		}
		if err := svc.SetDoor(t.Context(), addr, shared); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = addr
		}
	}
	return &hostEnv{svc: svc, layout: layout, addr: first}
}

// officeDir is the host path of a conversation's office.
func (e *hostEnv) officeDir(addr office.Address) string {
	return office.Dir(e.layout.Workspace, addr.Key())
}

// connect joins a client to srv in memory.
func connect(t *testing.T, srv *mcp.Server) *mcp.ClientSession {
	t.Helper()
	ctx := context.Background()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.Close()
		_ = ss.Wait()
	})
	return cs
}

func call(t *testing.T, cs *mcp.ClientSession, tool string, args any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: protocol error: %v", tool, err)
	}
	return res
}

// textOf is the result's text content.
func textOf(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	if len(res.Content) == 0 {
		t.Fatal("result has no content")
	}
	tc, ok := res.Content[0].(*mcp.TextContent)
	if !ok {
		t.Fatalf("content[0] is %T, want text", res.Content[0])
	}
	return tc.Text
}

var toolNames = []string{"bash", "edit", "read", "sandbox", "write"}

func TestTools_List_Golden(t *testing.T) {
	e := newHostEnv(t)
	cs := connect(t, mcpserver.New(e.svc, sandbox.DefaultMode, e.addr, "", nil))
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
		if tool.InputSchema == nil || tool.OutputSchema == nil || tool.Description == "" {
			t.Errorf("tool %s lacks a description or a schema", tool.Name)
		}
	}
	if diff := cmp.Diff(toolNames, names); diff != "" {
		t.Errorf("tool names (-want +got):\n%s", diff)
	}
	golden(t, filepath.Join("testdata", "tools.golden.json"), indentJSON(t, res.Tools))
}

// step is one tool call whose result is pinned in testdata/calls.
type step struct {
	name    string
	tool    string
	args    map[string]any
	isError bool
	// contains must be in the text (besides the golden file).
	contains string
}

func TestTools_HostMode_Golden(t *testing.T) {
	e := newHostEnv(t)
	cs := connect(t, mcpserver.New(e.svc, sandbox.DefaultMode, e.addr, "", nil))
	dir := e.officeDir(e.addr)

	steps := []step{
		{name: "write_new", tool: "write", args: map[string]any{"path": "notes/a.txt", "content": "one\ntwo\nthree\n"}, contains: "Wrote 14 bytes to notes/a.txt"},
		{name: "read_text", tool: "read", args: map[string]any{"path": "notes/a.txt"}, contains: "one\ntwo\nthree"},
		{name: "edit_ok", tool: "edit", args: map[string]any{"path": "notes/a.txt", "oldText": "two", "newText": "TWO"}, contains: "+TWO"},
		{name: "edit_no_match", tool: "edit", args: map[string]any{"path": "notes/a.txt", "oldText": "four", "newText": "4"}, isError: true, contains: "Could not find the exact text"},
		{name: "edit_no_change", tool: "edit", args: map[string]any{"path": "notes/a.txt", "oldText": "one", "newText": "one"}, isError: true, contains: "No changes"},
		{name: "write_twice", tool: "write", args: map[string]any{"path": "twice.txt", "content": "x\nx\n"}},
		{name: "edit_several", tool: "edit", args: map[string]any{"path": "twice.txt", "oldText": "x", "newText": "y"}, isError: true, contains: "Found 2 occurrences"},
		{name: "bash_ok", tool: "bash", args: map[string]any{"command": "cat notes/a.txt"}, contains: "one\nTWO\nthree"},
		{name: "bash_stderr", tool: "bash", args: map[string]any{"command": "echo out; echo err >&2"}, contains: "out\nerr"},
		{name: "bash_no_output", tool: "bash", args: map[string]any{"command": "true"}, contains: "(no output)"},
		{name: "bash_exit_3", tool: "bash", args: map[string]any{"command": "echo hi; exit 3"}, isError: true, contains: "hi\n\nCommand exited with code 3"},
		{name: "bash_empty", tool: "bash", args: map[string]any{"command": " "}, isError: true, contains: "Command is empty"},
		{name: "bash_timeout_too_long", tool: "bash", args: map[string]any{"command": "true", "timeout": 601}, isError: true, contains: "exceeds the maximum"},
		{name: "bash_truncated", tool: "bash", args: map[string]any{"command": "seq 1 3000"}, contains: "[Showing lines 1001-3000 of 3000. Full output: .hutch/output/"},
		{name: "bash_pages", tool: "bash", args: map[string]any{"command": "seq 1 30 > nums.txt"}},
		{name: "read_page", tool: "read", args: map[string]any{"path": "nums.txt", "offset": 5, "limit": 3}, contains: "Use offset=8 to continue"},
		{name: "read_offset_past_end", tool: "read", args: map[string]any{"path": "nums.txt", "offset": 100}, isError: true, contains: "30 lines"},
		{name: "read_missing", tool: "read", args: map[string]any{"path": "missing.txt"}, isError: true},
		{name: "read_outside_relative", tool: "read", args: map[string]any{"path": "../../../etc/passwd"}, isError: true, contains: "is outside the sandbox's workspace"},
		{name: "read_outside_absolute", tool: "read", args: map[string]any{"path": "/etc/passwd"}, isError: true, contains: "is outside the sandbox's workspace"},
		{name: "write_outside", tool: "write", args: map[string]any{"path": "../../escape.txt", "content": "x"}, isError: true, contains: "is outside the sandbox's workspace"},
		{name: "read_image", tool: "read", args: map[string]any{"path": "pixel.png"}, contains: "Read image file [image/png]"},
		{name: "read_binary", tool: "read", args: map[string]any{"path": "data.bin"}, contains: "Read binary file [application/octet-stream, 260 B]"},
		{name: "sandbox_status", tool: "sandbox", args: map[string]any{"action": "status"}, isError: true, contains: "Sandbox 'host' cannot set limits; use image:*"},
		{name: "sandbox_set", tool: "sandbox", args: map[string]any{"action": "set", "cpus": "2"}, isError: true, contains: "Sandbox 'host' cannot set limits; use image:*"},
		{name: "sandbox_unknown_action", tool: "sandbox", args: map[string]any{"action": "boost"}, isError: true, contains: `Unknown action "boost"`},
	}
	for _, st := range steps {
		if st.name == "read_image" {
			if err := os.WriteFile(filepath.Join(dir, "pixel.png"), pngPixel, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if st.name == "read_binary" {
			if err := os.WriteFile(filepath.Join(dir, "data.bin"), binaryBytes, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		res := call(t, cs, st.tool, st.args)
		text := textOf(t, res)
		if res.IsError != st.isError {
			t.Errorf("%s: IsError = %v, want %v; text:\n%s", st.name, res.IsError, st.isError, text)
		}
		if !strings.Contains(text, st.contains) {
			t.Errorf("%s: text does not contain %q:\n%s", st.name, st.contains, text)
		}
		golden(t, filepath.Join("testdata", "calls", st.name+".golden"), strings.ReplaceAll(render(t, res), dir, "<office>"))
	}

	// What the results said happened did.
	if data, err := os.ReadFile(filepath.Join(dir, "notes", "a.txt")); err != nil || string(data) != "one\nTWO\nthree\n" {
		t.Errorf("notes/a.txt = %q, %v", data, err)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(filepath.Dir(dir)), "escape.txt")); !os.IsNotExist(err) {
		t.Errorf("write outside the office: stat says %v", err)
	}
	logs, err := filepath.Glob(filepath.Join(dir, ".hutch", "output", "*.log"))
	if err != nil || len(logs) != 1 {
		t.Fatalf("saved outputs: %v, %v", logs, err)
	}
	if data, err := os.ReadFile(logs[0]); err != nil || !strings.HasPrefix(string(data), "1\n2\n") || !strings.HasSuffix(string(data), "2999\n3000\n") {
		t.Errorf("saved output %s is not the whole output: %v", logs[0], err)
	}
}

// binaryBytes is a binary file: every byte value, then a few bytes that
// are no UTF-8.
var binaryBytes = func() []byte {
	b := make([]byte, 256, 260)
	for i := range b {
		b[i] = byte(i)
	}
	return append(b, 0xff, 0xfe, 0xc3, 0x28)
}()

// TestTools_ReadBinary: a binary file's bytes arrive whole, as an
// embedded resource, never as text with replacement characters.
func TestTools_ReadBinary(t *testing.T) {
	e := newHostEnv(t)
	cs := connect(t, mcpserver.New(e.svc, sandbox.DefaultMode, e.addr, "", nil))
	dir := e.officeDir(e.addr)
	call(t, cs, "bash", map[string]any{"command": "true"}) // the office is made by a first call
	if err := os.WriteFile(filepath.Join(dir, "data.bin"), binaryBytes, 0o644); err != nil {
		t.Fatal(err)
	}
	res := call(t, cs, "read", map[string]any{"path": "data.bin"})
	if res.IsError || len(res.Content) != 2 {
		t.Fatalf("read of a binary file: %s", render(t, res))
	}
	er, ok := res.Content[1].(*mcp.EmbeddedResource)
	if !ok || er.Resource == nil {
		t.Fatalf("content[1] is %T, want an embedded resource", res.Content[1])
	}
	if !bytes.Equal(er.Resource.Blob, binaryBytes) || er.Resource.MIMEType != "application/octet-stream" || er.Resource.URI != "file://"+filepath.Join(dir, "data.bin") {
		t.Errorf("resource %s %s, %d bytes; want the file's %d bytes whole", er.Resource.URI, er.Resource.MIMEType, len(er.Resource.Blob), len(binaryBytes))
	}
	var out struct {
		MIMEType string
		Size     int64
	}
	data, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(data, &out); err != nil || out.Size != int64(len(binaryBytes)) || out.MIMEType != "application/octet-stream" {
		t.Errorf("structured content %s", data)
	}
}

func TestTools_ExitCodeIsToolError(t *testing.T) {
	e := newHostEnv(t)
	cs := connect(t, mcpserver.New(e.svc, sandbox.DefaultMode, e.addr, "", nil))
	res := call(t, cs, "bash", map[string]any{"command": "exit 3"})
	if !res.IsError || !strings.HasSuffix(textOf(t, res), "Command exited with code 3") {
		t.Errorf("exit 3: IsError=%v text %q", res.IsError, textOf(t, res))
	}
	var out struct{ ExitCode int }
	data, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(data, &out); err != nil || out.ExitCode != 3 {
		t.Errorf("structured content %s: exit code %d, %v", data, out.ExitCode, err)
	}
}

func TestTools_HostRefusesIsolatedConversation(t *testing.T) {
	e := newHostEnv(t)
	addr, err := office.NewAddress("web", "isolated-one")
	if err != nil {
		t.Fatal(err)
	}
	isolated, err := projection.ParseDoorWord("isolated")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.svc.SetDoor(t.Context(), addr, isolated); err != nil {
		t.Fatal(err)
	}
	cs := connect(t, mcpserver.New(e.svc, sandbox.DefaultMode, addr, "", nil))
	for _, tool := range []string{"bash", "read", "write", "edit"} {
		args := map[string]any{"command": "true", "path": "a", "content": "x", "oldText": "a", "newText": "b"}
		res := call(t, cs, tool, pick(args, tool))
		if want := "Sandbox 'host' cannot provide an isolated conversation office"; !res.IsError || !strings.Contains(textOf(t, res), want) {
			t.Errorf("%s: IsError=%v text %q, want the refusal %q", tool, res.IsError, textOf(t, res), want)
		}
	}
	if _, err := os.Stat(e.officeDir(addr)); !os.IsNotExist(err) {
		t.Errorf("a refused conversation got an office: %v", err)
	}
}

// pick keeps the arguments a tool takes.
func pick(args map[string]any, tool string) map[string]any {
	keys := map[string][]string{"bash": {"command"}, "read": {"path"}, "write": {"path", "content"}, "edit": {"path", "oldText", "newText"}}[tool]
	out := map[string]any{}
	for _, k := range keys {
		out[k] = args[k]
	}
	return out
}

func TestTools_InvalidInputIsToolError(t *testing.T) {
	e := newHostEnv(t)
	cs := connect(t, mcpserver.New(e.svc, sandbox.DefaultMode, e.addr, "", nil))
	for _, c := range []struct {
		tool string
		args map[string]any
	}{
		{"bash", map[string]any{}},
		{"read", map[string]any{"path": 3}},
		{"write", map[string]any{"path": "a", "content": "x", "mode": "0777"}},
	} {
		res := call(t, cs, c.tool, c.args)
		if !res.IsError {
			t.Errorf("%s %v: not a tool error: %s", c.tool, c.args, textOf(t, res))
		}
	}
}

// pngPixel is a 1x1 PNG.
var pngPixel = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89\x00\x00\x00\rIDATx\x9cc\xf8\x0f\x00\x00\x01\x01\x00\x05\x18\xd8N\x00\x00\x00\x00IEND\xaeB`\x82")

// outputID is the random part of a saved output's name.
var outputID = regexp.MustCompile(`\.hutch/output/[0-9a-f]{16}\.log`)

// render is a result as a golden file shows it: whether it is an error,
// each content, then the structured content (its text, when it repeats
// the text content, is not repeated). Long texts keep their first and
// last lines.
func render(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "isError: %v\n", res.IsError)
	var first string
	for i, c := range res.Content {
		switch c := c.(type) {
		case *mcp.TextContent:
			if i == 0 {
				first = c.Text
			}
			fmt.Fprintf(&b, "--- text\n%s\n", elide(c.Text))
		case *mcp.ImageContent:
			fmt.Fprintf(&b, "--- image %s, %d bytes\n", c.MIMEType, len(c.Data))
		case *mcp.EmbeddedResource:
			fmt.Fprintf(&b, "--- resource %s %s, %d bytes\n", c.Resource.URI, c.Resource.MIMEType, len(c.Resource.Blob))
		default:
			fmt.Fprintf(&b, "--- %T\n", c)
		}
	}
	if res.StructuredContent != nil {
		var m map[string]any
		data, err := json.Marshal(res.StructuredContent)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(data, &m); err != nil {
			t.Fatal(err)
		}
		if m["text"] == first {
			m["text"] = "<the text above>"
		}
		for k, v := range m {
			if s, ok := v.(string); ok {
				m[k] = elide(s)
			}
		}
		fmt.Fprintf(&b, "--- structured\n%s", indentJSON(t, m))
	}
	return outputID.ReplaceAllString(b.String(), ".hutch/output/<id>.log")
}

// indentJSON renders v as indented JSON, with <, > and & as they are.
func indentJSON(t *testing.T, v any) string {
	t.Helper()
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// elide keeps the first and last 8 lines of a text longer than 20 lines.
func elide(s string) string {
	lines := strings.Split(s, "\n")
	if len(lines) <= 20 {
		return s
	}
	keep := append(append(lines[:8:8], fmt.Sprintf("[... %d lines not pinned ...]", len(lines)-16)), lines[len(lines)-8:]...)
	return strings.Join(keep, "\n")
}

func golden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./internal/mcpserver -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s differs (-want +got):\n%s", path, diff)
	}
}
