package daemon_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/hutchsandbox/hutch/client"
	"github.com/hutchsandbox/hutch/internal/api"
	"github.com/hutchsandbox/hutch/internal/daemon"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/sandbox/mock"
	"github.com/hutchsandbox/hutch/internal/testenv"
)

// bearer adds a token to every request.
type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// TestDaemon_Metrics scrapes a daemon's /metrics after it has run a
// command and refused callers on every surface (a wrong token, a boost
// above the ceiling through the API, chat and MCP, the portal without a
// session and with a bad link), checks the series an operator alerts
// on, and has promtool check the whole exposition. The managed mode is
// sandbox/mock, which runs its commands on this machine: the metrics,
// not an engine, are under test.
func TestDaemon_Metrics(t *testing.T) {
	svc := hostService(t)
	mode := sandbox.Mode{Kind: sandbox.KindImage, Target: "metrics-test"}
	svc.SetRuntime(mode, mock.New(mock.Config{Mode: mode}))
	const token = "metrics-test-token"
	d := start(t, svc, daemon.Options{Mode: mode, Version: "v0.0.0-metrics", TCP: "127.0.0.1:0", Token: token, Admin: "127.0.0.1:0"})
	out := d.out.String()
	tcp := regexp.MustCompile(`TCP:\s+(http://\S+)`).FindStringSubmatch(out)
	portal := regexp.MustCompile(`Admin:\s+(http://\S+)/admin/`).FindStringSubmatch(out)
	if tcp == nil || portal == nil {
		t.Fatalf("no TCP or admin address in the daemon's output:\n%s", out)
	}
	ctx := context.Background()
	c := &client.Client{Socket: d.sock}
	conv := api.Conversation{Platform: "web", ConversationID: "metrics-1"}
	if _, err := c.Exec(ctx, api.ExecRequest{Conversation: conv, Command: "true"}, nil, io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}

	hc := &http.Client{}
	defer hc.CloseIdleConnections()
	status := func(method, url string, body string) int {
		t.Helper()
		req, err := http.NewRequest(method, url, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	// Refused: who asks.
	if got := status("GET", tcp[1]+"/v1/health", ""); got != http.StatusUnauthorized {
		t.Errorf("API without its token: %d, want 401", got)
	}
	if got := status("GET", portal[1]+"/admin/", ""); got != http.StatusUnauthorized {
		t.Errorf("portal without a session: %d, want 401", got)
	}
	if got := status("GET", portal[1]+"/admin/login?token=wrong", ""); got != http.StatusForbidden {
		t.Errorf("portal with a bad link: %d, want 403", got)
	}
	// Refused: what is asked, a boost above the ceiling, on three surfaces.
	err := c.Call(ctx, "/v1/sandbox/boost", api.LimitsRequest{Conversation: conv, CPUs: "1000"}, nil)
	if err == nil || !strings.Contains(err.Error(), "above this installation's ceiling") {
		t.Errorf("boost of 1000 CPUs: %v", err)
	}
	var reply api.ChatReply
	if err := c.Call(ctx, "/v1/chat", api.ChatRequest{Conversation: conv, Message: "/sandbox limits cpus=1000"}, &reply); err != nil || !strings.Contains(reply.Text, "above this installation's ceiling") {
		t.Errorf("chat limits of 1000 CPUs: %q, %v", reply.Text, err)
	}
	q := url.Values{"platform": {conv.Platform}, "conversationId": {conv.ConversationID}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: tcp[1] + "/mcp?" + q.Encode(), HTTPClient: &http.Client{Transport: bearer{token}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "sandbox", Arguments: map[string]any{"action": "set", "cpus": "1000"}})
	if err != nil || !res.IsError {
		t.Errorf("MCP sandbox set of 1000 CPUs: %+v, %v", res, err)
	}
	_ = cs.Close()

	var body bytes.Buffer
	if _, err := c.GetTo(ctx, "/metrics", &body); err != nil {
		t.Fatal(err)
	}
	metrics := body.String()
	key := `office_key="v1-web-metrics-1-`
	for _, want := range []string{
		`hutch_build_info{commit="`,
		`version="v0.0.0-metrics"} 1`,
		`hutch_commands_total{mode="image",outcome="ok"} 1`,
		`hutch_runtimes_up{mode="image"} 1`,
		`hutch_runtimes{mode="image",state="running"} 1`,
		`hutch_runtime_cpu_seconds_total{mode="image",` + key,
		`hutch_runtime_memory_bytes{mode="image",` + key,
		`hutch_runtime_processes{mode="image",` + key,
		`hutch_refusals_total{reason="unauthorized",surface="api"} 1`,
		`hutch_refusals_total{reason="ceiling",surface="api"} 1`,
		`hutch_refusals_total{reason="ceiling",surface="chat"} 1`,
		`hutch_refusals_total{reason="ceiling",surface="mcp"} 1`,
		`hutch_refusals_total{reason="unauthorized",surface="portal"} 1`,
		`hutch_refusals_total{reason="forbidden",surface="portal"} 1`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if t.Failed() {
		t.Logf("metrics:\n%s", metrics)
	}
	testenv.CheckMetrics(t, body.Bytes())

	// A removed runtime's series go with it.
	if err := c.Call(ctx, "/v1/sandbox/remove", api.LimitsRequest{Conversation: conv}, nil); err != nil {
		t.Fatal(err)
	}
	body.Reset()
	if _, err := c.GetTo(ctx, "/metrics", &body); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(body.String(), key) {
		t.Errorf("a removed runtime's series are still there:\n%s", body.String())
	}
}

// checkRuntimeMetrics scrapes a daemon in image mode whose runtime of
// office key runs, checks that runtime's series, and has promtool check
// the exposition.
func checkRuntimeMetrics(t *testing.T, sock, key string) {
	t.Helper()
	var body bytes.Buffer
	if _, err := (&client.Client{Socket: sock}).GetTo(context.Background(), "/metrics", &body); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"hutch_runtime_cpu_seconds_total", "hutch_runtime_memory_bytes", "hutch_runtime_processes"} {
		if want := name + `{mode="image",office_key="` + key + `"} `; !strings.Contains(body.String(), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if !strings.Contains(body.String(), `hutch_runtimes{mode="image",state="running"} 1`) {
		t.Errorf("metrics do not count one running runtime")
	}
	if t.Failed() {
		t.Logf("metrics:\n%s", body.String())
	}
	testenv.CheckMetrics(t, body.Bytes())
}
