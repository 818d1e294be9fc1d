package api_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hutchsandbox/hutch/internal/api"
	"github.com/hutchsandbox/hutch/internal/office"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/service"
)

func newServer(t *testing.T, token string) *httptest.Server {
	t.Helper()
	dir := t.TempDir()
	layout, err := service.ResolveLayout(service.LayoutOptions{StateDir: filepath.Join(dir, "state"), Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	srv := &api.Server{Service: service.New(layout, nil), Mode: sandbox.Mode{Kind: sandbox.KindHost}, Token: token, Version: "test", MaxBody: 64 << 10}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	return ts
}

func post(t *testing.T, ts *httptest.Server, path, body string, header ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest("POST", ts.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(data)
}

const conv = `"conversation":{"platform":"web","conversationId":"api-1"}`

func TestExec_StreamsFramesThenResult(t *testing.T) {
	ts := newServer(t, "")
	if code, body := post(t, ts, "/v1/door", `{`+conv+`,"policy":"shared"}`); code != 200 {
		t.Fatalf("door: %d %s", code, body)
	}
	code, body := post(t, ts, "/v1/exec", `{`+conv+`,"command":"echo out; echo err >&2; exit 4","stdin":""}`)
	if code != 200 {
		t.Fatalf("exec: %d %s", code, body)
	}
	var frames []api.Frame
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		var f api.Frame
		if err := json.Unmarshal(sc.Bytes(), &f); err != nil {
			t.Fatalf("frame %q: %v", sc.Text(), err)
		}
		frames = append(frames, f)
	}
	var out, errb bytes.Buffer
	for _, f := range frames[:len(frames)-1] {
		switch f.Stream {
		case "stdout":
			out.Write(f.Data)
		case "stderr":
			errb.Write(f.Data)
		default:
			t.Errorf("unexpected frame %+v", f)
		}
	}
	last := frames[len(frames)-1]
	if out.String() != "out\n" || errb.String() != "err\n" || last.Result == nil || last.Result.ExitCode != 4 {
		t.Errorf("stdout %q stderr %q last %+v", out.String(), errb.String(), last)
	}
}

func TestErrors_MapToStatusAndStayUp(t *testing.T) {
	ts := newServer(t, "")
	tests := []struct {
		name, path, body string
		code             int
		want             string
	}{
		{"malformed_json", "/v1/exec", `{bad`, 400, `"code":"invalid"`},
		{"unknown_field", "/v1/exec", `{"nope":1}`, 400, `unknown field`},
		{"no_conversation", "/v1/exec", `{"command":"true"}`, 400, `The request names no conversation`},
		{"unsafe_id", "/v1/exec", `{"conversation":{"platform":"web","conversationId":"../etc"},"command":"true"}`, 400, `Conversation id must not contain path separators or control characters`},
		{"unknown_platform", "/v1/exec", `{"conversation":{"platform":"irc","conversationId":"x"},"command":"true"}`, 400, `Unsupported platform: \"irc\"`},
		{"refused_isolated", "/v1/exec", `{"conversation":{"platform":"web","conversationId":"iso"},"command":"true"}`, 412, `Sandbox 'host' cannot provide an isolated conversation office`},
		{"oversized", "/v1/exec", `{"command":"` + strings.Repeat("x", 70<<10) + `"}`, 400, `Request body is larger than 65536 bytes`},
		{"not_managed", "/v1/sandbox/status", `{` + conv + `}`, 501, `Sandbox 'host' has no runtimes managed by hutch`},
		{"bad_door_word", "/v1/door", `{` + conv + `,"policy":"open"}`, 400, `Unknown door policy \"open\"`},
		{"unknown_endpoint", "/v1/nothing", `{}`, 404, `No such endpoint: POST /v1/nothing`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body := post(t, ts, tt.path, tt.body)
			if code != tt.code || !strings.Contains(body, tt.want) {
				t.Errorf("%s: %d %s; want %d containing %s", tt.path, code, body, tt.code, tt.want)
			}
		})
	}
	resp, err := ts.Client().Get(ts.URL + "/v1/health")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("daemon not serving after bad requests: %v", err)
	}
	_ = resp.Body.Close()
}

func TestToken(t *testing.T) {
	ts := newServer(t, "s3cret-token-0123456789abcdef0123")
	for _, tc := range []struct {
		name   string
		header []string
		code   int
	}{
		{"missing", nil, 401},
		{"wrong", []string{"Authorization", "Bearer nope"}, 401},
		{"right", []string{"Authorization", "Bearer s3cret-token-0123456789abcdef0123"}, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := post(t, ts, "/v1/policy", `{`+conv+`}`, tc.header...)
			if code != tc.code {
				t.Errorf("got %d %s, want %d", code, body, tc.code)
			}
		})
	}
}

