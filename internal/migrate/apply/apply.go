// Package apply carries out the migration from the raw-id layout to
// offices: it reads the workspace and the state dir, asks the pure
// migrate package for a plan, and executes it under the office registry's
// lock, journaling every workspace move (prepared, moving, committed) so
// that a run killed at any instant resumes on the next start.
//
// Moves run in batches. A batch is marked moving in one durable write,
// renamed, the workspace root fsynced, and marked committed in one more
// write: recovery judges each moving record by which of its source and
// target exist, so a batch is as safe as a single move, and 10,000
// conversations cost a few dozen registry writes instead of 30,000.
package apply

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/hutchsandbox/hutch/internal/atomicfile"
	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/migrate"
	"github.com/hutchsandbox/hutch/internal/office"
)

// MinBatch is the least number of workspace moves that share one pair of
// journal writes by default. Every write rewrites the whole registry, so
// large migrations use larger batches: at most maxBatches of them.
const (
	MinBatch   = 1024
	maxBatches = 4
)

// Points where Options.Hook is called, in the order a run passes them.
const (
	HookPrepared  = "prepared"  // every move is journaled prepared
	HookMoving    = "moving"    // a batch is journaled moving, nothing renamed
	HookRenamed   = "renamed"   // half of a moving batch is renamed
	HookCommitted = "committed" // a batch is journaled committed
	HookHost      = "host"      // half of the vault and host state moves are done
)

// Options say what to migrate.
type Options struct {
	Workspace string
	StateDir  string
	Registry  *office.Registry
	// Enabled are the platforms whose conversations the workspace holds.
	// They are recorded in the registry.
	Enabled []office.Platform
	// DryRun plans and reports without taking the lock or changing
	// anything.
	DryRun bool
	// Batch is the number of moves per journal write pair; zero picks
	// MinBatch, or a quarter of the moves when that is more.
	Batch int
	// Progress, when set, is told how many of the moves are done.
	Progress func(done, total int)
	// Relayout, when set, is given every committed move of this workspace
	// (not only this run's: a container left behind by an earlier run is
	// caught up) so that managed containers can follow their binds. Its
	// failure is reported, not fatal: the data has moved either way.
	Relayout func(ctx context.Context, moves []migrate.Move) error
	// Containers, when set, lists the engine's containers that hutch does
	// not manage. It is called only when the workspace has or had raw-id
	// conversations, so an installation with nothing to migrate never
	// needs an engine. Its failure is reported (Report.ContainerCheckError),
	// not fatal: a host without an engine has no such containers to find.
	Containers func(ctx context.Context) ([]migrate.Container, error)
	// Hook is called at each Hook* point (crash-injection tests).
	Hook func(point string)
}

// Report is what a run did.
type Report struct {
	Plan      migrate.Plan
	Moved     int // workspace directories renamed by this run
	Recovered int // interrupted moves finished
	HostMoved int // vault and host state directories renamed
	// RelayoutError is why managed containers could not be brought onto
	// the office paths, if they could not.
	RelayoutError error
	// ContainerCheckError is why containers not managed by hutch could
	// not be looked for, if they could not.
	ContainerCheckError error
}

// Blocked is the error of a run that stopped on blockers: its message is
// the plan's Summary, the operator's instructions.
type Blocked struct{ Plan migrate.Plan }

func (b *Blocked) Error() string { return b.Plan.Summary() }

// Is makes a Blocked run an errdefs.ErrFailedPrecondition.
func (b *Blocked) Is(target error) bool { return target == errdefs.ErrFailedPrecondition }

