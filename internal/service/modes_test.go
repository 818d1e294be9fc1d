package service_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/office"
	"github.com/hutchsandbox/hutch/internal/projection"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/sandbox/mock"
	"github.com/hutchsandbox/hutch/internal/service"
	"github.com/hutchsandbox/hutch/internal/tools"
)

// Every kind of sandbox.Kinds runs in this build.
func TestModes_EveryKindRuns(t *testing.T) {
	for _, k := range sandbox.Kinds {
		if !service.Runnable(sandbox.Mode{Kind: k}) {
			t.Errorf("kind %s has no entry in the mode table", k)
		}
	}
	if service.Runnable(sandbox.Mode{Kind: "docker"}) {
		t.Error("an unknown kind is runnable")
	}
}

// TestToolSandbox_ManagedProjection: in a managed mode (a mock of
// image:), the tools reach exactly the door policy's projection through
// the mode's Files: the office read-write, MEMORY.md read-only under
// shared-private, nothing else; a command sees the same files. No engine
// is needed: the service's wiring of mounts and roots is under test.
func TestToolSandbox_ManagedProjection(t *testing.T) {
	svc := newService(t)
	mode := sandbox.Mode{Kind: sandbox.KindImage, Target: "busybox"}
	rt := mock.New(mock.Config{Mode: mode})
	svc.SetRuntime(mode, rt)
	addr, err := office.NewAddress("slack", "C0MOCK")
	if err != nil {
		t.Fatal(err)
	}
	door, err := projection.ParseDoorWord("shared-private")
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.SetDoor(t.Context(), addr, door); err != nil {
		t.Fatal(err)
	}
	ws := svc.Layout().Workspace
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "MEMORY.md"), []byte("shared memory\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	sb, err := svc.ToolSandbox(ctx, addr, mode, "")
	if err != nil {
		t.Fatal(err)
	}
	key := string(addr.Key())
	if sb.Office() != "/workspace/"+key || !strings.Contains(strings.Join(sb.Roots(), " "), "/workspace/MEMORY.md") {
		t.Errorf("office %s, roots %q", sb.Office(), sb.Roots())
	}
	if _, err := tools.Write(ctx, sb, tools.WriteInput{Path: "notes.md", Content: "mine\n"}); err != nil {
		t.Errorf("write in the office: %v", err)
	}
	if got, err := os.ReadFile(filepath.Join(ws, key, "notes.md")); err != nil || string(got) != "mine\n" {
		t.Errorf("the office on the host holds %q, %v", got, err)
	}
	out, err := tools.Read(ctx, sb, tools.ReadInput{Path: "/workspace/MEMORY.md"})
	if err != nil || out.Text != "shared memory" {
		t.Errorf("read MEMORY.md: %q, %v", out.Text, err)
	}
	_, err = tools.Write(ctx, sb, tools.WriteInput{Path: "/workspace/MEMORY.md", Content: "overwritten"})
	if !errdefs.IsFailedPrecondition(err) || err.Error() != "Cannot write /workspace/MEMORY.md: read-only file system" {
		t.Errorf("write MEMORY.md under shared-private: %v; want the read-only refusal", err)
	}
	_, err = tools.Read(ctx, sb, tools.ReadInput{Path: "/workspace/other-office/x"})
	if !errdefs.IsFailedPrecondition(err) {
		t.Errorf("read another office: %v; want the outside refusal", err)
	}
	bash, err := tools.Bash(ctx, sb, tools.BashInput{Command: "cat notes.md"})
	if err != nil || bash.Text != "mine" {
		t.Errorf("bash sees %q, %v", bash.Text, err)
	}
	// The lifecycle the API, chat and the portal use is the mock's.
	m, err := svc.ManagedFor(ctx, mode)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := m.Status(ctx, key); err != nil || st.State != sandbox.StateRunning || st.Name != mock.Name(key) {
		t.Errorf("status: %+v, %v", st, err)
	}
}
