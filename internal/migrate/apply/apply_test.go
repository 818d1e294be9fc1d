package apply_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/migrate"
	"github.com/hutchsandbox/hutch/internal/migrate/apply"
	"github.com/hutchsandbox/hutch/internal/migrate/legacytest"
	"github.com/hutchsandbox/hutch/internal/office"
	"github.com/hutchsandbox/hutch/internal/vault"
)

type fixture struct {
	ws, state string
	reg       *office.Registry
}

func newFixture(t *testing.T, convs ...legacytest.Conversation) *fixture {
	t.Helper()
	root := t.TempDir()
	f := &fixture{ws: filepath.Join(root, "ws"), state: filepath.Join(root, "state")}
	for _, d := range []string{f.ws, f.state} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := legacytest.Populate(f.ws, f.state, convs); err != nil {
		t.Fatal(err)
	}
	f.reg = office.NewRegistry(f.state)
	return f
}

func (f *fixture) run(t *testing.T, enabled ...office.Platform) (apply.Report, error) {
	t.Helper()
	return apply.Run(context.Background(), apply.Options{Workspace: f.ws, StateDir: f.state, Registry: f.reg, Enabled: enabled, Batch: 2})
}

// snapshot hashes the whole workspace and state dir but the registry and
// its lock, to show that nothing else changed.
func (f *fixture) snapshot(t *testing.T) string {
	t.Helper()
	ws, err := legacytest.HashTree(f.ws)
	if err != nil {
		t.Fatal(err)
	}
	var parts []string
	for _, sub := range []string{"vaults", "conversations"} {
		if _, err := os.Stat(filepath.Join(f.state, sub)); err != nil {
			continue
		}
		h, err := legacytest.HashTree(filepath.Join(f.state, sub))
		if err != nil {
			t.Fatal(err)
		}
		parts = append(parts, h)
	}
	return ws + strings.Join(parts, ",")
}