// Run migrates. With blockers it changes nothing on disk but the journal
// (unowned directories are recorded needs-owner, unrecoverable moves
// failed, so `hutch office list` shows them) and returns a *Blocked
// error. A second run after a complete one does nothing.
func Run(ctx context.Context, o Options) (Report, error) {
	if o.Hook == nil {
		o.Hook = func(string) {}
	}
	ws, err := workspaceRoot(o.Workspace)
	if err != nil {
		return Report{}, err
	}
	o.Workspace = ws
	if o.DryRun {
		f, err := o.Registry.Load()
		if err != nil {
			return Report{}, err
		}
		var rep Report
		rep.Plan, err = plan(ctx, o, f, &rep)
		return rep, err
	}
	var rep Report
	err = o.Registry.Hold(func(j *office.Journal) error {
		var err error
		rep, err = run(ctx, o, j)
		return err
	})
	return rep, err
}

// workspaceRoot resolves the workspace root. A missing root is an empty
// workspace; a root that is a symlink is followed once here so that every
// path journaled is the real one.
func workspaceRoot(ws string) (string, error) {
	abs, err := filepath.Abs(ws)
	if err != nil {
		return "", err
	}
	real, err := filepath.EvalSymlinks(abs)
	if errors.Is(err, fs.ErrNotExist) {
		return abs, nil
	}
	if err != nil {
		return "", fmt.Errorf("resolve workspace %s: %w", abs, err)
	}
	return real, nil
}

// plan reads what planning needs and plans. When the workspace has or had
// raw-id conversations it plans again with the containers hutch does not
// manage, whose failure to list lands in rep.
func plan(ctx context.Context, o Options, f *office.File, rep *Report) (migrate.Plan, error) {
	entries, err := readEntries(o.Workspace, true)
	if err != nil {
		return migrate.Plan{}, err
	}
	stateEntries, err := readEntries(filepath.Join(o.StateDir, "conversations"), false)
	if err != nil {
		return migrate.Plan{}, err
	}
	vaultEntries, err := readEntries(filepath.Join(o.StateDir, "vaults"), false)
	if err != nil {
		return migrate.Plan{}, err
	}
	in := migrate.Input{
		WorkspaceRoot: o.Workspace,
		Entries:       entries,
		Enabled:       o.Enabled,
		Claims:        claims(f, o.Workspace),
		Records:       f.Migrations,
		StateDir:      o.StateDir,
		StateEntries:  stateEntries,
		VaultEntries:  vaultEntries,
		Offices:       f.Offices,
	}
	p, err := migrate.Build(in)
	if err != nil || o.Containers == nil || !hasRawIDs(p, f, o.Workspace) {
		return p, err
	}
	cs, cerr := o.Containers(ctx)
	if cerr != nil {
		rep.ContainerCheckError = cerr
		return p, nil
	}
	in.Containers = cs
	return migrate.Build(in)
}

// hasRawIDs reports whether the workspace has or had raw-id
// conversations: anything planned or blocked, or any record of it.
func hasRawIDs(p migrate.Plan, f *office.File, ws string) bool {
	if len(p.Steps()) > 0 || len(p.Blockers()) > 0 {
		return true
	}
	for _, m := range f.Migrations {
		if m.WorkspaceRoot == ws {
			return true
		}
	}
	return false
}

// claims are the owners operators named with `hutch office claim`: the
// prepared records of this workspace. (A prepared record of an earlier,
// interrupted run carries the owner that run inferred, which planning
// infers again the same way.)
func claims(f *office.File, ws string) map[string]office.Platform {
	out := map[string]office.Platform{}
	for _, m := range f.Migrations {
		if m.Status == office.MigrationPrepared && m.WorkspaceRoot == ws && m.OwnerPlatform != "" {
			out[m.RawConversationID] = m.OwnerPlatform
		}
	}
	return out
}

// readEntries lists dir without following symlinks. A missing dir has no
// entries. withContent also looks for conversation content (log.jsonl or
// sessions/) in each directory.
func readEntries(dir string, withContent bool) ([]migrate.Entry, error) {
	des, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", dir, err)
	}
	out := make([]migrate.Entry, 0, len(des))
	for _, de := range des {
		e := migrate.Entry{Name: de.Name(), IsDir: de.IsDir(), IsSymlink: de.Type()&fs.ModeSymlink != 0}
		if e.IsDir && withContent {
			e.HasConversationContent = exists(filepath.Join(dir, de.Name(), "log.jsonl")) || exists(filepath.Join(dir, de.Name(), "sessions"))
		}
		out = append(out, e)
	}
	return out, nil
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

