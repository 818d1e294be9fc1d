package cloudflare_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/office"
	"github.com/hutchsandbox/hutch/internal/projection"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/service"
)

// newService returns a service over a fresh layout that reads env from
// env, with every conversation trusted with the workspace (cloudflare
// mode, like host mode, refuses the isolated door policy).
func newService(t *testing.T, env map[string]string) (*service.Service, service.Layout) {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	layout, err := service.ResolveLayout(service.LayoutOptions{
		StateDir:  filepath.Join(root, "state"),
		Workspace: filepath.Join(root, "workspace"),
		Getenv:    func(string) string { return "" },
	})
	if err != nil {
		t.Fatal(err)
	}
	svc := service.New(layout, nil)
	svc.SetGetenv(func(k string) string { return env[k] })
	t.Cleanup(func() { _ = svc.Close() })
	if err := svc.SetGlobalDoor(t.Context(), &projection.Setting{DoorPolicy: string(projection.DoorTrusted), Layout: string(projection.LayoutFull)}); err != nil {
		t.Fatal(err)
	}
	return svc, layout
}

// TestService_Cloudflare drives cloudflare mode through the service, as
// hutch exec and the daemon do: the bridge comes from the environment,
// ValidateMode checks its health, and the conversation's vault env
// reaches the command.
func TestService_Cloudflare(t *testing.T) {
	t.Parallel()
	b, _ := newBaseBridge(t)
	svc, _ := newService(t, map[string]string{"CLOUDFLARE_SANDBOX_URL": b.url})
	mode, err := sandbox.ParseMode("cloudflare:team-box")
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.ValidateMode(t.Context(), mode); err != nil {
		t.Fatalf("ValidateMode(%s) with a healthy bridge: %v", mode, err)
	}
	addr, err := office.NewAddress("slack", "C0123ABC")
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Vaults().SetEnv(string(addr.Key()), map[string]string{"GH_TOKEN": "ghp_from_the_vault"}); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	res, err := svc.Exec(t.Context(), service.ExecOptions{
		Address: addr, Mode: mode,
		Argv:   []string{`printf '%s|' "$GH_TOKEN" "$PWD"`},
		Stdout: &stdout, Stderr: &stderr,
	})
	if err != nil {
		t.Fatalf("Exec: %v", err)
	}
	remote := "team-box-" + string(addr.Key())
	if want := "ghp_from_the_vault|" + b.workspace(remote) + "|"; res.ExitCode != 0 || stdout.String() != want {
		t.Errorf("Exec: exit %d, stdout %q, stderr %q; want exit 0, stdout %q", res.ExitCode, stdout.String(), stderr.String(), want)
	}
	if got := b.last(t); got.SandboxID != remote || got.Cwd != "/workspace" || got.Env["GH_TOKEN"] != "ghp_from_the_vault" {
		t.Errorf("the bridge got %+v; want sandbox id %q, cwd /workspace and the vault env", got, remote)
	}
}

func TestService_ValidateMode_Errors(t *testing.T) {
	t.Parallel()
	mode := sandbox.Mode{Kind: sandbox.KindCloudflare, Target: "box"}
	svc, _ := newService(t, nil)
	err := svc.ValidateMode(t.Context(), mode)
	if !errdefs.IsFailedPrecondition(err) || !strings.Contains(fmtErr(err), "set HUTCH_BRIDGE_URL (or CLOUDFLARE_SANDBOX_URL)") {
		t.Errorf("ValidateMode without a bridge URL: %v; want the error naming both variables", err)
	}
	dead := closedURL(t)
	svc, _ = newService(t, map[string]string{"HUTCH_BRIDGE_URL": dead})
	err = svc.ValidateMode(t.Context(), mode)
	if want := "The bridge at " + dead + " is not reachable: "; !errdefs.IsUnavailable(err) || !strings.HasPrefix(fmtErr(err), want) {
		t.Errorf("ValidateMode with nothing listening: %v; want ErrUnavailable starting %q", err, want)
	}
}

// TestService_VaultFilesRefused: a conversation whose vault holds files is
// refused in cloudflare mode, by exec and by the agent tools alike, before
// any bridge is asked.
func TestService_VaultFilesRefused(t *testing.T) {
	t.Parallel()
	svc, _ := newService(t, map[string]string{"HUTCH_BRIDGE_URL": closedURL(t)})
	addr, err := office.NewAddress("slack", "C0FILES")
	if err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(t.TempDir(), "gcloud.json")
	if err := os.WriteFile(src, []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := svc.Vaults().PutFile(string(addr.Key()), "gcloud.json", src); err != nil {
		t.Fatal(err)
	}
	mode := sandbox.Mode{Kind: sandbox.KindCloudflare, Target: "box"}
	const want = `Sandbox type "cloudflare" does not support vault file mounts; keep credentials in vault env, or use image:* to project files`
	_, err = svc.Exec(t.Context(), service.ExecOptions{Address: addr, Mode: mode, Argv: []string{"true"}})
	if !errdefs.IsFailedPrecondition(err) || fmtErr(err) != want {
		t.Errorf("Exec with vault files: %v; want %q", err, want)
	}
	_, err = svc.ToolSandbox(t.Context(), addr, mode, "")
	if !errdefs.IsFailedPrecondition(err) || fmtErr(err) != want {
		t.Errorf("ToolSandbox with vault files: %v; want %q", err, want)
	}
}