func hash(t *testing.T, dir string) string {
	t.Helper()
	h, err := legacytest.HashTree(dir)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func officeDir(ws string, p office.Platform, id string) string {
	return office.Dir(ws, office.Address{Platform: p, ConversationID: id}.Key())
}

func TestRun_MovesEverythingByteIdentical(t *testing.T) {
	ids := []string{"C1", "C2", "D3", "E4", "F5"}
	var convs []legacytest.Conversation
	for _, id := range ids {
		convs = append(convs, legacytest.Conversation{RawID: id, Vault: true, State: true})
	}
	f := newFixture(t, convs...)
	for _, extra := range []string{"MEMORY.md", "skills/x.md", ".git/HEAD", "notes/readme.txt"} {
		p := filepath.Join(f.ws, extra)
		_ = os.MkdirAll(filepath.Dir(p), 0o700)
		if err := os.WriteFile(p, []byte("keep"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	before := map[string]string{}
	for _, id := range ids {
		before[id] = hash(t, filepath.Join(f.ws, id))
	}
	rep, err := f.run(t, office.PlatformSlack)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Moved != len(ids) || rep.HostMoved != 2*len(ids) {
		t.Errorf("moved %d, host moved %d; want %d and %d", rep.Moved, rep.HostMoved, len(ids), 2*len(ids))
	}
	for _, id := range ids {
		target := officeDir(f.ws, office.PlatformSlack, id)
		if got := hash(t, target); got != before[id] {
			t.Errorf("%s: tree changed in the move", id)
		}
		if _, err := os.Lstat(filepath.Join(f.ws, id)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: legacy directory still there (%v)", id, err)
		}
		k := string(office.Address{Platform: office.PlatformSlack, ConversationID: id}.Key())
		env, err := os.ReadFile(filepath.Join(f.state, "vaults", k, "env"))
		if err != nil || !strings.Contains(string(env), "secret-"+id) {
			t.Errorf("%s: vault not at the office key: %q %v", id, env, err)
		}
		if _, err := os.Stat(filepath.Join(f.state, "conversations", k, "settings.json")); err != nil {
			t.Errorf("%s: host state not at the office key: %v", id, err)
		}
		if _, err := os.Lstat(filepath.Join(f.state, "vaults", vault.ConversationKey(id))); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: legacy vault still there", id)
		}
	}
	for _, extra := range []string{"MEMORY.md", "skills/x.md", ".git/HEAD", "notes/readme.txt"} {
		if _, err := os.Stat(filepath.Join(f.ws, extra)); err != nil {
			t.Errorf("%s was touched: %v", extra, err)
		}
	}
	file, err := f.reg.Load()
	if err != nil {
		t.Fatal(err)
	}
	if len(file.Offices) != len(ids) || len(file.Migrations) != len(ids) {
		t.Fatalf("registry holds %d offices and %d migrations, want %d each", len(file.Offices), len(file.Migrations), len(ids))
	}
	for _, m := range file.Migrations {
		if m.Status != office.MigrationCommitted || m.OwnerPlatform != office.PlatformSlack {
			t.Errorf("record %+v, want committed for slack", m)
		}
	}
	if !slices.Equal(file.EnabledPlatforms, []office.Platform{office.PlatformSlack}) {
		t.Errorf("enabled platforms recorded %v", file.EnabledPlatforms)
	}

	// Idempotence: the second run changes nothing at all.
	snap := f.snapshot(t)
	reg, _ := os.ReadFile(f.reg.Path())
	rep, err = f.run(t, office.PlatformSlack)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Moved+rep.Recovered+rep.HostMoved != 0 || len(rep.Plan.Steps()) != 0 {
		t.Errorf("second run did something: %+v", rep)
	}
	reg2, _ := os.ReadFile(f.reg.Path())
	if f.snapshot(t) != snap || string(reg) != string(reg2) {
		t.Error("second run changed the trees or the registry")
	}
}

func TestRun_BlockersChangeNothing(t *testing.T) {
	tests := []struct {
		name    string
		enabled []office.Platform
		setup   func(t *testing.T, f *fixture)
		want    []string // lines the summary must hold
	}{
		{
			name:    "conflict_in_workspace",
			enabled: []office.Platform{office.PlatformSlack},
			setup: func(t *testing.T, f *fixture) {
				mustMkdir(t, officeDir(f.ws, office.PlatformSlack, "C1"))
			},
			want: []string{"Conflicts (both directories exist", "C1: merge " + filepath.Join("WS", "C1") + " into " + officeDir("WS", office.PlatformSlack, "C1")},
		},
		{
			name:    "conflict_in_vault",
			enabled: []office.Platform{office.PlatformSlack},
			setup: func(t *testing.T, f *fixture) {
				k := office.Address{Platform: office.PlatformSlack, ConversationID: "C1"}.Key()
				mustMkdir(t, filepath.Join(f.state, "vaults", string(k)))
			},
			want: []string{"C1: merge STATE/vaults/" + vault.ConversationKey("C1") + " into STATE/vaults/" + string(office.Address{Platform: office.PlatformSlack, ConversationID: "C1"}.Key())},
		},
		{
			name:    "conflict_in_host_state",
			enabled: []office.Platform{office.PlatformSlack},
			setup: func(t *testing.T, f *fixture) {
				k := office.Address{Platform: office.PlatformSlack, ConversationID: "C1"}.Key()
				mustMkdir(t, filepath.Join(f.state, "conversations", string(k)))
			},
			want: []string{"C1: merge STATE/conversations/C1 into STATE/conversations/" + string(office.Address{Platform: office.PlatformSlack, ConversationID: "C1"}.Key())},
		},
		{
			name:    "unowned",
			enabled: []office.Platform{office.PlatformTelegram, office.PlatformDiscord},
			setup: func(t *testing.T, f *fixture) {
				if err := legacytest.Populate(f.ws, f.state, []legacytest.Conversation{{RawID: "12345"}}); err != nil {
					t.Fatal(err)
				}
			},
			want: []string{"Unowned conversation directories", "12345  (WS/12345)", "hutch office claim <conversationId> <platform>"},
		},
		{
			name:    "symlink_in_root",
			enabled: []office.Platform{office.PlatformSlack},
			setup: func(t *testing.T, f *fixture) {
				if err := os.Symlink("/etc", filepath.Join(f.ws, "C9")); err != nil {
					t.Fatal(err)
				}
			},
			want: []string{"Workspace entry must not be a symlink: WS/C9"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, legacytest.Conversation{RawID: "C1", Vault: true, State: true}, legacytest.Conversation{RawID: "C2"})
			tc.setup(t, f)
			snap := f.snapshot(t)
			_, err := f.run(t, tc.enabled...)
			var blocked *apply.Blocked
			if !errors.As(err, &blocked) || !errdefs.IsFailedPrecondition(err) {
				t.Fatalf("err = %v, want a Blocked failed precondition", err)
			}
			msg := strings.NewReplacer(f.ws, "WS", f.state, "STATE").Replace(err.Error())
			if !strings.HasPrefix(msg, "Conversation office migration cannot complete:\n") {
				t.Errorf("message does not start with the headline:\n%s", msg)
			}
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("message lacks %q:\n%s", w, msg)
				}
			}
			if f.snapshot(t) != snap {
				t.Error("a blocked run changed the workspace or state")
			}
		})
	}
}