func run(ctx context.Context, o Options, j *office.Journal) (Report, error) {
	f := j.File()
	now := o.Registry.Now()
	enabled := slices.Clone(o.Enabled)
	slices.Sort(enabled)
	enabled = slices.Compact(enabled)
	// Written with the first journal write below (every run makes one).
	f.EnabledPlatforms = enabled
	var rep Report
	p, err := plan(ctx, o, f, &rep)
	if err != nil {
		return Report{}, err
	}
	rep.Plan = p
	jr := newJournal(f, o.Workspace, now)
	if o.Batch <= 0 {
		o.Batch = max(MinBatch, (len(p.Moves)+maxBatches-1)/maxBatches)
	}

	if len(p.Blockers()) > 0 {
		for _, u := range p.Unowned {
			if u.Area == migrate.AreaWorkspace {
				jr.set(u.RawID, "", office.MigrationNeedsOwner, "")
			}
		}
		for _, fl := range p.Failed {
			if fl.New {
				jr.set(fl.RawID, "", office.MigrationFailed, fl.Error)
			}
		}
		if err := j.Save(); err != nil {
			return rep, err
		}
		return rep, &Blocked{Plan: p}
	}

	total := len(p.Recoveries) + len(p.Moves)
	done := 0
	progress := func() {
		if o.Progress != nil && total > 0 {
			o.Progress(done, total)
		}
	}

	// Interrupted moves: those whose target exists are committed as they
	// are; the rest are renamed first.
	var again []migrate.Move
	for _, r := range p.Recoveries {
		if r.Action == migrate.RecoverMove {
			again = append(again, r.Move)
			continue
		}
		jr.commit(r.Move)
		rep.Recovered++
		done++
	}
	if err := j.Save(); err != nil {
		return rep, err
	}
	progress()
	n, err := moveBatches(ctx, o, j, jr, again, &done, progress)
	rep.Recovered += n
	if err != nil {
		return rep, err
	}

	if len(p.Moves) > 0 {
		for _, m := range p.Moves {
			jr.set(m.RawID, m.Owner, office.MigrationPrepared, "")
		}
		if err := j.Save(); err != nil {
			return rep, err
		}
		o.Hook(HookPrepared)
	}
	rep.Moved, err = moveBatches(ctx, o, j, jr, p.Moves, &done, progress)
	if err != nil {
		return rep, err
	}

	for i, h := range p.HostMoves {
		if i == len(p.HostMoves)/2 {
			o.Hook(HookHost)
		}
		if err := renameNew(h.Source, h.Target); err != nil {
			return rep, fmt.Errorf("move %s %s: %w", h.Area, h.RawID, err)
		}
		rep.HostMoved++
	}
	if rep.HostMoved > 0 {
		if err := syncParents(p.HostMoves); err != nil {
			return rep, err
		}
	}

	if o.Relayout != nil {
		rep.RelayoutError = o.Relayout(ctx, committedMoves(j.File(), o.Workspace))
	}
	return rep, nil
}

// moveBatches journals, renames and commits moves a batch at a time.
func moveBatches(ctx context.Context, o Options, j *office.Journal, jr *journal, moves []migrate.Move, done *int, progress func()) (int, error) {
	moved := 0
	for start := 0; start < len(moves); start += o.Batch {
		if err := ctx.Err(); err != nil {
			return moved, err
		}
		batch := moves[start:min(start+o.Batch, len(moves))]
		for _, m := range batch {
			jr.set(m.RawID, m.Owner, office.MigrationMoving, "")
		}
		if err := j.Save(); err != nil {
			return moved, err
		}
		o.Hook(HookMoving)
		for i, m := range batch {
			if i == len(batch)/2 {
				o.Hook(HookRenamed)
			}
			if err := renameNew(m.Source, m.Target); err != nil {
				// The record stays moving: the next run judges it by what
				// exists, which is what this one would do now.
				return moved, fmt.Errorf("move conversation %s: %w", m.RawID, err)
			}
		}
		// The renames must be durable before the journal says so, or a
		// power cut could leave a committed record over a source that is
		// back.
		if err := atomicfile.SyncDir(o.Workspace); err != nil {
			return moved, err
		}
		for _, m := range batch {
			jr.commit(m)
		}
		if err := j.Save(); err != nil {
			return moved, err
		}
		o.Hook(HookCommitted)
		moved += len(batch)
		*done += len(batch)
		progress()
	}
	return moved, nil
}

