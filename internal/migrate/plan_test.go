package migrate_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/migrate"
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
		"  Fix: resolve the cause, then retry with `hutch office claim <conversationId> <platform>`; if the conversation is gone, remove its record from office-registry.json.",
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