func TestVault_NeverEchoesValues(t *testing.T) {
	ts := newServer(t, "")
	const secret = "vault-value-do-not-echo"
	code, body := post(t, ts, "/v1/vault/set", `{`+conv+`,"vars":{"TOKEN":"`+secret+`"}}`)
	if code != 200 || strings.Contains(body, secret) || !strings.Contains(body, `"name":"TOKEN"`) {
		t.Errorf("vault set: %d %s", code, body)
	}
	code, body = post(t, ts, "/v1/vault/set", `{`+conv+`,"vars":{"1BAD":"`+secret+`"}}`)
	if code != 400 || strings.Contains(body, secret) {
		t.Errorf("bad vault name: %d %s", code, body)
	}
	code, body = post(t, ts, "/v1/vault/list", `{`+conv+`}`)
	if code != 200 || body != `[{"name":"TOKEN","kind":"env"}]`+"\n" {
		t.Errorf("vault list: %d %q", code, body)
	}
}

func TestPolicy_ChannelKindDerivation(t *testing.T) {
	ts := newServer(t, "")
	code, body := post(t, ts, "/v1/channel-kind", `{"conversation":{"platform":"slack","conversationId":"C1","channelKind":"private_channel"}}`)
	if code != 200 || !strings.Contains(body, `"policy":"trusted / shared-support / private"`) || !strings.Contains(body, `"origin":"channel kind private_channel"`) ||
		!strings.Contains(body, `"refusal":"Sandbox 'host' cannot enforce read-only shared workspace memory`) {
		t.Errorf("channel kind: %d %s", code, body)
	}
}

func httptestServer(t *testing.T, h http.Handler) string {
	t.Helper()
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	return ts.URL
}

func TestChat(t *testing.T) {
	ts := newServer(t, "")
	// The server is in host mode, where chat shows the door but may not
	// change it.
	code, body := post(t, ts, "/v1/chat", `{`+conv+`,"message":"<@U1> /sandbox door"}`)
	if code != 200 || !strings.Contains(body, "Door policy: isolated / conversation") {
		t.Errorf("chat door: %d %s", code, body)
	}
	code, body = post(t, ts, "/v1/chat", `{`+conv+`,"message":"<@U1> /sandbox door shared"}`)
	if code != 200 || !strings.Contains(body, "The door policy was not changed") {
		t.Errorf("chat door shared: %d %s", code, body)
	}
	code, body = post(t, ts, "/v1/chat", `{`+conv+`,"message":"hello"}`)
	if code != 400 {
		t.Errorf("not a command: %d %s", code, body)
	}
}

// TestOffices_ListsEveryRecordedOffice: the listing (served from memory
// per version of the registry) names each recorded office with its key,
// and an office recorded after a listing is in the next one.
func TestOffices_ListsEveryRecordedOffice(t *testing.T) {
	ts := newServer(t, "")
	list := func() []api.OfficeEntry {
		t.Helper()
		resp, err := ts.Client().Get(ts.URL + "/v1/offices")
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		var out []api.OfficeEntry
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
			t.Fatalf("GET /v1/offices: %d %s %v", resp.StatusCode, resp.Header.Get("Content-Type"), err)
		}
		return out
	}
	door := func(id string) {
		t.Helper()
		if code, body := post(t, ts, "/v1/door", `{"conversation":{"platform":"web","conversationId":"`+id+`"},"policy":"shared"}`); code != 200 {
			t.Fatalf("door %s: %d %s", id, code, body)
		}
	}
	door("list-1")
	door("list-2")
	for range 3 {
		got := list()
		if len(got) != 2 || got[0].ConversationID != "list-1" || got[1].ConversationID != "list-2" {
			t.Fatalf("offices = %+v; want list-1 and list-2", got)
		}
		for _, e := range got {
			if want := string(office.Address{Platform: "web", ConversationID: e.ConversationID}.Key()); e.OfficeKey != want || e.Platform != "web" || e.RecordedAt.IsZero() {
				t.Errorf("entry %+v; want key %s and a time", e, want)
			}
		}
	}
	door("list-3")
	if got := list(); len(got) != 3 || got[2].ConversationID != "list-3" {
		t.Errorf("after a third office, offices = %+v", got)
	}
}
