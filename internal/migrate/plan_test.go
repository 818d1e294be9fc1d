package migrate_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/migrate"
	"github.com/hutchsandbox/hutch/internal/migrate/legacytest"
	"github.com/hutchsandbox/hutch/internal/office"
	"github.com/hutchsandbox/hutch/internal/vault"
)

const root = "/ws"

var (
	slack    = office.PlatformSlack
	discord  = office.PlatformDiscord
	telegram = office.PlatformTelegram
	github   = office.PlatformGitHub
	web      = office.PlatformWeb
)

func conv(name string) migrate.Entry {
	return migrate.Entry{Name: name, IsDir: true, HasConversationContent: true}
}

func key(p office.Platform, id string) office.Key {
	return office.Address{Platform: p, ConversationID: id}.Key()
}

func move(p office.Platform, id string) migrate.Move {
	k := key(p, id)
	return migrate.Move{RawID: id, Owner: p, Source: filepath.Join(root, id), Target: filepath.Join(root, string(k)), Key: k}
}

func record(id string, p office.Platform, st office.MigrationStatus, errText string) office.MigrationRecord {
	r := office.MigrationRecord{RawConversationID: id, SourceDir: filepath.Join(root, id), WorkspaceRoot: root, Status: st, Error: errText}
	if p != "" {
		r.OwnerPlatform = p
		r.TargetDir = filepath.Join(root, string(key(p, id)))
	}
	return r
}

