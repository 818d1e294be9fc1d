package migrate

import (
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/lazyregexp"
	"github.com/hutchsandbox/hutch/internal/office"
)

// Entry is one name in the workspace root as the caller read it (without
// following symlinks). HasConversationContent reports whether the
// directory holds log.jsonl or sessions/.
type Entry struct {
	Name                   string
	IsDir                  bool
	IsSymlink              bool
	HasConversationContent bool
}

// Input is everything Plan needs. Entries must list the whole workspace
// root: whether a source or target directory exists is read from it.
// Records are the office registry's migration records; those whose
// WorkspaceRoot is not WorkspaceRoot are ignored. Claims maps raw ids to
// the platform an operator claimed them for.
//
// StateDir, when set, plans the two host-side moves as well: StateEntries
// list <state>/conversations (raw-id host state directories move to the
// office key) and VaultEntries list <state>/vaults (a vault under the
// legacy per-conversation key moves to the office key). Offices are the
// registry's offices; they settle the owner of a raw id seen only there.
type Input struct {
	WorkspaceRoot string
	Entries       []Entry
	Enabled       []office.Platform
	Claims        map[string]office.Platform
	Records       []office.MigrationRecord

	StateDir     string
	StateEntries []Entry
	VaultEntries []Entry
	Offices      []office.OfficeRecord

	// Containers are the engine's containers that hutch does not manage
	// (no hutch.managed label), with the host sources of their bind
	// mounts. Those binding a raw-id path are blockers (see Foreign).
	Containers []Container
}

// Container is a container hutch does not manage, as the caller listed
// it.
type Container struct {
	ID, Name string
	// Sources are the host paths of its bind mounts.
	Sources []string
}

// Area is which tree a move or blocker is in.
type Area string

// The three trees a conversation has.
const (
	AreaWorkspace Area = "workspace"
	AreaVault     Area = "vault"
	AreaState     Area = "host state"
)

// Move is one raw-id directory to rename to its office directory.
type Move struct {
	RawID  string
	Owner  office.Platform
	Source string
	Target string
	Key    office.Key
}

// RecoveryAction is what finishing an interrupted (moving) record takes.
type RecoveryAction string

const (
	// RecoverCommit: the target exists and the source is gone; mark the
	// record committed.
	RecoverCommit RecoveryAction = "commit"
	// RecoverMove: the source exists and the target does not; rename,
	// then commit.
	RecoverMove RecoveryAction = "move"
)

// Recovery finishes one record left in the moving state.
type Recovery struct {
	Action RecoveryAction
	Move
}

// Skip is a workspace entry left alone and why.
type Skip struct {
	Name   string
	Reason string
}

// Unowned is a conversation directory no single enabled platform owns.
type Unowned struct {
	Area   Area
	RawID  string
	Source string
}

// HostMove is the rename of a vault or host state directory from its
// legacy name to the office key. These are not journaled: each is one
// atomic rename decided by which of source and target exist, so a run
// killed before or after it is resumed by planning again, and the journal
// could record nothing the file system does not already say.
type HostMove struct {
	Area   Area
	RawID  string
	Owner  office.Platform
	Key    office.Key
	Source string
	Target string
}

// Failure is a migration that failed, either recorded so in the registry
// (reported, never retried) or found unrecoverable now. New reports the
// latter: the caller records it as failed with Error.
type Failure struct {
	RawID string
	Error string
	New   bool
}

// Conflict is a raw id whose legacy and office directories both exist.
// Neither is touched; an operator merges them by hand.
type Conflict struct {
	Area   Area
	RawID  string
	Source string
	Target string
	Error  string
}

// Stray is a vault of the oldest releases, named by a sanitized raw id,
// that fits no single conversation: several known raw ids sanitize to
// its name (RawIDs), or none does (RawIDs empty). Sanitizing loses
// information, so which conversation it belongs to is the operator's
// call.
type Stray struct {
	Source string
	RawIDs []string
}

