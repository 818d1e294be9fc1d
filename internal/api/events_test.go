package api_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/client"
	"github.com/hutchsandbox/hutch/internal/api"
	"github.com/hutchsandbox/hutch/internal/office"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/sandbox/mock"
	"github.com/hutchsandbox/hutch/internal/service"
)

// TestEvents_FollowersBounded: at most MaxEventFollowers clients follow
// the log at once; one more is refused 503, and a slot frees when a
// client goes.
func TestEvents_FollowersBounded(t *testing.T) {
	ts := newServer(t, "")
	hc := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 0}}
	defer hc.CloseIdleConnections()
	var open []*http.Response
	var mu sync.Mutex
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		for _, r := range open {
			_ = r.Body.Close()
		}
	}()
	follow := func() *http.Response {
		resp, err := hc.Get(ts.URL + "/v1/events?follow=1")
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	for i := range 32 {
		resp := follow()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("follower %d: %d", i, resp.StatusCode)
		}
		mu.Lock()
		open = append(open, resp)
		mu.Unlock()
	}
	resp := follow()
	body := new(strings.Builder)
	_, _ = bufio.NewReader(resp.Body).WriteTo(body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body.String(), `"code":"unavailable"`) {
		t.Errorf("follower 33: %d %s", resp.StatusCode, body)
	}
	// One goes: a slot frees (the server sees it at its next poll).
	mu.Lock()
	_ = open[0].Body.Close()
	open = open[1:]
	mu.Unlock()
	var last int
	for range 100 {
		time.Sleep(20 * time.Millisecond)
		resp = follow()
		last = resp.StatusCode
		if last == http.StatusOK {
			mu.Lock()
			open = append(open, resp)
			mu.Unlock()
			break
		}
		_ = resp.Body.Close()
	}
	if last != http.StatusOK {
		t.Errorf("after a follower went: %d", last)
	}
	for _, q := range []string{"n=-1", "n=x", "follow=yes"} {
		resp, err := hc.Get(ts.URL + "/v1/events?" + q)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("?%s: %d, want 400", q, resp.StatusCode)
		}
	}
}

// TestEvents_Surfaces: what API and chat requests change is in GET
// /v1/events under their surface, a chat's with its user; a runtime made
// by a command is recorded under the surface of that command. A refusal
// names the conversation it refused. A call that says it comes from
// hutch's own commands on the local socket is the surface cli, with the
// user it names; no other surface can be claimed, nor that one over TCP.
func TestEvents_Surfaces(t *testing.T) {
	layout, err := service.ResolveLayout(service.LayoutOptions{StateDir: filepath.Join(t.TempDir(), "state"), Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	svc := service.New(layout, nil)
	mode := sandbox.Mode{Kind: sandbox.KindImage, Target: "busybox"}
	svc.SetRuntime(mode, mock.New(mock.Config{Mode: mode, Changed: svc.RuntimeChanged}))
	ts := httptest.NewServer((&api.Server{Service: svc, Mode: mode}).Handler())
	defer ts.Close()
	const c = `"conversation":{"platform":"web","conversationId":"ev","user":"U1"}`
	for _, step := range []struct{ path, body string }{
		{"/v1/chat", `{` + c + `,"message":"/sandbox door shared"}`},
		{"/v1/exec", `{` + c + `,"command":"true"}`},
		{"/v1/chat", `{` + c + `,"message":"/sandbox boost"}`},
		{"/v1/vault/set", `{` + c + `,"vars":{"TOKEN":"v4lue-not-logged"}}`},
		{"/v1/sandbox/stop", `{` + c + `}`},
		{"/v1/chat", `{` + c + `,"message":"/sandbox limits cpus=1000"}`},
	} {
		if code, body := post(t, ts, step.path, step.body); code != http.StatusOK {
			t.Fatalf("%s: %d %s", step.path, code, body)
		}
	}
	for _, claim := range []struct{ surface, who, body string }{
		{"cli", "ada", `{` + c + `,"vars":{"FROM_CLI":"x"}}`},
		{"portal", "mallory", `{` + c + `,"vars":{"FROM_PORTAL":"x"}}`},
		{"chat", "mallory", `{` + c + `,"vars":{"FROM_CHAT":"x"}}`},
	} {
		req, err := http.NewRequest(http.MethodPost, ts.URL+"/v1/vault/set", strings.NewReader(claim.body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(client.HeaderSurface, claim.surface)
		req.Header.Set(client.HeaderWho, claim.who)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("vault set claiming %s: %s", claim.surface, resp.Status)
		}
	}
	if code, body := post(t, ts, "/v1/sandbox/limits", `{`+c+`,"cpus":"1000"}`); code/100 != 4 {
		t.Fatalf("limits over the ceiling through the API: %d %s", code, body)
	}
	// Over TCP the caller holds a token, which may be a bot's or an
	// agent's: its claim to be the operator's command is not taken.
	tcp := httptest.NewServer((&api.Server{Service: svc, Mode: mode, Token: "t0ken"}).Handler())
	defer tcp.Close()
	req, err := http.NewRequest(http.MethodPost, tcp.URL+"/v1/vault/set", strings.NewReader(`{`+c+`,"vars":{"FROM_TCP":"x"}}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer t0ken")
	req.Header.Set(client.HeaderSurface, "cli")
	req.Header.Set(client.HeaderWho, "root")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("vault set over TCP: %s", resp.Status)
	}
	resp, err = http.Get(ts.URL + "/v1/events")
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	var got []string
	for _, line := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		var e struct{ Surface, Who, Action, Target, Detail string }
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		// A refusal's detail is its reason, then its text (which
		// names this machine's ceiling): the reason is compared.
		e.Detail, _, _ = strings.Cut(e.Detail, ":")
		got = append(got, strings.Join([]string{e.Surface, e.Who, e.Action, e.Target, e.Detail}, "|"))
	}
	addr, _ := office.NewAddress("web", "ev")
	key := string(addr.Key())
	want := []string{
		"chat|U1|door.set|web/ev|trusted/shared-support/public",
		"api||runtime.created|" + key + "|",
		"chat|U1|limits.boost|" + key + "|cpus=2 memory=4096MiB pids=1024",
		"api||vault.set|" + key + "|TOKEN",
		"api||runtime.stopped|" + key + "|",
		"chat|U1|refused|web/ev|ceiling",
		"cli|ada|vault.set|" + key + "|FROM_CLI",
		"api||vault.set|" + key + "|FROM_PORTAL",
		"api||vault.set|" + key + "|FROM_CHAT",
		"api||refused|web/ev|ceiling",
		"api||vault.set|" + key + "|FROM_TCP",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if strings.Contains(string(data), "v4lue-not-logged") {
		t.Errorf("the events hold a vault value:\n%s", data)
	}
}
