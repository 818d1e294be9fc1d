package box_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/hutchsandbox/hutch/internal/project/teammcp"
)

// bearer adds the team server's token to each request.
type bearer string

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(b))
	return http.DefaultTransport.RoundTrip(r)
}

// TestTeamMCP_ProgressAndCancel drives `hutch project mcp` with the
// official Go SDK's client: a bash call that asks for progress gets it
// while the command runs (the output's byte count and last line), and a
// client that gives up on the call (its context cancelled) leaves no
// process of the command behind in the container. So does a script that
// POSTs a call the old way (no session, an answer in JSON) and hangs up.
func TestTeamMCP_ProgressAndCancel(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	srv := f.startMCP(t)
	tok, err := os.ReadFile(filepath.Join(f.state, "projects", f.name, teammcp.TokenName))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	var mu sync.Mutex
	var got []*mcp.ProgressNotificationParams
	first := make(chan struct{})
	client := mcp.NewClient(&mcp.Implementation{Name: "progress-test", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, req.Params)
			if len(got) == 1 {
				close(first)
			}
		},
	})
	transport := &mcp.StreamableClientTransport{
		Endpoint:   "http://" + srv.listen + "/mcp",
		HTTPClient: &http.Client{Transport: bearer(strings.TrimSpace(string(tok)))},
	}
	cs, err := client.Connect(ctx, transport, nil)
	if err != nil {
		t.Fatalf("connecting the Go SDK's client: %v\nstderr: %s", err, srv.stderr.String())
	}
	defer func() { _ = cs.Close() }()

	// A call without a token still gets its whole answer.
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": "echo plain"}})
	if err != nil || res.IsError || len(res.Content) == 0 || res.Content[0].(*mcp.TextContent).Text != "plain" {
		t.Fatalf("a call without progress: %v %+v", err, res)
	}

	pidFile := f.project + "/.bash-pid"
	params := &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{
		"command": "echo $$ > " + pidFile + "; echo started; sleep 60; echo never",
		"timeout": 120,
	}}
	params.SetProgressToken("long")
	callCtx, giveUp := context.WithCancel(ctx)
	go func() {
		select {
		case <-first:
		case <-time.After(30 * time.Second):
		}
		giveUp()
	}()
	start := time.Now()
	if res, err := cs.CallTool(callCtx, params); err == nil {
		t.Fatalf("the call given up on returned %+v", res)
	}
	mu.Lock()
	notes := append([]*mcp.ProgressNotificationParams(nil), got...)
	mu.Unlock()
	if len(notes) == 0 {
		t.Fatalf("no progress within %v", time.Since(start).Round(time.Millisecond))
	}
	if n := notes[0]; n.ProgressToken != "long" || n.Progress != float64(len("started\n")) || !strings.Contains(n.Message, "started") {
		t.Errorf("first progress: token %v, progress %v, message %q; want long, %d and the line", n.ProgressToken, n.Progress, n.Message, len("started\n"))
	}

	// The command's shell is gone soon after: the server's handler was
	// cancelled with the request, which kills its process group.
	f.waitGone(t, pidFile)

	// The same for a client of an older protocol without a session, as a
	// script is: one POST answered in JSON, and the client hangs up.
	_, _ = f.mustHutch(t, "exec", "--", "rm", "-f", pidFile)
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"bash","arguments":{"command":"echo $$ > ` + pidFile + `; sleep 60","timeout":120}}}`
	hangUp, hungUp := context.WithCancel(ctx)
	req, err := http.NewRequestWithContext(hangUp, http.MethodPost, transport.Endpoint, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	posted := make(chan error, 1)
	go func() {
		resp, err := transport.HTTPClient.Do(req)
		if err == nil {
			_ = resp.Body.Close()
			err = fmt.Errorf("answered %s before the client hung up", resp.Status)
		}
		posted <- err
	}()
	waitFor(t, 30*time.Second, "the script's command to start", func() bool {
		_, _, code := f.hutch(t, "exec", "--", "test", "-s", pidFile)
		return code == 0
	})
	hungUp()
	if err := <-posted; !errors.Is(err, context.Canceled) {
		t.Errorf("the script's request: %v", err)
	}
	f.waitGone(t, pidFile)
}

// waitGone waits for the process whose pid the container's file pidFile
// holds to end.
func (f *fixture) waitGone(t *testing.T, pidFile string) {
	t.Helper()
	out, _ := f.mustHutch(t, "exec", "--", "cat", pidFile)
	pid := strings.TrimSpace(out)
	waitFor(t, 20*time.Second, "the given-up command's shell (pid "+pid+") to end", func() bool {
		out, _, _ := f.hutch(t, "exec", "--", "sh", "-c", "kill -0 "+pid+" 2>/dev/null && echo alive || echo gone")
		return strings.TrimSpace(out) == "gone"
	})
}