// Foreign is a container hutch does not manage that binds a raw-id path
// (the workspace directory, vault or host state of RawID, or below).
// Moving the path from under it would split the conversation: a running
// container keeps writing into the moved directory through its mount, a
// restarted one gets an empty directory the engine makes at the old path.
type Foreign struct {
	Name, ID string
	RawID    string
	Source   string
}

// Plan is the outcome of planning. Every slice is sorted by raw id (or
// name, or path).
type Plan struct {
	Moves      []Move
	Recoveries []Recovery
	HostMoves  []HostMove
	Skipped    []Skip
	Unowned    []Unowned
	Failed     []Failure
	Conflicts  []Conflict
	Stray      []Stray
	Foreign    []Foreign
	// Refused are workspace entries that stop boot outright: symlinks and
	// legacy directories that reappeared after a committed move.
	Refused []string
	// NoPlatforms says no platform was enabled, so nothing could be
	// given an owner; the instructions say to enable platforms, since a
	// claim must name an enabled one.
	NoPlatforms bool
}

// Skip reasons.
const (
	ReasonDotName      = "hidden name"
	ReasonReserved     = "reserved workspace name"
	ReasonOfficeKey    = "already an office directory"
	ReasonNotDir       = "not a directory"
	ReasonNoContent    = "no log.jsonl or sessions/"
	ReasonInvalidID    = "not a valid conversation id"
	ReasonFailedRecord = "migration failed earlier; see hutch office list"
)

// Texts of blockers and recovery failures (shared with the reference
// system's registry, so both word them alike).
const (
	msgSymlink       = "Workspace entry must not be a symlink: "
	msgReappeared    = "Legacy office directory reappeared after migration: "
	MsgNoTarget      = "Moving record has no target directory"
	MsgBothExist     = "Both legacy source and office target exist; merge them manually"
	MsgNeitherExists = "Neither legacy source nor office target exists"
	MsgTargetExists  = "Target office directory already exists"
	// MsgBothLegacyVaults: a conversation has a vault under the hashed
	// key of the later raw-id releases and one under the sanitized raw id
	// of the oldest; both would become its office vault.
	MsgBothLegacyVaults = "Vaults of both older forms exist; merge them by hand"
	summaryHeadline     = "Conversation office migration cannot complete:"
	summaryClaimFixup   = "hutch office claim <conversationId> <platform>"
)

var reserved = map[string]bool{"MEMORY.md": true, "skills": true, "events": true, "agents": true}

// Id grammars per platform. GitHub ids are formed by hutch as
// GH_<owner>_<repo>_<number> (e.g. GH_hutchsandbox_hutch_1652); owner and
// repo may contain letters, digits, '_', '.' and '-', so the grammar is
// ^GH_[A-Za-z0-9_.-]+_\d+$. Web ids have no grammar. A pure-digit id
// matches both Telegram and Discord, so it is unowned when both are
// enabled.
var grammars = map[office.Platform]*lazyregexp.Regexp{
	office.PlatformSlack:    lazyregexp.New(`^[A-Z][A-Z0-9]*$`),
	office.PlatformTelegram: lazyregexp.New(`^-?\d+$`),
	office.PlatformDiscord:  lazyregexp.New(`^\d+$`),
	office.PlatformGitHub:   lazyregexp.New(`^GH_[A-Za-z0-9_.-]+_\d+$`),
}

// OwnerOf infers the platform owning rawID. With one enabled platform
// (duplicates collapse) it is that platform; with several, the one
// enabled platform whose id grammar matches, if exactly one does.
func OwnerOf(rawID string, enabled []office.Platform) (office.Platform, bool) {
	uniq := uniquePlatforms(enabled)
	if len(uniq) == 1 {
		return uniq[0], true
	}
	var owner office.Platform
	n := 0
	for _, p := range uniq {
		if re, ok := grammars[p]; ok && re.MatchString(rawID) {
			owner, n = p, n+1
		}
	}
	if n != 1 {
		return "", false
	}
	return owner, true
}

