package project_test

import (
	"encoding/json"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/hutchsandbox/hutch/internal/project"
)

func TestRewriteLoopback(t *testing.T) {
	const gw = "host.docker.internal"
	tests := []struct {
		in, want string
		port     int
	}{
		{"http://127.0.0.1:7777/mcp", "http://host.docker.internal:7777/mcp", 7777},
		{"http://localhost:3000", "http://host.docker.internal:3000", 3000},
		{"http://LOCALHOST:3000/x?y=1#z", "http://host.docker.internal:3000/x?y=1#z", 3000},
		{"https://[::1]:8443/a", "https://host.docker.internal:8443/a", 8443},
		{"ws://0.0.0.0:9000/bus", "ws://host.docker.internal:9000/bus", 9000},
		{"http://127.0.0.1/", "http://host.docker.internal/", 80},
		{"https://user:pw@localhost/x", "https://user:pw@host.docker.internal/x", 443},
	}
	for _, tc := range tests {
		ep, ok := project.RewriteLoopback(tc.in, gw)
		if !ok || ep.Rewritten != tc.want || ep.Port != tc.port || ep.Original != tc.in {
			t.Errorf("RewriteLoopback(%q) = %+v, %v; want %q port %d", tc.in, ep, ok, tc.want, tc.port)
		}
	}
	for _, keep := range []string{"http://10.0.0.5:80/", "https://api.anthropic.com/v1", "http://127.0.0.2:80", "localhost:3000", "not a url", "", "file:///tmp/x", "http://localhost.example.com/"} {
		if ep, ok := project.RewriteLoopback(keep, gw); ok {
			t.Errorf("RewriteLoopback(%q) rewrote it to %q", keep, ep.Rewritten)
		}
	}
	if ep, _ := project.RewriteLoopback("http://127.0.0.1:1/", "fd00::1"); ep.Rewritten != "http://[fd00::1]:1/" {
		t.Errorf("IPv6 gateway: %q", ep.Rewritten)
	}
}

func TestRewriteMCPConfig(t *testing.T) {
	in := `{"mcpServers": {
	  "relay": {"type": "http", "url": "http://127.0.0.1:7777/mcp", "headers": {"Authorization": "Bearer x"}, "timeout": 600000},
	  "docs": {"type": "http", "url": "https://docs.example.com/mcp"},
	  "local": {"command": "node", "args": ["server.js", "--upstream", "http://localhost:8080"], "env": {"API": "http://[::1]:9000"}}
	}}`
	out, eps, err := project.RewriteMCPConfig([]byte(in), "host.containers.internal")
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	servers := got["mcpServers"].(map[string]any)
	if u := servers["relay"].(map[string]any)["url"]; u != "http://host.containers.internal:7777/mcp" {
		t.Errorf("relay url %v", u)
	}
	if u := servers["docs"].(map[string]any)["url"]; u != "https://docs.example.com/mcp" {
		t.Errorf("docs url changed: %v", u)
	}
	if a := servers["local"].(map[string]any)["args"].([]any)[2]; a != "http://host.containers.internal:8080" {
		t.Errorf("arg url %v", a)
	}
	if e := servers["local"].(map[string]any)["env"].(map[string]any)["API"]; e != "http://host.containers.internal:9000" {
		t.Errorf("env url %v", e)
	}
	if !strings.Contains(string(out), `"timeout": 600000`) {
		t.Errorf("number not kept as written:\n%s", out)
	}
	var ports []int
	for _, ep := range eps {
		ports = append(ports, ep.Port)
	}
	if diff := cmp.Diff([]int{7777, 9000, 8080}, ports); diff != "" {
		t.Errorf("endpoints (-want +got):\n%s", diff)
	}
	for _, bad := range []string{`[1,2]`, `{"a":`, ``} {
		if _, _, err := project.RewriteMCPConfig([]byte(bad), "h"); err == nil {
			t.Errorf("RewriteMCPConfig(%q) accepted it", bad)
		}
	}
}

func TestListenerAdvice(t *testing.T) {
	ep := project.Endpoint{Original: "http://127.0.0.1:7777/mcp", Rewritten: "http://host.docker.internal:7777/mcp", Port: 7777}
	l := func(a string, port int) project.Listener {
		return project.Listener{Addr: netip.MustParseAddr(a), Port: port}
	}
	const gw = "172.17.0.1"
	tests := []struct {
		name      string
		listeners []project.Listener
		want      string
	}{
		{"on_the_gateway", []project.Listener{l("172.17.0.1", 7777)}, ""},
		{"on_every_address", []project.Listener{l("::", 7777)}, ""},
		{"v4_mapped_any", []project.Listener{l("::ffff:0.0.0.0", 7777)}, ""},
		{"loopback_only", []project.Listener{l("127.0.0.1", 7777), l("0.0.0.0", 22)},
			"http://127.0.0.1:7777/mcp: the service on port 7777 listens only on the host's loopback, which the sandbox cannot reach (it reaches the host through the bridge gateway 172.17.0.1). Bind the service to 172.17.0.1, or set sandbox-network to host for this project."},
		{"nothing_yet", nil,
			"http://127.0.0.1:7777/mcp: nothing listens on port 7777 on this host yet; the agent reaches it as http://host.docker.internal:7777/mcp once it does (bound to 172.17.0.1)."},
	}
	for _, tc := range tests {
		got := project.ListenerAdvice(ep, tc.listeners, gw)
		if got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
		if strings.Contains(got, "0.0.0.0") {
			t.Errorf("%s: the advice suggests 0.0.0.0", tc.name)
		}
	}
}

func TestSetOverride(t *testing.T) {
	in := []byte(`{"sandbox-memory": "4g", "other": [1, 2], "projects": {"/p": {"sandbox-cpus": 2}, "/q": {"sandbox-persist": false}}}`)
	out, err := project.SetOverride(in, "/p", project.KeyEnabled, true)
	if err != nil {
		t.Fatal(err)
	}
	s, notes, err := project.ParseSettings("f", out)
	if err != nil || len(notes) != 0 {
		t.Fatalf("ParseSettings: %v %v\n%s", err, notes, out)
	}
	p := project.Effective(s, "/p")
	if !p.Enabled || p.CPUs != 2 || p.MemoryBytes != 4<<30 {
		t.Errorf("/p after SetOverride: %+v", p)
	}
	if q := project.Effective(s, "/q"); q.Enabled || q.Persist {
		t.Errorf("/q changed: %+v", q)
	}
	if !strings.Contains(string(out), `"other": [`) {
		t.Errorf("an unknown key was lost:\n%s", out)
	}
	if out, err := project.SetOverride(nil, "/new", project.KeyEnabled, false); err != nil || !strings.Contains(string(out), `"sandbox-enabled": false`) {
		t.Errorf("empty file: %s %v", out, err)
	}
	if _, err := project.SetOverride([]byte(`[]`), "/p", project.KeyEnabled, true); err == nil {
		t.Error("a non-object file was rewritten")
	}
}
