package service_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/hutchsandbox/hutch/internal/migrate/legacytest"
	"github.com/hutchsandbox/hutch/internal/office"
	"github.com/hutchsandbox/hutch/internal/service"
)

// TestAttack_PlantedLegacyDirs: after the workspace was migrated, a
// conversation whose door grants the workspace makes directories shaped
// like raw ids: one of a conversation that was migrated (a conflict, which
// would stop every later start) and one of a conversation that has no
// office yet (whose files would be moved into that office when it came).
// A daemon's start must neither stop nor move them; the operator's
// `hutch migrate` still sees them.
func TestAttack_PlantedLegacyDirs(t *testing.T) {
	root := t.TempDir()
	layout, err := service.ResolveLayout(service.LayoutOptions{StateDir: filepath.Join(root, "state"), Workspace: filepath.Join(root, "ws"), Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{layout.StateDir, layout.Workspace} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	svc := service.New(layout, nil)
	slack := []office.Platform{office.PlatformSlack}
	ctx := context.Background()
	if err := legacytest.Populate(layout.Workspace, layout.StateDir, []legacytest.Conversation{{RawID: "C0LEGACY01"}}); err != nil {
		t.Fatal(err)
	}
	rep, err := svc.Migrate(ctx, service.MigrateOptions{Platforms: slack, Startup: true})
	if err != nil || rep.Moved != 1 {
		t.Fatalf("the first start's migration: %+v, %v", rep.Report, err)
	}

	// What the agent plants, through its view of the workspace.
	for _, d := range []string{"C0LEGACY01", "C0FUTURE99"} {
		if err := os.MkdirAll(filepath.Join(layout.Workspace, d), 0o755); err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{"planted.txt", "log.jsonl"} { // a log makes it look like a conversation
			if err := os.WriteFile(filepath.Join(layout.Workspace, d, f), []byte("from the agent\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	rep, err = svc.Migrate(ctx, service.MigrateOptions{Platforms: slack, Startup: true})
	if err != nil {
		t.Fatalf("a start after the planting stopped: %v", err)
	}
	if !rep.Skipped || rep.Moved != 0 {
		t.Errorf("a start after the planting: skipped %v, moved %d; want it to leave the workspace alone", rep.Skipped, rep.Moved)
	}
	future := office.Address{Platform: office.PlatformSlack, ConversationID: "C0FUTURE99"}
	if _, err := os.Stat(filepath.Join(layout.Workspace, string(future.Key()), "planted.txt")); err == nil {
		t.Errorf("the planted files were moved into the office of a conversation that has not started")
	}
	// The operator looks on purpose.
	rep, err = svc.Migrate(ctx, service.MigrateOptions{Platforms: slack, DryRun: true})
	if err != nil || len(rep.Plan.Blockers()) == 0 || len(rep.Plan.Moves) == 0 {
		t.Errorf("hutch migrate --dry-run does not see the planted directories: %+v, %v", rep.Plan, err)
	}
}