func mustMkdir(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
}

func TestRun_ReappearedStopsBoot(t *testing.T) {
	f := newFixture(t, legacytest.Conversation{RawID: "C1"})
	if _, err := f.run(t, office.PlatformSlack); err != nil {
		t.Fatal(err)
	}
	if err := legacytest.Populate(f.ws, f.state, []legacytest.Conversation{{RawID: "C1"}}); err != nil {
		t.Fatal(err)
	}
	snap := f.snapshot(t)
	_, err := f.run(t, office.PlatformSlack)
	if err == nil || !strings.Contains(err.Error(), "Legacy office directory reappeared after migration: "+filepath.Join(f.ws, "C1")) {
		t.Fatalf("err = %v, want the reappearance refused", err)
	}
	if f.snapshot(t) != snap {
		t.Error("the refused run changed something")
	}
}

func TestClaim_SettlesUnowned(t *testing.T) {
	f := newFixture(t, legacytest.Conversation{RawID: "12345", Vault: true})
	enabled := []office.Platform{office.PlatformDiscord, office.PlatformTelegram}
	if _, err := f.run(t, enabled...); err == nil {
		t.Fatal("an ambiguous id migrated without a claim")
	}
	file, _ := f.reg.Load()
	if len(file.Migrations) != 1 || file.Migrations[0].Status != office.MigrationNeedsOwner {
		t.Fatalf("journal %+v, want one needs-owner record", file.Migrations)
	}
	if err := apply.Claim(f.reg, f.ws, f.state, enabled, "12345", office.PlatformSlack); err == nil || !strings.Contains(err.Error(), "Owner platform slack is not enabled") {
		t.Errorf("claim for a disabled platform: %v", err)
	}
	if err := apply.Claim(f.reg, f.ws, f.state, enabled, "99999", office.PlatformDiscord); !errdefs.IsNotFound(err) {
		t.Errorf("claim of a missing directory: %v", err)
	}
	if err := apply.Claim(f.reg, f.ws, f.state, enabled, "12345", office.PlatformDiscord); err != nil {
		t.Fatal(err)
	}
	rep, err := f.run(t, enabled...)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Moved != 1 || rep.HostMoved != 1 {
		t.Errorf("report %+v, want the claimed directory and its vault moved", rep)
	}
	if _, err := os.Stat(filepath.Join(officeDir(f.ws, office.PlatformDiscord, "12345"), "log.jsonl")); err != nil {
		t.Error(err)
	}
	if err := apply.Claim(f.reg, f.ws, f.state, enabled, "12345", office.PlatformTelegram); err == nil {
		t.Error("a committed migration was claimed again")
	}
}

