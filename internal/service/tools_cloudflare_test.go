package service_test

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/hutchsandbox/hutch/internal/bridge/protocol"
	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/office"
	"github.com/hutchsandbox/hutch/internal/projection"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/service"
	"github.com/hutchsandbox/hutch/internal/tools"
)

// remoteBridge is a bridge (base protocol plus stdin) whose remote
// /workspace is a temp directory here: it runs each command with sh -c,
// after rewriting /workspace, at the start of an argument or of the
// working directory, to that directory.
type remoteBridge struct {
	workspace string

	mu       sync.Mutex // guards the following
	envs     []map[string]string
	commands []string
}

func (b *remoteBridge) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/health":
		_ = json.NewEncoder(w).Encode(protocol.Health{OK: true, Bridge: "test", Extensions: []string{protocol.ExtStdin}})
	case "/exec":
		var req protocol.ExecRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Command == "" {
			w.WriteHeader(http.StatusBadRequest)
			_ = json.NewEncoder(w).Encode(protocol.ErrorBody{Error: fmt.Sprintf("bad request (%v)", err)})
			return
		}
		b.mu.Lock()
		b.envs = append(b.envs, req.Env)
		b.commands = append(b.commands, req.Command)
		b.mu.Unlock()
		cmd := exec.CommandContext(r.Context(), "sh", "-c", strings.ReplaceAll(req.Command, "'/workspace", "'"+b.workspace))
		cmd.Dir = req.Cwd
		if rest, ok := strings.CutPrefix(req.Cwd, "/workspace"); ok {
			cmd.Dir = b.workspace + rest
		}
		cmd.Env = os.Environ()
		for k, v := range req.Env {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		if req.Stdin != "" {
			in, err := base64.StdEncoding.DecodeString(req.Stdin)
			if err != nil {
				w.WriteHeader(http.StatusBadRequest)
				return
			}
			cmd.Stdin = bytes.NewReader(in)
		}
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		var exitErr *exec.ExitError
		if err != nil && !errors.As(err, &exitErr) {
			w.WriteHeader(http.StatusInternalServerError)
			_ = json.NewEncoder(w).Encode(protocol.ErrorBody{Error: err.Error()})
			return
		}
		_ = json.NewEncoder(w).Encode(protocol.ExecResponse{Stdout: stdout.String(), Stderr: stderr.String(), Code: cmd.ProcessState.ExitCode()})
	default:
		http.NotFound(w, r)
	}
}

// TestToolSandbox_Cloudflare drives the tools in cloudflare mode: files
// land in the remote runtime's /workspace (here the bridge's directory),
// never on this host, and relative paths start where commands do.
func TestToolSandbox_Cloudflare(t *testing.T) {
	t.Parallel()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	b := &remoteBridge{workspace: filepath.Join(root, "remote")}
	if err := os.Mkdir(b.workspace, 0o755); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(b)
	t.Cleanup(srv.Close)
	layout, err := service.ResolveLayout(service.LayoutOptions{
		StateDir:  filepath.Join(root, "state"),
		Workspace: filepath.Join(root, "workspace"),
		Getenv:    func(string) string { return "" },
	})
	if err != nil {
		t.Fatal(err)
	}
	svc := service.New(layout, nil)
	svc.SetGetenv(func(k string) string {
		if k == "HUTCH_BRIDGE_URL" {
			return srv.URL
		}
		return ""
	})
	t.Cleanup(func() { _ = svc.Close() })
	// Cloudflare mode, like host mode, runs only trusted conversations.
	if err := svc.SetGlobalDoor(t.Context(), &projection.Setting{DoorPolicy: string(projection.DoorTrusted), Layout: string(projection.LayoutFull)}); err != nil {
		t.Fatal(err)
	}
	addr, err := office.NewAddress("slack", "C0FILES")
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Vaults().SetEnv(string(addr.Key()), map[string]string{"GH_TOKEN": "ghp_vault"}); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	sb, err := svc.ToolSandbox(ctx, addr, sandbox.Mode{Kind: sandbox.KindCloudflare, Target: "team-box"}, "")
	if err != nil {
		t.Fatal(err)
	}
	if got := sb.Office(); got != "/workspace" {
		t.Errorf("Office() = %q, want /workspace, where the bridge starts commands", got)
	}
	if diff := cmp.Diff([]string{"/workspace"}, sb.Roots()); diff != "" {
		t.Errorf("Roots() mismatch (-want +got):\n%s", diff)
	}

	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	dir := "hutch-test-" + hex.EncodeToString(rnd[:])
	rel := dir + "/notes.txt"
	if _, err := tools.Write(ctx, sb, tools.WriteInput{Path: rel, Content: "alpha\nbeta\n"}); err != nil {
		t.Fatalf("write: %v", err)
	}
	if data, err := os.ReadFile(filepath.Join(b.workspace, rel)); err != nil || string(data) != "alpha\nbeta\n" {
		t.Errorf("the remote workspace holds %q, %v; want the file written", data, err)
	}
	for _, p := range []string{filepath.Join("/workspace", rel), filepath.Join(layout.Workspace, rel), filepath.Join(layout.Workspace, string(addr.Key()), rel)} {
		if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s on this host: %v; want nothing there", p, err)
		}
	}
	out, err := tools.Read(ctx, sb, tools.ReadInput{Path: "/workspace/" + rel})
	if err != nil || !strings.Contains(out.Text, "alpha") || !strings.Contains(out.Text, "beta") {
		t.Errorf("read: %+v, %v; want the file's lines", out, err)
	}
	if _, err := tools.Edit(ctx, sb, tools.EditInput{Path: rel, OldText: "beta", NewText: "gamma"}); err != nil {
		t.Errorf("edit: %v", err)
	}
	// A command starts where relative paths do.
	bash, err := tools.Bash(ctx, sb, tools.BashInput{Command: "cat " + rel})
	if err != nil || bash.Text != "alpha\ngamma" {
		t.Errorf("bash: %q, %v; want the edited file", bash.Text, err)
	}
	for _, p := range []string{"../etc/passwd", "/etc/passwd"} {
		_, err := tools.Read(ctx, sb, tools.ReadInput{Path: p})
		if !errdefs.IsFailedPrecondition(err) || !strings.Contains(err.Error(), "outside the sandbox's workspace") {
			t.Errorf("read %s: %v; want the outside-the-workspace refusal", p, err)
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	// The conversation's command gets the vault env; the file
	// operations' commands need no credential and get none.
	for i, env := range b.envs {
		command := b.commands[i] == "cat "+rel
		if command && env["GH_TOKEN"] != "ghp_vault" || !command && len(env) != 0 {
			t.Errorf("exec %d (%.40q) had env %v; want the vault env for the command only", i, b.commands[i], env)
		}
	}
}
