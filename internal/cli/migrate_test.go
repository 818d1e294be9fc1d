package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/hutchsandbox/hutch/internal/migrate/legacytest"
)

// TestMigrate_Flow walks an operator through a workspace of the raw-id
// layout: the dry run, a start refused with its instructions, the journal
// in office list, a claim, the migration, and what is printed at each
// step.
func TestMigrate_Flow(t *testing.T) {
	e := newEnv(t)
	ws := filepath.Join(e.state, "workspace")
	if err := legacytest.Populate(ws, e.state, []legacytest.Conversation{{RawID: "C1"}, {RawID: "12345"}, {RawID: "-100200"}}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "MEMORY.md"), []byte("shared"), 0o600); err != nil {
		t.Fatal(err)
	}
	paths := strings.NewReplacer(ws, "WS")
	c1, k12345, ktg := key(t, "slack", "C1"), key(t, "discord", "12345"), key(t, "telegram", "-100200")

	// A plan with a blocker exits 1, so a script cannot take it for one
	// that runs.
	out, errOut, code := e.run("", "migrate", "--dry-run", "--platforms", "slack,telegram,discord")
	if code != 1 || !strings.HasSuffix(errOut, "hutch: 1 blocker: hutch migrate would stop without moving anything.\n") {
		t.Errorf("dry run with a blocker: exit %d, stderr %q; want 1 and the count", code, errOut)
	}
	want := `Migration plan for WS (enabled platforms: discord, slack, telegram)
Moves (2):
  move    -100200: WS/-100200 -> WS/` + ktg + ` (telegram)
  move    C1: WS/C1 -> WS/` + c1 + ` (slack)
Left alone (1):
  MEMORY.md  (reserved workspace name)
Conversation office migration cannot complete:
Unowned conversation directories (no single enabled platform's id format matches):
  12345  (WS/12345)
  Fix: with the daemon stopped, run ` + "`hutch office claim <conversationId> <platform>`" + ` for each; the next start performs the move.
Nothing will move until every blocker is resolved.
`
	if diff := cmp.Diff(want, paths.Replace(out)); diff != "" {
		t.Errorf("dry run (-want +got):\n%s", diff)
	}
	if _, err := os.Stat(filepath.Join(ws, "C1")); err != nil {
		t.Fatalf("the dry run moved C1: %v", err)
	}

	// hutch serve refuses to start, before it listens, with the summary.
	_, errOut, code = e.run("", "serve", "--platforms", "slack,telegram,discord")
	if code == 0 || !strings.Contains(errOut, "hutch: Conversation office migration cannot complete:\n") || !strings.Contains(errOut, "  12345  (") {
		t.Fatalf("serve with an unowned directory: exit %d\n%s", code, errOut)
	}
	if _, err := os.Stat(filepath.Join(e.state, "hutch.sock")); err == nil {
		t.Error("serve opened its socket before the migration could complete")
	}

	out = e.ok("office", "list")
	if !strings.Contains(out, "Pending migrations (1):\n") || !strings.Contains(paths.Replace(out), "needs-owner  12345         -      WS/12345") {
		t.Errorf("office list:\n%s", out)
	}

	e.ok("office", "platforms", "slack,telegram,discord")
	if out := e.ok("office", "platforms"); out != "discord,slack,telegram\n" {
		t.Errorf("office platforms = %q", out)
	}
	if _, errOut, code := e.run("", "office", "claim", "12345", "github"); code == 0 || !strings.Contains(errOut, "Owner platform github is not enabled (enabled: discord,slack,telegram)") {
		t.Errorf("claim for a disabled platform: %d %s", code, errOut)
	}
	if out := e.ok("office", "claim", "12345", "discord"); out != "Claimed 12345 for discord; the next start (or hutch migrate) moves it to its office.\n" {
		t.Errorf("claim printed %q", out)
	}
	if out := e.ok("migrate", "--dry-run"); !strings.Contains(out, "Moves (3):\n") || strings.Contains(out, "cannot complete") {
		t.Errorf("dry run without blockers:\n%s", out)
	}

	out = e.ok("migrate")
	if want := "Migrated 3 conversation directories to offices (0 finished from an interrupted run), 0 vault and host state directories.\n"; out != want {
		t.Errorf("migrate printed %q, want %q", out, want)
	}
	for _, k := range []string{c1, k12345, ktg} {
		if _, err := os.Stat(filepath.Join(ws, k, "log.jsonl")); err != nil {
			t.Error(err)
		}
	}
	if out := e.ok("migrate"); out != "Nothing to migrate: the workspace is on the office layout.\n" {
		t.Errorf("second migrate printed %q", out)
	}
	if out := e.ok("office", "list"); strings.Contains(out, "Pending") || !strings.Contains(out, "Offices (3):") {
		t.Errorf("office list after the migration:\n%s", out)
	}
}

// TestMigrate_NoPlatforms: with no platform enabled every directory is
// unowned, and a claim would be refused (its platform must be enabled):
// the plan says to enable the platforms first and does not send the
// operator to claim.
func TestMigrate_NoPlatforms(t *testing.T) {
	e := newEnv(t)
	ws := filepath.Join(e.state, "workspace")
	if err := legacytest.Populate(ws, e.state, []legacytest.Conversation{{RawID: "C1"}}); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := e.run("", "migrate", "--dry-run")
	want := `Migration plan for WS (enabled platforms: none)
No moves.
Conversation office migration cannot complete:
Unowned conversation directories (no platform is enabled, so none has an owner):
  C1  (WS/C1)
  Fix: first enable the platforms this workspace served, with ` + "`hutch office platforms <platform>,...`" + ` (or --platforms for one run), then migrate again.
Nothing will move until every blocker is resolved.
`
	if diff := cmp.Diff(want, strings.ReplaceAll(out, ws, "WS")); diff != "" || code != 1 {
		t.Errorf("dry run with no platform: exit %d, stderr %q (-want +got):\n%s", code, errOut, diff)
	}
	_, errOut, code = e.run("", "migrate")
	if code == 0 || strings.Contains(errOut, "office claim") || !strings.Contains(errOut, "hutch office platforms <platform>,...") {
		t.Errorf("migrate with no platform: exit %d\n%s", code, errOut)
	}
	e.ok("office", "platforms", "slack")
	if out := e.ok("migrate"); !strings.HasPrefix(out, "Migrated 1 conversation directory") {
		t.Errorf("migrate once slack is enabled: %q", out)
	}
}
