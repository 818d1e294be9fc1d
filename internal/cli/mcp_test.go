package cli

import (
	"bytes"
	"context"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
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

func TestMCP_Refusals(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no_conversation", nil, "--conversation <platform>/<conversation-id> is required"},
		{"bad_conversation", []string{"--conversation", "slack"}, "Conversation must be written <platform>/<conversation-id>, e.g. slack/C0123ABC"},
		{"bad_mode", []string{"--conversation", "web/x", "--sandbox", "docker:x"}, "docker"},
		// Host mode cannot enforce the isolated office a web conversation gets by default.
		{"host_isolated", []string{"--conversation", "web/x"}, "Sandbox 'host' cannot provide an isolated conversation office"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			_, in, _, done := startMCP(t, e, tt.args...)
			defer func() { _ = in.Close() }()
			select {
			case err := <-done:
				if err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Errorf("got %v, want an error containing %q", err, tt.want)
				}
			case <-time.After(time.Minute):
				t.Fatal("hutch mcp served instead of refusing")
			}
		})
	}
}

func TestMCP_ModeFromEnvironment(t *testing.T) {
	e := newEnv(t)
	e.extra = map[string]string{"HUTCH_SANDBOX": "cloudflare:x"}
	_, in, _, done := startMCP(t, e, "--conversation", "web/x")
	defer func() { _ = in.Close() }()
	select {
	case err := <-done:
		// The mode came from $HUTCH_SANDBOX: its refusal names it.
		if err == nil || !strings.Contains(err.Error(), "cloudflare") {
			t.Errorf("got %v, want a refusal naming cloudflare", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("hutch mcp served instead of refusing")
	}
}
