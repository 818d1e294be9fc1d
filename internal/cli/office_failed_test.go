package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hutchsandbox/hutch/internal/migrate/legacytest"
	"github.com/hutchsandbox/hutch/internal/office"
)

// TestOfficeForgetFailed: a migration interrupted while moving, whose
// directories are both gone since, is recorded failed and stops every
// migration; `hutch office forget-failed` clears it (and refuses a record
// that did not fail), after which the migration runs.
func TestOfficeForgetFailed(t *testing.T) {
	e := newEnv(t)
	ws := filepath.Join(e.state, "workspace")
	if err := legacytest.Populate(ws, e.state, []legacytest.Conversation{{RawID: "C1"}, {RawID: "C2"}}); err != nil {
		t.Fatal(err)
	}
	e.ok("office", "platforms", "slack")
	e.ok("migrate")
	// C1 is recorded moving again, as a run killed mid-move leaves it,
	// and its office directory is gone: neither exists.
	reg := office.NewRegistry(e.state)
	if err := reg.Update(func(f *office.File) error {
		for i, m := range f.Migrations {
			if m.RawConversationID == "C1" {
				f.Migrations[i].Status = office.MigrationMoving
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(ws, key(t, "slack", "C1"))); err != nil {
		t.Fatal(err)
	}
	_, errOut, code := e.run("", "migrate")
	if code == 0 || !strings.Contains(errOut, "  C1: Neither legacy source nor office target exists\n") ||
		!strings.Contains(errOut, "clear its record with `hutch office forget-failed <conversationId>`") {
		t.Fatalf("migrate with the record gone astray: exit %d\n%s", code, errOut)
	}

	if _, errOut, code := e.run("", "office", "forget-failed", "C2"); code != 1 ||
		errOut != `hutch: The migration of "C2" is committed, not failed; only failed records are forgotten`+"\n" {
		t.Errorf("forget-failed of a committed record: exit %d %q", code, errOut)
	}
	if _, errOut, code := e.run("", "office", "forget-failed", "C7"); code != 1 ||
		errOut != `hutch: No migration of "C7" is recorded for workspace `+ws+"\n" {
		t.Errorf("forget-failed of an unknown id: exit %d %q", code, errOut)
	}
	out := e.ok("office", "forget-failed", "C1")
	if want := "Forgot the failed migration of C1 (" + filepath.Join(ws, "C1") + "): Neither legacy source nor office target exists\n"; out != want {
		t.Errorf("forget-failed printed %q, want %q", out, want)
	}
	if out := e.ok("office", "forget-failed"); out != "No failed migrations recorded for "+ws+".\n" {
		t.Errorf("forget-failed with nothing failed printed %q", out)
	}
	if out := e.ok("office", "list"); strings.Contains(out, "Pending") || !strings.Contains(out, "Offices (2):") {
		t.Errorf("office list after forgetting: C2's record and both offices must stay\n%s", out)
	}
	if out := e.ok("migrate"); out != "Nothing to migrate: the workspace is on the office layout.\n" {
		t.Errorf("migrate after forgetting printed %q", out)
	}
}

func TestOfficeForgetFailed_Help(t *testing.T) {
	e := newEnv(t)
	golden(t, filepath.Join("testdata", "help", "hutch_office_forget-failed.golden"), e.ok("office", "forget-failed", "--help"))
}
