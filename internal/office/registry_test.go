package office_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/office"
)

var testClock = time.Date(2026, 3, 4, 5, 6, 7, 891_000_000, time.FixedZone("CET", 3600))

func newTestRegistry(t *testing.T) (*office.Registry, string) {
	t.Helper()
	state := t.TempDir()
	reg := office.NewRegistry(state)
	reg.Clock = func() time.Time { return testClock }
	return reg, state
}

func mustAddress(t *testing.T, s string) office.Address {
	t.Helper()
	a, err := office.ParseAddress(s)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestRegistry_Load_Missing(t *testing.T) {
	reg, _ := newTestRegistry(t)
	f, err := reg.Load()
	checkErr(t, err, "", nil)
	want := &office.File{Version: 1, EnabledPlatforms: []office.Platform{}, Offices: []office.OfficeRecord{}, Migrations: []office.MigrationRecord{}}
	if diff := cmp.Diff(want, f); diff != "" {
		t.Errorf("Load mismatch (-want +got):\n%s", diff)
	}
}

func TestRegistry_Record(t *testing.T) {
	reg, state := newTestRegistry(t)
	for _, s := range []string{"slack/C0123ABC", "discord/42", "slack/<a&b>"} {
		added, err := reg.Record(mustAddress(t, s))
		checkErr(t, err, "", nil)
		if !added {
			t.Errorf("Record(%s) added = false on first call", s)
		}
	}
	added, err := reg.Record(mustAddress(t, "slack/C0123ABC"))
	checkErr(t, err, "", nil)
	if added {
		t.Error("Record of a recorded office added = true, want false")
	}

	path := filepath.Join(state, "office-registry.json")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// Sorted by platform then id, UTC seconds, HTML characters unescaped,
	// two-space indent, final newline.
	want := `{
  "version": 1,
  "enabledPlatforms": [],
  "offices": [
    {
      "platform": "discord",
      "conversationId": "42",
      "recordedAt": "2026-03-04T04:06:07Z"
    },
    {
      "platform": "slack",
      "conversationId": "<a&b>",
      "recordedAt": "2026-03-04T04:06:07Z"
    },
    {
      "platform": "slack",
      "conversationId": "C0123ABC",
      "recordedAt": "2026-03-04T04:06:07Z"
    }
  ],
  "migrations": []
}
`
	if diff := cmp.Diff(want, string(data)); diff != "" {
		t.Errorf("registry file mismatch (-want +got):\n%s", diff)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("registry mode got %o, want 600", fi.Mode().Perm())
	}
	if _, err := os.Lstat(filepath.Join(state, ".office-registry.lock")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("lock directory left behind: %v", err)
	}
}

func TestRegistry_Record_Invalid(t *testing.T) {
	reg, state := newTestRegistry(t)
	_, err := reg.Record(office.Address{Platform: office.PlatformSlack, ConversationID: "../x"})
	checkErr(t, err, msgSeparator, errdefs.ErrInvalid)
	if _, err := os.Stat(filepath.Join(state, "office-registry.json")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("registry written for an invalid address: %v", err)
	}
}

func TestRegistry_Offices_And_Lookup(t *testing.T) {
	reg, _ := newTestRegistry(t)
	for _, s := range []string{"web/b", "slack/z", "discord/9", "slack/a"} {
		if _, err := reg.Record(mustAddress(t, s)); err != nil {
			t.Fatal(err)
		}
	}
	recs, err := reg.Offices()
	checkErr(t, err, "", nil)
	var got []string
	for _, r := range recs {
		got = append(got, r.Address().String())
	}
	if diff := cmp.Diff([]string{"discord/9", "slack/a", "slack/z", "web/b"}, got); diff != "" {
		t.Errorf("Offices order mismatch (-want +got):\n%s", diff)
	}

	a := mustAddress(t, "slack/z")
	back, ok, err := reg.Lookup(a.Key())
	checkErr(t, err, "", nil)
	if !ok || back != a {
		t.Errorf("Lookup(%s) got %v, %v; want %v, true", a.Key(), back, ok, a)
	}
	_, ok, err = reg.Lookup(mustAddress(t, "slack/unknown").Key())
	checkErr(t, err, "", nil)
	if ok {
		t.Error("Lookup of an unrecorded key found something")
	}
}

func TestRegistry_Load_Invalid(t *testing.T) {
	const office1 = `{"platform": "slack", "conversationId": "C1", "recordedAt": "2026-01-02T03:04:05.678Z"}`
	migration := func(status, owner string) string {
		return `{"rawConversationId": "C1", "sourceDir": "/ws/C1", "workspaceRoot": "/ws", "ownerPlatform": "` + owner + `", "status": "` + status + `", "updatedAt": "2026-01-02T03:04:05Z"}`
	}
	tests := []struct {
		name    string
		content string
		want    string // %s is the registry path
	}{
		{"version_2", `{"version": 2}`, "Invalid office registry version at %s"},
		{"version_missing", `{"offices": []}`, "Invalid office registry version at %s"},
		{"duplicate_office", `{"version": 1, "offices": [` + office1 + `,` + office1 + `]}`, "Duplicate office record in %s"},
		{"unknown_office_platform", `{"version": 1, "offices": [{"platform": "irc", "conversationId": "x", "recordedAt": "2026-01-02T03:04:05Z"}]}`, `Unknown platform "irc" in office registry %s`},
		{"unknown_enabled_platform", `{"version": 1, "enabledPlatforms": ["slack", "irc"]}`, `Unknown platform "irc" in office registry %s`},
		{"unknown_owner_platform", `{"version": 1, "migrations": [` + migration("prepared", "irc") + `]}`, `Unknown platform "irc" in office registry %s`},
		{"unknown_status", `{"version": 1, "migrations": [` + migration("done", "slack") + `]}`, `Unknown office migration status "done" in %s`},
		{"bad_conversation_id", `{"version": 1, "offices": [{"platform": "slack", "conversationId": "a/b", "recordedAt": "2026-01-02T03:04:05Z"}]}`, `Invalid conversation id "a/b" in office registry %s: ` + msgSeparator},
		{"needs_owner_with_owner", `{"version": 1, "migrations": [` + migration("needs-owner", "slack") + `]}`, `Needs-owner migration cannot have an owner or target ("C1" in %s)`},
		{"target_of_another_office", `{"version": 1, "migrations": [` + migration("prepared", "slack") + `]}`, `Office migration target does not match its office address ("C1" in %s)`},
		{"source_outside_root", `{"version": 1, "migrations": [{"rawConversationId": "C1", "sourceDir": "/elsewhere/C1", "workspaceRoot": "/ws", "status": "needs-owner", "updatedAt": "2026-01-02T03:04:05Z"}]}`, `Office migration source of "C1" does not match its workspace root in %s`},
		{"failed_without_error", `{"version": 1, "migrations": [` + migration("failed", "") + `]}`, `Failed office migration is missing an error ("C1" in %s)`},
		{"duplicate_migration", `{"version": 1, "migrations": [` + migration("needs-owner", "") + `,` + migration("needs-owner", "") + `]}`, `Duplicate office migration of "C1" in %s`},
		{"migration_bad_id", `{"version": 1, "migrations": [{"rawConversationId": "..", "sourceDir": "/", "workspaceRoot": "/ws", "status": "needs-owner", "updatedAt": "2026-01-02T03:04:05Z"}]}`, `Invalid conversation id ".." in office migration of %s: Conversation id must be non-empty and not a path marker`},
		{"malformed", `{"version": 1,`, "Malformed office registry %s: unexpected end of JSON input"},
		{"trailing_garbage", `{"version": 1} x`, "Malformed office registry %s: invalid character 'x' after top-level value"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			reg, state := newTestRegistry(t)
			path := filepath.Join(state, "office-registry.json")
			if err := os.WriteFile(path, []byte(tc.content), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := reg.Load()
			want := strings.ReplaceAll(tc.want, "%s", path)
			checkErr(t, err, want, errdefs.ErrFailedPrecondition)
			// Every reader and writer refuses it alike.
			_, err = reg.Record(mustAddress(t, "web/x"))
			checkErr(t, err, want, errdefs.ErrFailedPrecondition)
			_, err = reg.Offices()
			checkErr(t, err, want, errdefs.ErrFailedPrecondition)
		})
	}
}

func TestRegistry_Load_NotRegularFile(t *testing.T) {
	tests := []struct {
		name  string
		plant func(t *testing.T, path string)
	}{
		{"symlink", func(t *testing.T, path string) {
			target := filepath.Join(filepath.Dir(path), "elsewhere.json")
			if err := os.WriteFile(target, []byte(`{"version": 1}`), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(target, path); err != nil {
				t.Fatal(err)
			}
		}},
		{"dangling_symlink", func(t *testing.T, path string) {
			if err := os.Symlink("/nonexistent/registry.json", path); err != nil {
				t.Fatal(err)
			}
		}},
		{"directory", func(t *testing.T, path string) {
			if err := os.Mkdir(path, 0o700); err != nil {
				t.Fatal(err)
			}
		}},
		{"fifo", func(t *testing.T, path string) {
			if err := syscall.Mkfifo(path, 0o600); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			reg, state := newTestRegistry(t)
			path := filepath.Join(state, "office-registry.json")
			tc.plant(t, path)
			_, err := reg.Load()
			checkErr(t, err, "Office registry must be a regular non-symlink file: "+path, errdefs.ErrFailedPrecondition)
		})
	}
}

// TestRegistry_Load_ReferenceFile reads a registry as the reference system
// writes it (millisecond timestamps, a migration journal) and checks that
// a rewrite keeps everything.
func TestRegistry_Load_ReferenceFile(t *testing.T) {
	reg, state := newTestRegistry(t)
	path := filepath.Join(state, "office-registry.json")
	content := `{
  "version": 1,
  "enabledPlatforms": ["telegram", "slack", "slack"],
  "offices": [
    {"platform": "slack", "conversationId": "C1", "recordedAt": "2026-01-02T03:04:05.678Z"}
  ],
  "migrations": [
    {"rawConversationId": "C1", "sourceDir": "/ws/C1", "workspaceRoot": "/ws", "ownerPlatform": "slack",
     "targetDir": "/ws/v1-slack-c1-4feb881cb4826d55", "status": "committed", "updatedAt": "2026-01-02T03:04:05.000Z"},
    {"rawConversationId": "odd", "sourceDir": "/ws/odd", "workspaceRoot": "/ws", "status": "needs-owner", "updatedAt": "2026-01-02T03:04:05.000Z"},
    {"rawConversationId": "bad", "sourceDir": "/ws/bad", "workspaceRoot": "/ws", "status": "failed", "error": "Target office directory already exists", "updatedAt": "2026-01-02T03:04:05.000Z"}
  ]
}`
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := reg.Load()
	checkErr(t, err, "", nil)
	if got := len(f.Migrations); got != 3 {
		t.Fatalf("migrations got %d, want 3", got)
	}
	wantM := office.MigrationRecord{
		RawConversationID: "C1", SourceDir: "/ws/C1", WorkspaceRoot: "/ws", OwnerPlatform: office.PlatformSlack,
		TargetDir: "/ws/v1-slack-c1-4feb881cb4826d55", Status: office.MigrationCommitted,
		UpdatedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
	}
	if diff := cmp.Diff(wantM, f.Migrations[0]); diff != "" {
		t.Errorf("migration mismatch (-want +got):\n%s", diff)
	}
	if _, err := reg.Record(mustAddress(t, "telegram/-100")); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := `{
  "version": 1,
  "enabledPlatforms": [
    "slack",
    "telegram"
  ],
  "offices": [
    {
      "platform": "slack",
      "conversationId": "C1",
      "recordedAt": "2026-01-02T03:04:05.678Z"
    },
    {
      "platform": "telegram",
      "conversationId": "-100",
      "recordedAt": "2026-03-04T04:06:07Z"
    }
  ],
  "migrations": [
    {
      "rawConversationId": "C1",
      "sourceDir": "/ws/C1",
      "workspaceRoot": "/ws",
      "ownerPlatform": "slack",
      "targetDir": "/ws/v1-slack-c1-4feb881cb4826d55",
      "status": "committed",
      "updatedAt": "2026-01-02T03:04:05Z"
    },
    {
      "rawConversationId": "odd",
      "sourceDir": "/ws/odd",
      "workspaceRoot": "/ws",
      "status": "needs-owner",
      "updatedAt": "2026-01-02T03:04:05Z"
    },
    {
      "rawConversationId": "bad",
      "sourceDir": "/ws/bad",
      "workspaceRoot": "/ws",
      "status": "failed",
      "error": "Target office directory already exists",
      "updatedAt": "2026-01-02T03:04:05Z"
    }
  ]
}
`
	if diff := cmp.Diff(want, string(data)); diff != "" {
		t.Errorf("rewritten registry mismatch (-want +got):\n%s", diff)
	}
}

func TestRegistry_Update(t *testing.T) {
	t.Run("fn_error_writes_nothing", func(t *testing.T) {
		reg, _ := newTestRegistry(t)
		boom := errors.New("boom")
		err := reg.Update(func(f *office.File) error {
			f.AddOffice(mustAddress(t, "web/x"), testClock)
			return boom
		})
		if !errors.Is(err, boom) {
			t.Fatalf("Update got %v, want %v", err, boom)
		}
		if _, err := os.Stat(reg.Path()); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("registry written despite fn error: %v", err)
		}
	})
	t.Run("invalid_result_refused", func(t *testing.T) {
		reg, _ := newTestRegistry(t)
		err := reg.Update(func(f *office.File) error {
			rec := office.OfficeRecord{Platform: office.PlatformWeb, ConversationID: "x", RecordedAt: testClock}
			f.Offices = append(f.Offices, rec, rec)
			return nil
		})
		checkErr(t, err, "Duplicate office record in "+reg.Path(), errdefs.ErrFailedPrecondition)
		if _, err := os.Stat(reg.Path()); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("invalid registry written: %v", err)
		}
	})
	t.Run("unchanged_not_rewritten", func(t *testing.T) {
		reg, _ := newTestRegistry(t)
		if _, err := reg.Record(mustAddress(t, "web/x")); err != nil {
			t.Fatal(err)
		}
		before, err := os.Stat(reg.Path())
		if err != nil {
			t.Fatal(err)
		}
		if err := reg.Update(func(*office.File) error { return nil }); err != nil {
			t.Fatal(err)
		}
		after, err := os.Stat(reg.Path())
		if err != nil {
			t.Fatal(err)
		}
		// An atomic rewrite renames a new inode into place.
		if !os.SameFile(before, after) {
			t.Error("unchanged registry was rewritten")
		}
	})
	t.Run("migration_journal", func(t *testing.T) {
		reg, _ := newTestRegistry(t)
		err := reg.Update(func(f *office.File) error {
			f.EnabledPlatforms = append(f.EnabledPlatforms, office.PlatformWeb, office.PlatformDiscord, office.PlatformWeb)
			f.Migrations = append(f.Migrations, office.MigrationRecord{
				RawConversationID: "x", SourceDir: "/ws/x", WorkspaceRoot: "/ws",
				Status: office.MigrationNeedsOwner, UpdatedAt: testClock.UTC(),
			})
			return nil
		})
		checkErr(t, err, "", nil)
		f, err := reg.Load()
		checkErr(t, err, "", nil)
		if diff := cmp.Diff([]office.Platform{"discord", "web"}, f.EnabledPlatforms); diff != "" {
			t.Errorf("enabled platforms mismatch (-want +got):\n%s", diff)
		}
		if len(f.Migrations) != 1 || f.Migrations[0].Status != office.MigrationNeedsOwner {
			t.Errorf("migrations got %+v", f.Migrations)
		}
	})
}

func TestMigrationStatuses(t *testing.T) {
	got := office.MigrationStatuses
	want := []office.MigrationStatus{"needs-owner", "prepared", "moving", "committed", "failed"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("MigrationStatuses mismatch (-want +got):\n%s", diff)
	}
}