func TestOwnerOf(t *testing.T) {
	tests := []struct {
		name    string
		id      string
		enabled []office.Platform
		want    office.Platform
		ok      bool
	}{
		{"none_enabled", "C1", nil, "", false},
		{"single_takes_all", "whatever id", []office.Platform{web}, web, true},
		{"single_duplicated", "123", []office.Platform{discord, discord}, discord, true},
		{"slack_unambiguous", "C0123ABC", []office.Platform{slack, telegram}, slack, true},
		{"telegram_negative", "-100123", []office.Platform{telegram, discord}, telegram, true},
		{"digits_ambiguous", "123456", []office.Platform{telegram, discord}, "", false},
		{"digits_discord_only_grammar", "123456", []office.Platform{discord, slack}, discord, true},
		{"github", "GH_hutchsandbox_hutch_1652", []office.Platform{github, slack}, github, true},
		{"github_dotted_repo", "GH_o.rg_re-po_7", []office.Platform{github, telegram}, github, true},
		{"github_no_number", "GH_owner_repo", []office.Platform{github, telegram}, "", false},
		{"lowercase_matches_none", "general", []office.Platform{slack, discord}, "", false},
		{"web_has_no_grammar", "abc", []office.Platform{web, slack}, "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := migrate.OwnerOf(tc.id, tc.enabled)
			if got != tc.want || ok != tc.ok {
				t.Errorf("OwnerOf(%q, %v) = %q, %v; want %q, %v", tc.id, tc.enabled, got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestBuild(t *testing.T) {
	bothSlack := key(slack, "C9")
	tests := []struct {
		name     string
		in       migrate.Input
		want     migrate.Plan
		blockers []string
	}{
		{
			name: "empty_workspace",
			in:   migrate.Input{WorkspaceRoot: root, Enabled: []office.Platform{slack}},
		},
		{
			name: "single_platform_owns_everything",
			in: migrate.Input{WorkspaceRoot: root, Enabled: []office.Platform{telegram},
				Entries: []migrate.Entry{conv("b-chat"), conv("-100"), conv("C1")}},
			want: migrate.Plan{Moves: []migrate.Move{move(telegram, "-100"), move(telegram, "C1"), move(telegram, "b-chat")}},
		},
		{
			name: "several_platforms",
			in: migrate.Input{WorkspaceRoot: root, Enabled: []office.Platform{slack, telegram, discord},
				Entries: []migrate.Entry{conv("C1"), conv("-42"), conv("777"), conv("mixedCase")}},
			want: migrate.Plan{
				Moves:   []migrate.Move{move(telegram, "-42"), move(slack, "C1")},
				Unowned: []migrate.Unowned{{Area: migrate.AreaWorkspace, RawID: "777", Source: "/ws/777"}, {Area: migrate.AreaWorkspace, RawID: "mixedCase", Source: "/ws/mixedCase"}},
			},
			blockers: []string{"Unowned conversation directory: /ws/777", "Unowned conversation directory: /ws/mixedCase"},
		},
		{
			name: "claims_settle_ambiguity_and_override_inference",
			in: migrate.Input{WorkspaceRoot: root, Enabled: []office.Platform{slack, telegram, discord},
				Entries: []migrate.Entry{conv("777"), conv("C1")},
				Claims:  map[string]office.Platform{"777": discord, "C1": telegram}},
			want: migrate.Plan{Moves: []migrate.Move{move(discord, "777"), move(telegram, "C1")}},
		},
		{
			name: "non_conversation_entries",
			in: migrate.Input{WorkspaceRoot: root, Enabled: []office.Platform{slack},
				Entries: []migrate.Entry{
					{Name: ".git", IsDir: true, HasConversationContent: true},
					{Name: "MEMORY.md"},
					{Name: "skills", IsDir: true, HasConversationContent: true},
					{Name: "events", IsDir: true},
					{Name: "agents", IsDir: true},
					{Name: "notes.txt"},
					{Name: "C2", IsDir: true},
					{Name: ".hidden-link", IsSymlink: true},
				}},
			want: migrate.Plan{Skipped: []migrate.Skip{
				{".git", migrate.ReasonDotName}, {".hidden-link", migrate.ReasonDotName},
				{"C2", migrate.ReasonNoContent}, {"MEMORY.md", migrate.ReasonReserved},
				{"agents", migrate.ReasonReserved}, {"events", migrate.ReasonReserved},
				{"notes.txt", migrate.ReasonNotDir}, {"skills", migrate.ReasonReserved},
			}},
		},
		{
			name: "office_key_shaped_names",
			in: migrate.Input{WorkspaceRoot: root, Enabled: []office.Platform{slack},
				Entries: []migrate.Entry{conv(string(key(slack, "C1"))), conv(string(key(github, "GH_a_b_1")))}},
			want: migrate.Plan{Skipped: []migrate.Skip{
				{string(key(github, "GH_a_b_1")), migrate.ReasonOfficeKey},
				{string(key(slack, "C1")), migrate.ReasonOfficeKey},
			}},
		},
		{
			name: "symlink_refused",
			in: migrate.Input{WorkspaceRoot: root, Enabled: []office.Platform{slack},
				Entries: []migrate.Entry{{Name: "C1", IsSymlink: true}, conv("C2")}},
			want:     migrate.Plan{Moves: []migrate.Move{move(slack, "C2")}, Refused: []string{"Workspace entry must not be a symlink: /ws/C1"}},
			blockers: []string{"Workspace entry must not be a symlink: /ws/C1"},
		},
		{
			name: "reappeared_after_commit",
			in: migrate.Input{WorkspaceRoot: root, Enabled: []office.Platform{slack},
				Entries: []migrate.Entry{conv("C1"), conv(string(key(slack, "C1")))},
				Records: []office.MigrationRecord{record("C1", slack, office.MigrationCommitted, "")}},
			want: migrate.Plan{
				Skipped: []migrate.Skip{{string(key(slack, "C1")), migrate.ReasonOfficeKey}},
				Refused: []string{"Legacy office directory reappeared after migration: /ws/C1"},
			},
			blockers: []string{"Legacy office directory reappeared after migration: /ws/C1"},
		},
		{
			name: "committed_and_gone_is_a_no_op",
			in: migrate.Input{WorkspaceRoot: root, Enabled: []office.Platform{slack},
				Entries: []migrate.Entry{conv(string(key(slack, "C1")))},
				Records: []office.MigrationRecord{record("C1", slack, office.MigrationCommitted, "")}},
			want: migrate.Plan{Skipped: []migrate.Skip{{string(key(slack, "C1")), migrate.ReasonOfficeKey}}},
		},
		{
			name: "failed_record_reported_not_retried",
			in: migrate.Input{WorkspaceRoot: root, Enabled: []office.Platform{slack},
				Entries: []migrate.Entry{conv("C1")},
				Records: []office.MigrationRecord{record("C1", slack, office.MigrationFailed, "Target office directory already exists")}},
			want: migrate.Plan{
				Skipped: []migrate.Skip{{"C1", migrate.ReasonFailedRecord}},
				Failed:  []migrate.Failure{{RawID: "C1", Error: "Target office directory already exists"}},
			},
			blockers: []string{"Failed office migration of C1: Target office directory already exists"},
		},
		{
			name: "target_already_exists_is_a_conflict",
			in: migrate.Input{WorkspaceRoot: root, Enabled: []office.Platform{slack},
				Entries: []migrate.Entry{conv("C9"), conv(string(bothSlack))}},
			want: migrate.Plan{
				Skipped:   []migrate.Skip{{string(bothSlack), migrate.ReasonOfficeKey}},
				Conflicts: []migrate.Conflict{{Area: migrate.AreaWorkspace, RawID: "C9", Source: "/ws/C9", Target: "/ws/" + string(bothSlack), Error: migrate.MsgTargetExists}},
			},
			blockers: []string{"Conflicting office migration of C9: /ws/C9 and /ws/" + string(bothSlack) + " (Target office directory already exists)"},
		},
		{
			name: "moving_target_only_commits",
			in: migrate.Input{WorkspaceRoot: root, Enabled: []office.Platform{slack},
				Entries: []migrate.Entry{conv(string(key(slack, "C1")))},
				Records: []office.MigrationRecord{record("C1", slack, office.MigrationMoving, "")}},
			want: migrate.Plan{
				Recoveries: []migrate.Recovery{{Action: migrate.RecoverCommit, Move: move(slack, "C1")}},
				Skipped:    []migrate.Skip{{string(key(slack, "C1")), migrate.ReasonOfficeKey}},
			},
		},
		{
			name: "moving_source_only_moves_once",
			in: migrate.Input{WorkspaceRoot: root, Enabled: []office.Platform{slack, discord},
				Entries: []migrate.Entry{conv("123")},
				Records: []office.MigrationRecord{record("123", discord, office.MigrationMoving, "")}},
			want: migrate.Plan{Recoveries: []migrate.Recovery{{Action: migrate.RecoverMove, Move: move(discord, "123")}}},
		},
		{
			name: "moving_both_exist_conflict",
			in: migrate.Input{WorkspaceRoot: root, Enabled: []office.Platform{slack},
				Entries: []migrate.Entry{conv("C9"), conv(string(bothSlack))},
				Records: []office.MigrationRecord{record("C9", slack, office.MigrationMoving, "")}},
			want: migrate.Plan{
				Skipped:   []migrate.Skip{{string(bothSlack), migrate.ReasonOfficeKey}},
				Conflicts: []migrate.Conflict{{Area: migrate.AreaWorkspace, RawID: "C9", Source: "/ws/C9", Target: "/ws/" + string(bothSlack), Error: "Both legacy source and office target exist; merge them manually"}},
			},
			blockers: []string{"Conflicting office migration of C9: /ws/C9 and /ws/" + string(bothSlack) + " (Both legacy source and office target exist; merge them manually)"},
		},
		{
			name: "moving_neither_exists_fails",
			in: migrate.Input{WorkspaceRoot: root, Enabled: []office.Platform{slack},
				Records: []office.MigrationRecord{record("C1", slack, office.MigrationMoving, "")}},
			want:     migrate.Plan{Failed: []migrate.Failure{{RawID: "C1", Error: "Neither legacy source nor office target exists", New: true}}},
			blockers: []string{"Failed office migration of C1: Neither legacy source nor office target exists"},
		},
		{
			name: "moving_without_target_fails",
			in: migrate.Input{WorkspaceRoot: root, Enabled: []office.Platform{slack},
				Entries: []migrate.Entry{conv("C1")},
				Records: []office.MigrationRecord{record("C1", "", office.MigrationMoving, "")}},
			want:     migrate.Plan{Failed: []migrate.Failure{{RawID: "C1", Error: "Moving record has no target directory", New: true}}},
			blockers: []string{"Failed office migration of C1: Moving record has no target directory"},
		},
		{
			name: "records_of_other_roots_ignored_and_prepared_replanned",
			in: migrate.Input{WorkspaceRoot: root + "/", Enabled: []office.Platform{slack},
				Entries: []migrate.Entry{conv("C1"), conv("C2")},
				Records: []office.MigrationRecord{
					{RawConversationID: "C1", WorkspaceRoot: "/other", SourceDir: "/other/C1", Status: office.MigrationCommitted},
					record("C2", slack, office.MigrationPrepared, ""),
				}},
			want: migrate.Plan{Moves: []migrate.Move{move(slack, "C1"), move(slack, "C2")}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := migrate.Build(tc.in)
			if err != nil {
				t.Fatalf("Build: %v", err)
			}
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("plan mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.blockers, got.Blockers(), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("blockers mismatch (-want +got):\n%s", diff)
			}
			if s := got.Summary(); (s == "") != (len(tc.blockers) == 0) {
				t.Errorf("Summary() = %q with blockers %v", s, tc.blockers)
			}
		})
	}
}

func TestBuild_BadInput(t *testing.T) {
	tests := []struct {
		name string
		in   migrate.Input
		want string
	}{
		{"claim_for_disabled_platform", migrate.Input{WorkspaceRoot: root, Enabled: []office.Platform{slack},
			Claims: map[string]office.Platform{"123": discord}}, "Owner platform discord is not enabled"},
		{"unknown_platform", migrate.Input{WorkspaceRoot: root, Enabled: []office.Platform{"irc"}}, `Unknown platform "irc"`},
		{"claim_for_bad_id", migrate.Input{WorkspaceRoot: root, Enabled: []office.Platform{slack},
			Claims: map[string]office.Platform{"a/b": slack}}, "Conversation id must not contain path separators or control characters"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := migrate.Build(tc.in)
			if err == nil || err.Error() != tc.want || !errdefs.IsInvalid(err) {
				t.Errorf("Build err = %v, want invalid %q", err, tc.want)
			}
		})
	}
}

func TestSummary(t *testing.T) {
	k := key(slack, "C9")
	p, err := migrate.Build(migrate.Input{
		WorkspaceRoot: root,
		Enabled:       []office.Platform{slack, telegram, discord},
		Entries:       []migrate.Entry{conv("123"), conv("C9"), conv(string(k)), {Name: "link", IsSymlink: true}, conv("C5")},
		Records: []office.MigrationRecord{
			record("C5", slack, office.MigrationFailed, "rename failed"),
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Join([]string{
		"Conversation office migration cannot complete:",
		"Refused workspace entries (move them out of the workspace root or restore the office directory by hand):",
		"  Workspace entry must not be a symlink: /ws/link",
		"Unowned conversation directories (no single enabled platform's id format matches):",
		"  123  (/ws/123)",
		"  Fix: with the daemon stopped, run `hutch office claim <conversationId> <platform>` for each; the next start performs the move.",
		"Failed migrations (errors are recorded in office-registry.json; see `hutch office list`):",
		"  C5: rename failed",
		"  Fix: resolve the cause, then retry with `hutch office claim <conversationId> <platform>`; if the conversation is gone, clear its record with `hutch office forget-failed <conversationId>`.",
		"Conflicts (both directories exist and neither is touched: merge each pair by hand into the office directory and remove the legacy one):",
		"  C9: merge /ws/C9 into /ws/" + string(k),
	}, "\n")
	if diff := cmp.Diff(want, p.Summary()); diff != "" {
		t.Errorf("Summary mismatch (-want +got):\n%s", diff)
	}
	if len(p.Moves) != 0 {
		t.Errorf("moves got %v, want none", p.Moves)
	}
}

func TestBuild_HostMoves(t *testing.T) {
	const state = "/state"
	dir := func(name string) migrate.Entry { return migrate.Entry{Name: name, IsDir: true} }
	vaultOf := func(id string) string { return vault.ConversationKey(id) }
	hostMove := func(area migrate.Area, p office.Platform, id string) migrate.HostMove {
		k := key(p, id)
		sub, from := "conversations", id
		if area == migrate.AreaVault {
			sub, from = "vaults", vaultOf(id)
		}
		return migrate.HostMove{Area: area, RawID: id, Owner: p, Key: k,
			Source: filepath.Join(state, sub, from), Target: filepath.Join(state, sub, string(k))}
	}
	tests := []struct {
		name     string
		in       migrate.Input
		want     migrate.Plan
		blockers []string
	}{
		{
			name: "moved_with_the_workspace",
			in: migrate.Input{WorkspaceRoot: root, Enabled: []office.Platform{slack}, StateDir: state,
				Entries:      []migrate.Entry{conv("C1")},
				StateEntries: []migrate.Entry{dir("C1")},
				VaultEntries: []migrate.Entry{dir(vaultOf("C1")), dir("shared"), dir(vault.UserKey("U1"))}},
			want: migrate.Plan{
				Moves:     []migrate.Move{move(slack, "C1")},
				HostMoves: []migrate.HostMove{hostMove(migrate.AreaState, slack, "C1"), hostMove(migrate.AreaVault, slack, "C1")},
			},
		},
		{
			name: "owner_from_committed_record_after_workspace_moved",
			in: migrate.Input{WorkspaceRoot: root, Enabled: []office.Platform{slack, discord}, StateDir: state,
				Records:      []office.MigrationRecord{record("123", discord, office.MigrationCommitted, "")},
				VaultEntries: []migrate.Entry{dir(vaultOf("123"))}},
			want: migrate.Plan{HostMoves: []migrate.HostMove{hostMove(migrate.AreaVault, discord, "123")}},
		},
		{
			name: "owner_from_the_registry_office",
			in: migrate.Input{WorkspaceRoot: root, Enabled: []office.Platform{telegram, discord}, StateDir: state,
				Offices:      []office.OfficeRecord{{Platform: telegram, ConversationID: "55"}},
				StateEntries: []migrate.Entry{dir("55")}},
			want: migrate.Plan{HostMoves: []migrate.HostMove{hostMove(migrate.AreaState, telegram, "55")}},
		},
		{
			name: "registry_on_two_platforms_is_unowned",
			in: migrate.Input{WorkspaceRoot: root, Enabled: []office.Platform{telegram, discord}, StateDir: state,
				Offices:      []office.OfficeRecord{{Platform: telegram, ConversationID: "55"}, {Platform: discord, ConversationID: "55"}},
				VaultEntries: []migrate.Entry{dir(vaultOf("55"))}},
			want:     migrate.Plan{Unowned: []migrate.Unowned{{Area: migrate.AreaVault, RawID: "55", Source: "/state/vaults/" + vaultOf("55")}}},
			blockers: []string{"Unowned conversation vault: /state/vaults/" + vaultOf("55")},
		},
		{
			name: "state_dir_unowned_then_claimed",
			in: migrate.Input{WorkspaceRoot: root, Enabled: []office.Platform{telegram, discord}, StateDir: state,
				StateEntries: []migrate.Entry{dir("77"), dir("88")},
				Claims:       map[string]office.Platform{"88": discord}},
			want: migrate.Plan{
				HostMoves: []migrate.HostMove{hostMove(migrate.AreaState, discord, "88")},
				Unowned:   []migrate.Unowned{{Area: migrate.AreaState, RawID: "77", Source: "/state/conversations/77"}},
			},
			blockers: []string{"Unowned conversation state directory: /state/conversations/77"},
		},
		{
			name: "both_present_conflicts_never_clobbered",
			in: migrate.Input{WorkspaceRoot: root, Enabled: []office.Platform{slack}, StateDir: state,
				Records:      []office.MigrationRecord{record("C1", slack, office.MigrationCommitted, "")},
				StateEntries: []migrate.Entry{dir("C1"), dir(string(key(slack, "C1")))},
				VaultEntries: []migrate.Entry{dir(vaultOf("C1")), dir(string(key(slack, "C1")))}},
			want: migrate.Plan{Conflicts: []migrate.Conflict{
				{Area: migrate.AreaState, RawID: "C1", Source: "/state/conversations/C1", Target: "/state/conversations/" + string(key(slack, "C1")), Error: migrate.MsgTargetExists},
				{Area: migrate.AreaVault, RawID: "C1", Source: "/state/vaults/" + vaultOf("C1"), Target: "/state/vaults/" + string(key(slack, "C1")), Error: migrate.MsgTargetExists},
			}},
			blockers: []string{
				"Conflicting host state migration of C1: /state/conversations/C1 and /state/conversations/" + string(key(slack, "C1")) + " (Target office directory already exists)",
				"Conflicting vault migration of C1: /state/vaults/" + vaultOf("C1") + " and /state/vaults/" + string(key(slack, "C1")) + " (Target office directory already exists)",
			},
		},
		{
			name: "office_keys_dot_names_files_left_alone_symlink_refused",
			in: migrate.Input{WorkspaceRoot: root, Enabled: []office.Platform{slack}, StateDir: state,
				StateEntries: []migrate.Entry{dir(string(key(slack, "C1"))), dir(".tmp"), {Name: "notes"}, {Name: "C2", IsSymlink: true}}},
			want:     migrate.Plan{Refused: []string{"Host state entry must not be a symlink: /state/conversations/C2"}},
			blockers: []string{"Host state entry must not be a symlink: /state/conversations/C2"},
		},
		{
			name: "no_state_dir_plans_nothing_host_side",
			in: migrate.Input{WorkspaceRoot: root, Enabled: []office.Platform{slack},
				StateEntries: []migrate.Entry{dir("C1")}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := migrate.Build(tc.in)
			if err != nil {
				t.Fatalf("Build: %v", err)
			}
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("plan mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.blockers, got.Blockers(), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("blockers mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestSanitizedName pins the name the oldest releases gave a raw id's
// vault, as the fixture writes it.
func TestSanitizedName(t *testing.T) {
	for id, want := range map[string]string{
		"C0123ABC":           "c0123abc",
		"-1001234567890":     "1001234567890",
		"foo:Bar..baz":       "foo-bar-baz",
		"--":                 "unknown",
		"GH_owner_repo_1652": "gh-owner-repo-1652",
		"a-very-long-conversation-identifier-of-fifty-chars": "a-very-long-conversation-identifier-of-fifty-chars",
	} {
		if got := legacytest.SanitizedName(id); got != want {
			t.Errorf("SanitizedName(%q) = %q, want %q", id, got, want)
		}
	}
}

// TestBuild_SanitizedVaults: a vault under the sanitized raw id of the
// oldest releases moves with its conversation, or is a blocker; it is
// never left behind without a word, and never taken when its name is one
// the current layout gives other vaults.
func TestBuild_SanitizedVaults(t *testing.T) {
	const state = "/state"
	dir := func(name string) migrate.Entry { return migrate.Entry{Name: name, IsDir: true} }
	san := legacytest.SanitizedName
	vaultMove := func(p office.Platform, id, from string) migrate.HostMove {
		k := key(p, id)
		return migrate.HostMove{Area: migrate.AreaVault, RawID: id, Owner: p, Key: k,
			Source: filepath.Join(state, "vaults", from), Target: filepath.Join(state, "vaults", string(k))}
	}
	tests := []struct {
		name     string
		in       migrate.Input
		want     migrate.Plan
		blockers []string
	}{
		{
			name: "moves_with_the_workspace",
			in: migrate.Input{WorkspaceRoot: root, Enabled: []office.Platform{slack}, StateDir: state,
				Entries:      []migrate.Entry{conv("C0123ABC")},
				VaultEntries: []migrate.Entry{dir(san("C0123ABC"))}},
			want: migrate.Plan{
				Moves:     []migrate.Move{move(slack, "C0123ABC")},
				HostMoves: []migrate.HostMove{vaultMove(slack, "C0123ABC", "c0123abc")},
			},
		},
		{
			name: "moves_after_an_earlier_workspace_move",
			in: migrate.Input{WorkspaceRoot: root, Enabled: []office.Platform{telegram, discord}, StateDir: state,
				Records:      []office.MigrationRecord{record("-100200", telegram, office.MigrationCommitted, "")},
				VaultEntries: []migrate.Entry{dir(san("-100200"))}},
			want: migrate.Plan{HostMoves: []migrate.HostMove{vaultMove(telegram, "-100200", "100200")}},
		},
		{
			name: "name_shared_by_two_conversations",
			in: migrate.Input{WorkspaceRoot: root, Enabled: []office.Platform{web}, StateDir: state,
				Entries:      []migrate.Entry{conv("C1"), conv("c1")},
				VaultEntries: []migrate.Entry{dir("c1")}},
			want: migrate.Plan{
				Moves: []migrate.Move{move(web, "C1"), move(web, "c1")},
				Stray: []migrate.Stray{{Source: "/state/vaults/c1", RawIDs: []string{"C1", "c1"}}},
			},
			blockers: []string{"Legacy vault of several conversations: /state/vaults/c1 (C1, c1)"},
		},
		{
			name: "both_older_forms_conflict",
			in: migrate.Input{WorkspaceRoot: root, Enabled: []office.Platform{slack}, StateDir: state,
				Entries:      []migrate.Entry{conv("C1")},
				VaultEntries: []migrate.Entry{dir(vault.ConversationKey("C1")), dir("c1")}},
			want: migrate.Plan{
				Moves:     []migrate.Move{move(slack, "C1")},
				HostMoves: []migrate.HostMove{vaultMove(slack, "C1", vault.ConversationKey("C1"))},
				Conflicts: []migrate.Conflict{{Area: migrate.AreaVault, RawID: "C1", Source: "/state/vaults/c1",
					Target: "/state/vaults/" + vault.ConversationKey("C1"), Error: migrate.MsgBothLegacyVaults}},
			},
			blockers: []string{"Conflicting vault migration of C1: /state/vaults/c1 and /state/vaults/" + vault.ConversationKey("C1") + " (Vaults of both older forms exist; merge them by hand)"},
		},
		{
			name: "office_vault_exists_conflict",
			in: migrate.Input{WorkspaceRoot: root, Enabled: []office.Platform{slack}, StateDir: state,
				Entries:      []migrate.Entry{conv("C1")},
				VaultEntries: []migrate.Entry{dir("c1"), dir(string(key(slack, "C1")))}},
			want: migrate.Plan{
				Moves: []migrate.Move{move(slack, "C1")},
				Conflicts: []migrate.Conflict{{Area: migrate.AreaVault, RawID: "C1", Source: "/state/vaults/c1",
					Target: "/state/vaults/" + string(key(slack, "C1")), Error: migrate.MsgTargetExists}},
			},
			blockers: []string{"Conflicting vault migration of C1: /state/vaults/c1 and /state/vaults/" + string(key(slack, "C1")) + " (Target office directory already exists)"},
		},
		{
			name: "no_known_conversation",
			in: migrate.Input{WorkspaceRoot: root, Enabled: []office.Platform{slack}, StateDir: state,
				VaultEntries: []migrate.Entry{dir("c9"), dir("shared"), dir("extensions"), dir(vault.UserKey("U1")),
					dir(vault.ContainerKey("box")), dir(string(key(slack, "C5"))), dir(".tmp-x"), {Name: "notes"}, dir("Not Sanitized")}},
			want:     migrate.Plan{Stray: []migrate.Stray{{Source: "/state/vaults/c9"}}},
			blockers: []string{"Legacy vault of no known conversation: /state/vaults/c9"},
		},
		{
			name: "symlink_refused",
			in: migrate.Input{WorkspaceRoot: root, Enabled: []office.Platform{slack}, StateDir: state,
				Entries:      []migrate.Entry{conv("C1")},
				VaultEntries: []migrate.Entry{{Name: "c1", IsSymlink: true}}},
			want: migrate.Plan{
				Moves:   []migrate.Move{move(slack, "C1")},
				Refused: []string{"Vault entry must not be a symlink: /state/vaults/c1"},
			},
			blockers: []string{"Vault entry must not be a symlink: /state/vaults/c1"},
		},
		{
			// Raw ids an agent could make up (a web conversation, or a
			// directory planted in the workspace) whose sanitized form is
			// the name of another vault: named profiles, a user's vault,
			// another conversation's. Their vaults are not theirs.
			name: "planted_ids_never_take_other_vaults",
			in: migrate.Input{WorkspaceRoot: root, Enabled: []office.Platform{web}, StateDir: state,
				Entries:      []migrate.Entry{conv("Shared"), conv(vault.UserKey("U1")), conv("EXTENSIONS")},
				VaultEntries: []migrate.Entry{dir("shared"), dir("extensions"), dir(vault.UserKey("U1"))}},
			want: migrate.Plan{Moves: []migrate.Move{move(web, "EXTENSIONS"), move(web, "Shared"), move(web, vault.UserKey("U1"))}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := migrate.Build(tc.in)
			if err != nil {
				t.Fatalf("Build: %v", err)
			}
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("plan mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.blockers, got.Blockers(), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("blockers mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestSummary_StrayVaults pins the operator's instructions for vaults of
// the oldest releases that cannot be given to one conversation.
func TestSummary_StrayVaults(t *testing.T) {
	p, err := migrate.Build(migrate.Input{WorkspaceRoot: root, Enabled: []office.Platform{web}, StateDir: "/state",
		Entries:      []migrate.Entry{conv("C1"), conv("c1")},
		VaultEntries: []migrate.Entry{{Name: "c1", IsDir: true}, {Name: "c9", IsDir: true}}})
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Join([]string{
		"Conversation office migration cannot complete:",
		"Vaults of an older release named by a sanitized conversation id that fits no single conversation (nothing was moved):",
		"  /state/vaults/c1  (C1, c1)",
		"  /state/vaults/c9  (no known conversation)",
		"  Fix: move each by hand to <state-dir>/vaults/<office key> of the conversation it belongs to (`hutch office key <platform> <conversation-id>` prints the key), or remove it; then migrate again.",
	}, "\n")
	if diff := cmp.Diff(want, p.Summary()); diff != "" {
		t.Errorf("Summary mismatch (-want +got):\n%s", diff)
	}
}

// TestSummary_NoPlatforms: with no platform enabled nothing has an owner,
// and claiming cannot help (a claim's platform must be enabled): the
// instructions say to enable the platforms first.
func TestSummary_NoPlatforms(t *testing.T) {
	p, err := migrate.Build(migrate.Input{WorkspaceRoot: root, Entries: []migrate.Entry{conv("C1"), conv("-100")}})
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Join([]string{
		"Conversation office migration cannot complete:",
		"Unowned conversation directories (no platform is enabled, so none has an owner):",
		"  -100  (/ws/-100)",
		"  C1  (/ws/C1)",
		"  Fix: first enable the platforms this workspace served, with `hutch office platforms <platform>,...` (or --platforms for one run), then migrate again.",
	}, "\n")
	if diff := cmp.Diff(want, p.Summary()); diff != "" {
		t.Errorf("Summary mismatch (-want +got):\n%s", diff)
	}
}

// TestBuild_ForeignContainers: containers hutch does not manage (an
// earlier installation's) that bind a raw-id path stop the migration:
// moving the directory from under them would split the conversation's
// files between the office and whatever the engine re-creates at the old
// path.
func TestBuild_ForeignContainers(t *testing.T) {
	const state = "/state"
	p, err := migrate.Build(migrate.Input{WorkspaceRoot: root, Enabled: []office.Platform{slack}, StateDir: state,
		Entries: []migrate.Entry{conv("C1"), conv("C2")},
		Records: []office.MigrationRecord{record("C3", slack, office.MigrationCommitted, "")},
		Containers: []migrate.Container{
			{ID: "aaaaaaaaaaaaaaaa", Name: "old-c1", Sources: []string{"/srv/x", "/ws/C1/sub"}},
			{ID: "bbbbbbbbbbbbbbbb", Name: "whole-workspace", Sources: []string{"/ws", "/srv/data"}},
			{ID: "cccccccccccccccc", Name: "old-c3", Sources: []string{"/state/vaults/c3"}},
			{ID: "dddddddddddddddd", Name: "near-miss", Sources: []string{"/ws/C10", "/ws/" + string(key(slack, "C2"))}},
			{ID: "eeeeeeeeeeeeeeee", Name: "old-c2-state", Sources: []string{"/state/conversations/C2"}},
		}})
	if err != nil {
		t.Fatal(err)
	}
	want := []migrate.Foreign{
		{Name: "old-c1", ID: "aaaaaaaaaaaaaaaa", RawID: "C1", Source: "/ws/C1/sub"},
		{Name: "old-c2-state", ID: "eeeeeeeeeeeeeeee", RawID: "C2", Source: "/state/conversations/C2"},
		{Name: "old-c3", ID: "cccccccccccccccc", RawID: "C3", Source: "/state/vaults/c3"},
	}
	if diff := cmp.Diff(want, p.Foreign, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("foreign containers (-want +got):\n%s", diff)
	}
	wantBlockers := []string{
		"Container old-c1 (not managed by hutch) binds /ws/C1/sub, a raw-id path of C1",
		"Container old-c2-state (not managed by hutch) binds /state/conversations/C2, a raw-id path of C2",
		"Container old-c3 (not managed by hutch) binds /state/vaults/c3, a raw-id path of C3",
	}
	if diff := cmp.Diff(wantBlockers, p.Blockers()); diff != "" {
		t.Errorf("blockers (-want +got):\n%s", diff)
	}
	wantSummary := strings.Join([]string{
		"Conversation office migration cannot complete:",
		"Containers not managed by hutch (an earlier installation's) bind raw-id paths; moving a path from under a container would split its conversation's files:",
		"  old-c1 (aaaaaaaaaaaa): /ws/C1/sub  (C1)",
		"  old-c2-state (eeeeeeeeeeee): /state/conversations/C2  (C2)",
		"  old-c3 (cccccccccccc): /state/vaults/c3  (C3)",
		"  Fix: keep what you need from each container, remove it (`docker rm -f <name>`), then migrate again.",
	}, "\n")
	if diff := cmp.Diff(wantSummary, p.Summary()); diff != "" {
		t.Errorf("Summary (-want +got):\n%s", diff)
	}
}