func uniquePlatforms(ps []office.Platform) []office.Platform {
	out := slices.Clone(ps)
	slices.Sort(out)
	return slices.Compact(out)
}

// Build works out what migrating in takes (it is the brief's Plan
// function; Go does not allow a func and a type of the same name). It errs only on bad input: an
// unknown enabled platform, or a claim for a platform that is not
// enabled or for an invalid id.
func Build(in Input) (Plan, error) {
	var p Plan
	enabled := uniquePlatforms(in.Enabled)
	p.NoPlatforms = len(enabled) == 0
	for _, e := range enabled {
		if !e.Valid() {
			return Plan{}, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("Unknown platform %q", e))
		}
	}
	for id, owner := range in.Claims {
		if err := office.ValidateConversationID(id); err != nil {
			return Plan{}, err
		}
		if !slices.Contains(enabled, owner) {
			return Plan{}, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("Owner platform %s is not enabled", owner))
		}
	}
	root := filepath.Clean(in.WorkspaceRoot)
	exists := make(map[string]bool, len(in.Entries))
	for _, e := range in.Entries {
		exists[filepath.Join(root, e.Name)] = true
	}

	records := map[string]office.MigrationRecord{}
	for _, r := range in.Records {
		if filepath.Clean(r.WorkspaceRoot) == root {
			records[r.RawConversationID] = r
		}
	}
	ids := make([]string, 0, len(records))
	for id := range records {
		ids = append(ids, id)
	}
	sort.Strings(ids)

	// Recover interrupted moves first; their raw ids are settled here.
	handled := map[string]bool{}
	for _, id := range ids {
		r := records[id]
		switch r.Status {
		case office.MigrationMoving:
			handled[id] = true
			p.recover(r, exists)
		case office.MigrationFailed:
			handled[id] = true
			p.Failed = append(p.Failed, Failure{RawID: id, Error: r.Error})
		}
	}

	// Every raw id this workspace has or had: a container binding one of
	// their paths is a blocker.
	rawIDs := map[string]bool{}
	for _, id := range ids {
		rawIDs[id] = true
	}
	entries := slices.Clone(in.Entries)
	slices.SortFunc(entries, func(a, b Entry) int { return strings.Compare(a.Name, b.Name) })
	for _, e := range entries {
		path := filepath.Join(root, e.Name)
		skip := func(reason string) { p.Skipped = append(p.Skipped, Skip{Name: e.Name, Reason: reason}) }
		switch {
		case strings.HasPrefix(e.Name, "."):
			skip(ReasonDotName)
			continue
		case reserved[e.Name]:
			skip(ReasonReserved)
			continue
		case office.LooksLikeKey(e.Name):
			skip(ReasonOfficeKey)
			continue
		case e.IsSymlink:
			p.Refused = append(p.Refused, msgSymlink+path)
			continue
		case !e.IsDir:
			skip(ReasonNotDir)
			continue
		case !e.HasConversationContent:
			skip(ReasonNoContent)
			continue
		case office.ValidateConversationID(e.Name) != nil:
			skip(ReasonInvalidID)
			continue
		}
		rawIDs[e.Name] = true
		r, recorded := records[e.Name]
		switch {
		case recorded && r.Status == office.MigrationCommitted:
			p.Refused = append(p.Refused, msgReappeared+path)
			continue
		case recorded && r.Status == office.MigrationFailed:
			skip(ReasonFailedRecord)
			continue
		case handled[e.Name]:
			continue
		}
		owner, ok := in.Claims[e.Name]
		if !ok {
			owner, ok = OwnerOf(e.Name, enabled)
		}
		if !ok {
			p.Unowned = append(p.Unowned, Unowned{Area: AreaWorkspace, RawID: e.Name, Source: path})
			continue
		}
		m := newMove(root, e.Name, owner)
		if exists[m.Target] {
			p.Conflicts = append(p.Conflicts, Conflict{Area: AreaWorkspace, RawID: e.Name, Source: m.Source, Target: m.Target, Error: MsgTargetExists})
			continue
		}
		p.Moves = append(p.Moves, m)
	}
	if in.StateDir != "" {
		for id := range p.planHost(in, enabled, records) {
			rawIDs[id] = true
		}
	}
	p.planForeign(in, root, rawIDs)
	sort.Strings(p.Refused)
	slices.SortFunc(p.Unowned, func(a, b Unowned) int { return strings.Compare(a.Source, b.Source) })
	slices.SortFunc(p.Conflicts, func(a, b Conflict) int { return strings.Compare(a.Source, b.Source) })
	return p, nil
}