// renameNew renames source to target, refusing to replace a target that
// appeared since planning (rename(2) would replace an empty directory
// silently).
func renameNew(source, target string) error {
	if _, err := os.Lstat(target); err == nil {
		return errdefs.New(errdefs.ErrFailedPrecondition, migrate.MsgTargetExists+": "+target)
	}
	return os.Rename(source, target)
}

func syncParents(moves []migrate.HostMove) error {
	dirs := map[string]bool{}
	for _, h := range moves {
		dirs[filepath.Dir(h.Target)] = true
	}
	for d := range dirs {
		if err := atomicfile.SyncDir(d); err != nil {
			return err
		}
	}
	return nil
}

// committedMoves lists every committed workspace move of ws.
func committedMoves(f *office.File, ws string) []migrate.Move {
	var out []migrate.Move
	for _, m := range f.Migrations {
		if m.Status != office.MigrationCommitted || m.WorkspaceRoot != ws || m.OwnerPlatform == "" {
			continue
		}
		k := office.Address{Platform: m.OwnerPlatform, ConversationID: m.RawConversationID}.Key()
		out = append(out, migrate.Move{RawID: m.RawConversationID, Owner: m.OwnerPlatform, Source: m.SourceDir, Target: m.TargetDir, Key: k})
	}
	return out
}

// journal indexes the registry's migration records and offices of one
// workspace so that thousands of updates stay linear.
type journal struct {
	f       *office.File
	ws      string
	at      time.Time
	index   map[string]int // raw id -> index in f.Migrations
	offices map[office.Address]bool
}

func newJournal(f *office.File, ws string, at time.Time) *journal {
	jr := &journal{f: f, ws: ws, at: at, index: map[string]int{}, offices: map[office.Address]bool{}}
	for i, m := range f.Migrations {
		if m.WorkspaceRoot == ws {
			jr.index[m.RawConversationID] = i
		}
	}
	for _, r := range f.Offices {
		jr.offices[r.Address()] = true
	}
	return jr
}

// set writes the record of rawID (adding it if new).
func (jr *journal) set(rawID string, owner office.Platform, st office.MigrationStatus, errText string) {
	r := office.MigrationRecord{
		RawConversationID: rawID,
		SourceDir:         filepath.Join(jr.ws, rawID),
		WorkspaceRoot:     jr.ws,
		Status:            st,
		Error:             errText,
		UpdatedAt:         jr.at,
	}
	if owner != "" {
		r.OwnerPlatform = owner
		r.TargetDir = office.Dir(jr.ws, office.Address{Platform: owner, ConversationID: rawID}.Key())
	}
	if i, ok := jr.index[rawID]; ok {
		jr.f.Migrations[i] = r
		return
	}
	jr.index[rawID] = len(jr.f.Migrations)
	jr.f.Migrations = append(jr.f.Migrations, r)
}

// commit marks m committed and records its office.
func (jr *journal) commit(m migrate.Move) {
	jr.set(m.RawID, m.Owner, office.MigrationCommitted, "")
	a := office.Address{Platform: m.Owner, ConversationID: m.RawID}
	if !jr.offices[a] {
		jr.offices[a] = true
		jr.f.Offices = append(jr.f.Offices, office.OfficeRecord{Platform: a.Platform, ConversationID: a.ConversationID, RecordedAt: jr.at})
	}
}