func TestRun_DryRunTouchesNothing(t *testing.T) {
	f := newFixture(t, legacytest.Conversation{RawID: "C1", Vault: true, State: true})
	snap := f.snapshot(t)
	rep, err := apply.Run(context.Background(), apply.Options{Workspace: f.ws, StateDir: f.state, Registry: f.reg, Enabled: []office.Platform{office.PlatformSlack}, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := len(rep.Plan.Steps()); got != 3 {
		t.Errorf("dry run planned %d steps, want 3: %v", got, rep.Plan.Steps())
	}
	if f.snapshot(t) != snap {
		t.Error("dry run changed the trees")
	}
	for _, name := range []string{"office-registry.json", ".office-registry.lock"} {
		if _, err := os.Lstat(filepath.Join(f.state, name)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("dry run created %s", name)
		}
	}
}

func TestRun_RecoversMovingRecords(t *testing.T) {
	f := newFixture(t, legacytest.Conversation{RawID: "C1"}, legacytest.Conversation{RawID: "C2"}, legacytest.Conversation{RawID: "C3"}, legacytest.Conversation{RawID: "C4"})
	want := map[string]string{}
	for _, id := range []string{"C1", "C2", "C3", "C4"} {
		want[id] = hash(t, filepath.Join(f.ws, id))
	}
	// A run that died mid-batch: C1 renamed, C2 not yet, C3 with both
	// directories present, C4 with neither.
	if err := os.Rename(filepath.Join(f.ws, "C1"), officeDir(f.ws, office.PlatformSlack, "C1")); err != nil {
		t.Fatal(err)
	}
	mustMkdir(t, officeDir(f.ws, office.PlatformSlack, "C3"))
	if err := os.RemoveAll(filepath.Join(f.ws, "C4")); err != nil {
		t.Fatal(err)
	}
	err := f.reg.Update(func(file *office.File) error {
		file.EnabledPlatforms = []office.Platform{office.PlatformSlack}
		for _, id := range []string{"C1", "C2", "C3", "C4"} {
			file.Migrations = append(file.Migrations, office.MigrationRecord{
				RawConversationID: id, WorkspaceRoot: f.ws, SourceDir: filepath.Join(f.ws, id),
				OwnerPlatform: office.PlatformSlack, TargetDir: officeDir(f.ws, office.PlatformSlack, id), Status: office.MigrationMoving,
			})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.run(t, office.PlatformSlack)
	if err == nil {
		t.Fatal("both-present and neither-present moves did not stop the run")
	}
	for _, w := range []string{"C3: merge", "C4: Neither legacy source nor office target exists"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("message lacks %q:\n%v", w, err)
		}
	}
	// The operator resolves C3 by hand (the office copy was empty).
	if err := os.Remove(officeDir(f.ws, office.PlatformSlack, "C3")); err != nil {
		t.Fatal(err)
	}
	if _, err := f.run(t, office.PlatformSlack); err == nil || !strings.Contains(err.Error(), "C4: Neither") {
		t.Fatalf("the failed record is not reported any more: %v", err)
	}
	file, _ := f.reg.Load()
	for _, m := range file.Migrations {
		switch m.RawConversationID {
		case "C4":
			if m.Status != office.MigrationFailed {
				t.Errorf("C4 is %s, want failed", m.Status)
			}
		default:
			if m.Status != office.MigrationMoving {
				t.Errorf("%s is %s; a blocked run must leave it moving", m.RawConversationID, m.Status)
			}
		}
	}
	// C4 is gone for good; the operator drops it from the journal by
	// hand. Everything else then finishes.
	err = f.reg.Update(func(file *office.File) error {
		file.Migrations = slices.DeleteFunc(file.Migrations, func(m office.MigrationRecord) bool { return m.RawConversationID == "C4" })
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := f.run(t, office.PlatformSlack)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Recovered != 3 {
		t.Errorf("recovered %d, want 3", rep.Recovered)
	}
	for _, id := range []string{"C1", "C2", "C3"} {
		if got := hash(t, officeDir(f.ws, office.PlatformSlack, id)); got != want[id] {
			t.Errorf("%s differs after recovery", id)
		}
	}
}

func TestBlockedSummaryIsThePlans(t *testing.T) {
	p := migrate.Plan{Unowned: []migrate.Unowned{{Area: migrate.AreaWorkspace, RawID: "1", Source: "/ws/1"}}}
	b := &apply.Blocked{Plan: p}
	if b.Error() != p.Summary() {
		t.Errorf("Blocked.Error() = %q", b.Error())
	}
}

// TestRun_SanitizedVaults: vaults the oldest releases named by the
// sanitized raw id move to the office vault with their conversation; one
// whose name several conversations share stops the migration with the
// vault where it was, and nothing moved.
func TestRun_SanitizedVaults(t *testing.T) {
	t.Run("moved", func(t *testing.T) {
		f := newFixture(t, legacytest.Conversation{RawID: "C0123ABC", SanitizedVault: true}, legacytest.Conversation{RawID: "-100200", SanitizedVault: true})
		old := filepath.Join(f.state, "vaults", legacytest.SanitizedName("C0123ABC"))
		if _, err := os.Stat(old); err != nil {
			t.Fatalf("fixture: %v", err)
		}
		rep, err := f.run(t, office.PlatformSlack, office.PlatformTelegram)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Moved != 2 || rep.HostMoved != 2 {
			t.Errorf("moved %d, host moved %d; want 2 and 2", rep.Moved, rep.HostMoved)
		}
		for id, p := range map[string]office.Platform{"C0123ABC": office.PlatformSlack, "-100200": office.PlatformTelegram} {
			k := office.Address{Platform: p, ConversationID: id}.Key()
			got, err := os.ReadFile(filepath.Join(f.state, "vaults", string(k), "env"))
			if err != nil || string(got) != "TOKEN=old-"+id+"\n" {
				t.Errorf("office vault of %s: %q, %v", id, got, err)
			}
			if _, err := os.Lstat(filepath.Join(f.state, "vaults", legacytest.SanitizedName(id))); err == nil {
				t.Errorf("the sanitized vault of %s was left behind", id)
			}
		}
	})
	t.Run("shared_name_blocks", func(t *testing.T) {
		f := newFixture(t, legacytest.Conversation{RawID: "Team.Chat", SanitizedVault: true}, legacytest.Conversation{RawID: "team-chat"})
		before := f.snapshot(t)
		_, err := f.run(t, office.PlatformWeb)
		var blocked *apply.Blocked
		if !errors.As(err, &blocked) {
			t.Fatalf("err = %v, want a blocked run", err)
		}
		if want := "Legacy vault of several conversations: " + filepath.Join(f.state, "vaults", "team-chat") + " (Team.Chat, team-chat)"; !slices.Contains(blocked.Plan.Blockers(), want) {
			t.Errorf("blockers %q lack %q", blocked.Plan.Blockers(), want)
		}
		if f.snapshot(t) != before {
			t.Error("a blocked run changed the workspace or the state dir")
		}
	})
	t.Run("orphan_blocks", func(t *testing.T) {
		f := newFixture(t, legacytest.Conversation{RawID: "C1"})
		if err := legacytest.Populate(t.TempDir(), f.state, []legacytest.Conversation{{RawID: "C9", SanitizedVault: true}}); err != nil {
			t.Fatal(err)
		}
		_, err := f.run(t, office.PlatformSlack)
		if err == nil || !strings.Contains(err.Error(), "  "+filepath.Join(f.state, "vaults", "c9")+"  (no known conversation)\n") {
			t.Errorf("err = %v, want the orphaned vault named", err)
		}
	})
}

// TestForgetFailed: a failed record of a conversation that is gone
// ("Neither legacy source nor office target exists") stops every
// migration, and a claim cannot retry it; ForgetFailed clears it under
// the registry's lock, says what it cleared, and removes nothing else.
func TestForgetFailed(t *testing.T) {
	f := newFixture(t)
	slack := office.PlatformSlack
	at := f.reg.Now()
	rec := func(id string, st office.MigrationStatus) office.MigrationRecord {
		return office.MigrationRecord{RawConversationID: id, SourceDir: filepath.Join(f.ws, id), WorkspaceRoot: f.ws,
			OwnerPlatform: slack, TargetDir: officeDir(f.ws, slack, id), Status: st, UpdatedAt: at}
	}
	// C1's move was interrupted and both its directories are gone since;
	// C3 moved; C4 is claimed, waiting for the next run.
	if err := f.reg.Update(func(file *office.File) error {
		file.EnabledPlatforms = []office.Platform{slack}
		file.Migrations = append(file.Migrations, rec("C1", office.MigrationMoving), rec("C3", office.MigrationCommitted))
		file.Offices = append(file.Offices, office.OfficeRecord{Platform: slack, ConversationID: "C3", RecordedAt: at})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.run(t, slack); err == nil || !strings.Contains(err.Error(), "C1: Neither legacy source nor office target exists") {
		t.Fatalf("first run: %v", err)
	}
	if _, err := f.run(t, slack); err == nil {
		t.Fatal("a failed record did not stop the next run")
	}
	before, err := os.ReadFile(f.reg.Path())
	if err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name  string
		ids   []string
		class error
		want  string
	}{
		{"unknown", []string{"C9"}, errdefs.ErrNotFound, `No migration of "C9" is recorded for workspace ` + f.ws},
		{"committed", []string{"C1", "C3"}, errdefs.ErrFailedPrecondition, `The migration of "C3" is committed, not failed; only failed records are forgotten`},
		{"invalid", []string{"a/b"}, errdefs.ErrInvalid, "Conversation id must not contain path separators or control characters"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := apply.ForgetFailed(f.reg, f.ws, tc.ids)
			if err == nil || err.Error() != tc.want || !errors.Is(err, tc.class) {
				t.Errorf("err = %v, want %v %q", err, tc.class, tc.want)
			}
		})
	}
	if after, _ := os.ReadFile(f.reg.Path()); string(after) != string(before) {
		t.Error("a refused ForgetFailed changed the registry")
	}

	// It waits for the lock like every writer.
	held, release := make(chan struct{}), make(chan struct{})
	go func() {
		_ = f.reg.Hold(func(*office.Journal) error { close(held); <-release; return nil })
	}()
	<-held
	locked := office.NewRegistry(f.state)
	locked.LockTimeout = 200 * time.Millisecond
	if _, err := apply.ForgetFailed(locked, f.ws, nil); !errdefs.IsUnavailable(err) {
		t.Errorf("with the lock held: %v, want unavailable", err)
	}
	close(release)

	removed, err := apply.ForgetFailed(f.reg, f.ws, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) != 1 || removed[0].RawConversationID != "C1" || removed[0].Error != migrate.MsgNeitherExists {
		t.Errorf("removed %+v, want C1's failed record", removed)
	}
	file, err := f.reg.Load()
	if err != nil {
		t.Fatal(err)
	}
	if len(file.Migrations) != 1 || file.Migrations[0].RawConversationID != "C3" || len(file.Offices) != 1 {
		t.Errorf("left %+v and offices %+v; want C3's committed record and office only", file.Migrations, file.Offices)
	}
	if _, err := f.run(t, slack); err != nil {
		t.Errorf("the run after forgetting: %v", err)
	}
	if removed, err := apply.ForgetFailed(f.reg, f.ws, nil); err != nil || len(removed) != 0 {
		t.Errorf("forgetting again: %v, %v", removed, err)
	}
}
