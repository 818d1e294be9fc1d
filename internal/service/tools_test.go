package service_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hutchsandbox/hutch/internal/agent"
	"github.com/hutchsandbox/hutch/internal/engine"
	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/office"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/service"
	"github.com/hutchsandbox/hutch/internal/testenv"
	"github.com/hutchsandbox/hutch/internal/tools"
)

// TestToolSandbox_ImageMode drives the tools against a managed container:
// files go through the agent, confined to the projection.
func TestToolSandbox_ImageMode(t *testing.T) {
	cli := testenv.Docker(t)
	img := testenv.BusyboxImage(t, cli)
	run, err := os.MkdirTemp("", "hr-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = agent.RemoveSocketDir(run) }) // sealed socket dirs included
	state := filepath.Join(t.TempDir(), "state")
	layout, err := service.ResolveLayout(service.LayoutOptions{StateDir: state, Getenv: func(k string) string {
		if k == "HUTCH_RUN_DIR" {
			return run
		}
		return ""
	}})
	if err != nil {
		t.Fatal(err)
	}
	testenv.CleanupContainers(t, cli, engine.LabelStateDir+"="+layout.StateDir)
	svc := service.New(layout, nil)
	svc.SetAgentBinary(testenv.HutchBinary(t))
	t.Cleanup(func() { _ = svc.Close() })
	addr, err := office.NewAddress("web", testenv.Name(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	sb, err := svc.ToolSandbox(ctx, addr, sandbox.Mode{Kind: sandbox.KindImage, Target: img}, "")
	if err != nil {
		t.Fatal(err)
	}
	if want := "/workspace/" + string(addr.Key()); sb.Office() != want {
		t.Errorf("Office() = %q, want %q", sb.Office(), want)
	}
	if _, err := tools.Write(ctx, sb, tools.WriteInput{Path: "src/main.txt", Content: "alpha\nbeta\n"}); err != nil {
		t.Fatal(err)
	}
	if _, err := tools.Edit(ctx, sb, tools.EditInput{Path: "src/main.txt", OldText: "beta", NewText: "gamma"}); err != nil {
		t.Fatal(err)
	}
	out, err := tools.Bash(ctx, sb, tools.BashInput{Command: "cat src/main.txt; ln -s /etc/passwd escape"})
	if err != nil || out.Text != "alpha\ngamma" {
		t.Fatalf("bash: %q, %v", out.Text, err)
	}
	// The office is shared with the host: the file is there too.
	if data, err := os.ReadFile(filepath.Join(layout.Workspace, string(addr.Key()), "src", "main.txt")); err != nil || string(data) != "alpha\ngamma\n" {
		t.Errorf("host view of the office: %q, %v", data, err)
	}
	for _, p := range []string{"escape", "/etc/passwd", "../x"} {
		_, err := tools.Read(ctx, sb, tools.ReadInput{Path: p})
		if !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), "outside the sandbox's workspace") {
			t.Errorf("read %s: %v; want the outside-the-workspace refusal", p, err)
		}
	}
}