func newMove(root, id string, owner office.Platform) Move {
	k := office.Address{Platform: owner, ConversationID: id}.Key()
	return Move{RawID: id, Owner: owner, Source: filepath.Join(root, id), Target: office.Dir(root, k), Key: k}
}

func (p *Plan) recover(r office.MigrationRecord, exists map[string]bool) {
	id := r.RawConversationID
	if r.TargetDir == "" || r.OwnerPlatform == "" {
		p.Failed = append(p.Failed, Failure{RawID: id, Error: MsgNoTarget, New: true})
		return
	}
	m := Move{
		RawID:  id,
		Owner:  r.OwnerPlatform,
		Source: filepath.Clean(r.SourceDir),
		Target: filepath.Clean(r.TargetDir),
		Key:    office.Address{Platform: r.OwnerPlatform, ConversationID: id}.Key(),
	}
	src, dst := exists[m.Source], exists[m.Target]
	switch {
	case src && dst:
		p.Conflicts = append(p.Conflicts, Conflict{Area: AreaWorkspace, RawID: id, Source: m.Source, Target: m.Target, Error: MsgBothExist})
	case !src && !dst:
		p.Failed = append(p.Failed, Failure{RawID: id, Error: MsgNeitherExists, New: true})
	case dst:
		p.Recoveries = append(p.Recoveries, Recovery{Action: RecoverCommit, Move: m})
	default:
		p.Recoveries = append(p.Recoveries, Recovery{Action: RecoverMove, Move: m})
	}
}

// Blockers lists, one line each, everything that stops the migration from
// completing: refused entries, unowned directories, failures, conflicts.
// It is empty when the plan can run to the end.
func (p Plan) Blockers() []string {
	var out []string
	out = append(out, p.Refused...)
	for _, u := range p.Unowned {
		out = append(out, unownedText[u.Area]+u.Source)
	}
	for _, f := range p.Failed {
		out = append(out, fmt.Sprintf("Failed office migration of %s: %s", f.RawID, f.Error))
	}
	for _, c := range p.Conflicts {
		out = append(out, fmt.Sprintf("Conflicting %s migration of %s: %s and %s (%s)", conflictWord[c.Area], c.RawID, c.Source, c.Target, c.Error))
	}
	for _, s := range p.Stray {
		if len(s.RawIDs) == 0 {
			out = append(out, "Legacy vault of no known conversation: "+s.Source)
		} else {
			out = append(out, fmt.Sprintf("Legacy vault of several conversations: %s (%s)", s.Source, strings.Join(s.RawIDs, ", ")))
		}
	}
	for _, f := range p.Foreign {
		out = append(out, fmt.Sprintf("Container %s (not managed by hutch) binds %s, a raw-id path of %s", f.Name, f.Source, f.RawID))
	}
	return out
}

