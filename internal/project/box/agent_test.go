package box_test

import (
	"context"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hutchsandbox/hutch/internal/project"
	"github.com/hutchsandbox/hutch/internal/project/box"
)

// TestAgentLaunch runs `hutch project exec --agent` as an agent team's
// launcher would: a loopback URL in its env reaches a host service on the
// bridge gateway, its MCP config arrives rewritten and read-only at
// /sandbox/relay/<name>.mcp.json (the host copy outside the project), and
// any bytes in its arguments arrive intact.
func TestAgentLaunch(t *testing.T) {
	f := newFixture(t, nil)
	b := f.box(t)
	tg := up(t, b)
	gw, err := b.GatewayIP(context.Background(), tg)
	if err != nil || gw == "" {
		t.Fatalf("GatewayIP = %q, %v", gw, err)
	}
	// A host service bound to the bridge gateway, as the advice says.
	ln, err := net.Listen("tcp", net.JoinHostPort(gw, "0"))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = fmt.Fprintf(w, "hello from the host, %s", r.URL.Path)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	port := ln.Addr().(*net.TCPAddr).Port
	gwHost := project.GatewayHost(string(f.eng.Flavor))

	t.Run("env_url_rewritten", func(t *testing.T) {
		out, errOut, code := f.hutch(t, "exec", "--agent", "alice", "--env", fmt.Sprintf("SVC=http://127.0.0.1:%d/x", port),
			"--", "sh", "-c", `echo "$SVC $HUTCH_AGENT"; wget -qO- "$SVC"`)
		want := fmt.Sprintf("http://%s:%d/x alice\nhello from the host, /x", gwHost, port)
		if code != 0 || out != want {
			t.Errorf("exit %d, stdout %q, want %q\nstderr: %s", code, out, want, errOut)
		}
		if strings.Contains(errOut, "warning") {
			t.Errorf("a service on the gateway drew a warning: %s", errOut)
		}
	})

	t.Run("mcp_config_read_only_in_relay", func(t *testing.T) {
		cfgFile := filepath.Join(t.TempDir(), "team.mcp.json")
		cfg := fmt.Sprintf(`{"mcpServers": {"relay": {"type": "http", "url": "http://localhost:%d/mcp", "headers": {"Authorization": "Bearer t0k"}},
			"docs": {"type": "http", "url": "https://docs.example.com/mcp"}}}`, port)
		if err := os.WriteFile(cfgFile, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		out, errOut, code := f.hutch(t, "exec", "--agent", "bob", "--mcp-config", cfgFile, "--",
			"sh", "-c", `test "$1" = "$HUTCH_MCP_CONFIG" && cat "$1" && (echo x > "$1" 2>/dev/null && echo WRITABLE || echo read-only)`, "sh", cfgFile)
		if code != 0 {
			t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
		}
		for _, want := range []string{fmt.Sprintf(`"url": "http://%s:%d/mcp"`, gwHost, port), `"url": "https://docs.example.com/mcp"`, `"Authorization": "Bearer t0k"`, "read-only"} {
			if !strings.Contains(out, want) {
				t.Errorf("the config inside lacks %q:\n%s", want, out)
			}
		}
		host := filepath.Join(box.RelayDir(f.state, f.name), "bob.mcp.json")
		if _, err := os.Stat(host); err != nil {
			t.Errorf("host copy: %v", err)
		}
		if strings.HasPrefix(host, f.project+string(filepath.Separator)) {
			t.Errorf("the host copy %s is inside the project", host)
		}
	})

	t.Run("arguments_intact", func(t *testing.T) {
		args := []string{`it's "quoted"`, "two  spaces", "$HOME and $(id) `x`", "line1\nline2", "\xff\xfe not UTF-8 \xc3\x28", "", "--flag=-1", "*", "\\"}
		cmd := append([]string{"exec", "--agent", "carol", "--", "sh", "-c", `for a; do printf '%s' "$a" | od -An -v -tx1 | tr -d ' \n'; echo; done`, "sh"}, args...)
		out, errOut, code := f.hutch(t, cmd...)
		if code != 0 {
			t.Fatalf("exit %d\nstderr: %s", code, errOut)
		}
		var want strings.Builder
		for _, a := range args {
			want.WriteString(hex.EncodeToString([]byte(a)) + "\n")
		}
		if out != want.String() {
			t.Errorf("arguments arrived as\n%s\nwant\n%s", out, want.String())
		}
	})

	t.Run("loopback_only_service_warned", func(t *testing.T) {
		lo, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = lo.Close() }()
		p := lo.Addr().(*net.TCPAddr).Port
		_, errOut, code := f.hutch(t, "exec", "--agent", "dave", "--env", fmt.Sprintf("RELAY=http://127.0.0.1:%d", p), "--", "true")
		want := fmt.Sprintf("hutch: warning: http://127.0.0.1:%d: the service on port %d listens only on the host's loopback, which the sandbox cannot reach (it reaches the host through the bridge gateway %s). Bind the service to %s, or set sandbox-network to host for this project.", p, p, gw, gw)
		if code != 0 || !strings.Contains(errOut, want) || strings.Contains(errOut, "0.0.0.0") {
			t.Errorf("exit %d, stderr:\n%s\nwant the warning:\n%s", code, errOut, want)
		}
	})

	t.Run("bad_launches_refused", func(t *testing.T) {
		for _, args := range [][]string{
			{"exec", "--env", "A=http://127.0.0.1:1", "--", "true"},
			{"exec", "--agent", "../x", "--", "true"},
			{"exec", "--agent", "x", "--env", "1A=b", "--", "true"},
		} {
			if _, errOut, code := f.hutch(t, args...); code == 0 || !strings.HasPrefix(errOut, "hutch: ") {
				t.Errorf("%q: exit %d %s", args, code, errOut)
			}
		}
	})
}

// TestAgentLaunch_Networks: under sandbox-network host loopback is the
// host's, so nothing is rewritten; under none the agent is told it cannot
// reach the host.
func TestAgentLaunch_Networks(t *testing.T) {
	t.Run("host", func(t *testing.T) {
		f := newFixture(t, map[string]any{project.KeyNetwork: project.NetworkHost})
		out, errOut, code := f.hutch(t, "exec", "--agent", "alice", "--env", "U=http://127.0.0.1:7777/x", "--", "sh", "-c", `echo "$U"`)
		if code != 0 || out != "http://127.0.0.1:7777/x\n" || strings.Contains(errOut, "warning") {
			t.Errorf("exit %d, stdout %q, stderr %s", code, out, errOut)
		}
	})
	t.Run("none", func(t *testing.T) {
		f := newFixture(t, map[string]any{project.KeyNetwork: project.NetworkNone})
		out, errOut, code := f.hutch(t, "exec", "--agent", "alice", "--env", "U=http://127.0.0.1:7777/x", "--", "sh", "-c", `echo "$U"`)
		if code != 0 || out != "http://127.0.0.1:7777/x\n" || !strings.Contains(errOut, "hutch: note: sandbox-network is none: the agent cannot reach services on the host") {
			t.Errorf("exit %d, stdout %q, stderr %s", code, out, errOut)
		}
	})
}
