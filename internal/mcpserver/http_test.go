package mcpserver_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/hutchsandbox/hutch/internal/mcpserver"
	"github.com/hutchsandbox/hutch/internal/sandbox"
)

func TestHTTPHandler_ToolsPerConversation(t *testing.T) {
	e := newHostEnv(t, "other")
	ts := httptest.NewServer(mcpserver.HTTPHandler(e.svc, sandbox.DefaultMode, nil))
	t.Cleanup(ts.Close)

	for _, id := range []string{"mcp-test", "other"} {
		q := url.Values{"platform": {"web"}, "conversationId": {id}}
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).
			Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: ts.URL + "/mcp?" + q.Encode()}, nil)
		if err != nil {
			t.Fatal(err)
		}
		tools, err := cs.ListTools(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, tool := range tools.Tools {
			names = append(names, tool.Name)
		}
		if got, want := strings.Join(names, " "), strings.Join(toolNames, " "); got != want {
			t.Errorf("%s: tools %q, want %q", id, got, want)
		}
		res := call(t, cs, "bash", map[string]any{"command": "echo hello; pwd"})
		// Each connection works in its own conversation's office.
		addr := e.addr
		if id == "other" {
			addr.ConversationID = id
		}
		if want := "hello\n" + e.officeDir(addr); res.IsError || textOf(t, res) != want {
			t.Errorf("%s: bash: IsError=%v %q, want %q", id, res.IsError, textOf(t, res), want)
		}
		if err := cs.Close(); err != nil {
			t.Error(err)
		}
	}
}

func TestHTTPHandler_BadConversation(t *testing.T) {
	e := newHostEnv(t)
	ts := httptest.NewServer(mcpserver.HTTPHandler(e.svc, sandbox.DefaultMode, nil))
	t.Cleanup(ts.Close)
	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"curl","version":"1"}}}`
	tests := []struct {
		name, query, want string
	}{
		{"missing", "", "The request names no conversation: add ?platform=<platform>&conversationId=<conversation-id> to the URL"},
		{"no_id", "?platform=web", "Conversation id must be non-empty and not a path marker"},
		{"bad_platform", "?platform=irc&conversationId=x", `Unsupported platform: "irc" (use slack, discord, telegram, github or web)`},
		{"separator", "?platform=web&conversationId=a%2Fb", "Conversation id must not contain path separators or control characters"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodPost, ts.URL+tt.query, strings.NewReader(initialize))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = resp.Body.Close() }()
			var body struct{ Error, Code string }
			if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != http.StatusBadRequest || body.Code != "invalid" || body.Error != tt.want {
				t.Errorf("got %d %+v, want 400 invalid %q", resp.StatusCode, body, tt.want)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q", ct)
			}
		})
	}
}