// Summary renders the operator message boot stops with, one group per
// kind of blocker, each saying what to do. It is "" when there are no
// blockers.
func (p Plan) Summary() string {
	if len(p.Blockers()) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString(summaryHeadline + "\n")
	if len(p.Refused) > 0 {
		b.WriteString("Refused workspace entries (move them out of the workspace root or restore the office directory by hand):\n")
		for _, r := range p.Refused {
			b.WriteString("  " + r + "\n")
		}
	}
	switch {
	case len(p.Unowned) > 0 && p.NoPlatforms:
		// A claim must name an enabled platform, so it cannot help yet.
		b.WriteString("Unowned conversation directories (no platform is enabled, so none has an owner):\n")
		for _, u := range p.Unowned {
			fmt.Fprintf(&b, "  %s  (%s)\n", u.RawID, u.Source)
		}
		b.WriteString("  Fix: first enable the platforms this workspace served, with `hutch office platforms <platform>,...` (or --platforms for one run), then migrate again.\n")
	case len(p.Unowned) > 0:
		b.WriteString("Unowned conversation directories (no single enabled platform's id format matches):\n")
		for _, u := range p.Unowned {
			fmt.Fprintf(&b, "  %s  (%s)\n", u.RawID, u.Source)
		}
		b.WriteString("  Fix: with the daemon stopped, run `" + summaryClaimFixup + "` for each; the next start performs the move.\n")
	}
	if len(p.Failed) > 0 {
		b.WriteString("Failed migrations (errors are recorded in office-registry.json; see `hutch office list`):\n")
		for _, f := range p.Failed {
			fmt.Fprintf(&b, "  %s: %s\n", f.RawID, f.Error)
		}
		b.WriteString("  Fix: resolve the cause, then retry with `" + summaryClaimFixup + "`; if the conversation is gone, clear its record with `hutch office forget-failed <conversationId>`.\n")
	}
	if len(p.Conflicts) > 0 {
		b.WriteString("Conflicts (both directories exist and neither is touched: merge each pair by hand into the office directory and remove the legacy one):\n")
		for _, c := range p.Conflicts {
			fmt.Fprintf(&b, "  %s: merge %s into %s\n", c.RawID, c.Source, c.Target)
		}
	}
	if len(p.Stray) > 0 {
		b.WriteString("Vaults of an older release named by a sanitized conversation id that fits no single conversation (nothing was moved):\n")
		for _, s := range p.Stray {
			ids := "no known conversation"
			if len(s.RawIDs) > 0 {
				ids = strings.Join(s.RawIDs, ", ")
			}
			fmt.Fprintf(&b, "  %s  (%s)\n", s.Source, ids)
		}
		b.WriteString("  Fix: move each by hand to <state-dir>/vaults/<office key> of the conversation it belongs to (`hutch office key <platform> <conversation-id>` prints the key), or remove it; then migrate again.\n")
	}
	if len(p.Foreign) > 0 {
		b.WriteString("Containers not managed by hutch (an earlier installation's) bind raw-id paths; moving a path from under a container would split its conversation's files:\n")
		for _, f := range p.Foreign {
			fmt.Fprintf(&b, "  %s (%s): %s  (%s)\n", f.Name, shortID(f.ID), f.Source, f.RawID)
		}
		b.WriteString("  Fix: keep what you need from each container, remove it (`docker rm -f <name>`), then migrate again.\n")
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// Steps lists, one line each, what running the plan would change: every
// recovery, workspace move and host-side move, in the order a run takes
// them. Entries left alone are not listed.
func (p Plan) Steps() []string {
	var out []string
	for _, r := range p.Recoveries {
		if r.Action == RecoverCommit {
			out = append(out, fmt.Sprintf("finish  %s: %s is in place (%s); record it", r.RawID, r.Target, r.Owner))
		} else {
			out = append(out, fmt.Sprintf("finish  %s: move %s -> %s (%s)", r.RawID, r.Source, r.Target, r.Owner))
		}
	}
	for _, m := range p.Moves {
		out = append(out, fmt.Sprintf("move    %s: %s -> %s (%s)", m.RawID, m.Source, m.Target, m.Owner))
	}
	for _, h := range p.HostMoves {
		out = append(out, fmt.Sprintf("move    %s %s: %s -> %s (%s)", h.RawID, h.Area, h.Source, h.Target, h.Owner))
	}
	return out
}
