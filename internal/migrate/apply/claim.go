package apply

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/office"
)

// Claim names the owner of a raw-id conversation that no single enabled
// platform's id format settles (or re-claims one whose migration failed,
// once its cause is fixed). It journals a prepared record; the next
// migration performs the move. Run it with the daemon stopped.
func Claim(reg *office.Registry, workspace, stateDir string, enabled []office.Platform, rawID string, owner office.Platform) error {
	if err := office.ValidateConversationID(rawID); err != nil {
		return err
	}
	if !owner.Valid() {
		return errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("Unsupported platform: %q", owner))
	}
	if !slices.Contains(enabled, owner) {
		return errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("Owner platform %s is not enabled (enabled: %s); set them with hutch office platforms or --platforms", owner, names(enabled)))
	}
	ws, err := workspaceRoot(workspace)
	if err != nil {
		return err
	}
	source := filepath.Join(ws, rawID)
	target := office.Dir(ws, office.Address{Platform: owner, ConversationID: rawID}.Key())
	if !isDir(source) && !isDir(filepath.Join(stateDir, "conversations", rawID)) {
		return errdefs.New(errdefs.ErrNotFound, fmt.Sprintf("No conversation directory %s (nor host state of %q) to claim", source, rawID))
	}
	if exists(target) && exists(source) {
		return errdefs.New(errdefs.ErrFailedPrecondition, fmt.Sprintf("%s: %s and %s; merge them by hand, then claim again", "Target office directory already exists", source, target))
	}
	return reg.Hold(func(j *office.Journal) error {
		f := j.File()
		for _, m := range f.Migrations {
			if m.WorkspaceRoot != ws || m.RawConversationID != rawID {
				continue
			}
			switch m.Status {
			case office.MigrationCommitted:
				return errdefs.New(errdefs.ErrFailedPrecondition, fmt.Sprintf("%s was migrated to %s already", rawID, m.TargetDir))
			case office.MigrationMoving:
				return errdefs.New(errdefs.ErrFailedPrecondition, fmt.Sprintf("The move of %s was interrupted; run hutch migrate to finish it", rawID))
			}
		}
		newJournal(f, ws, reg.Now()).set(rawID, owner, office.MigrationPrepared, "")
		return j.Save()
	})
}

func isDir(path string) bool {
	fi, err := os.Lstat(path)
	return err == nil && fi.IsDir()
}

func names(ps []office.Platform) string {
	if len(ps) == 0 {
		return "none"
	}
	out := ""
	for i, p := range ps {
		if i > 0 {
			out += ","
		}
		out += string(p)
	}
	return out
}

// ForgetFailed removes failed migration records of workspace: those of
// ids, or every one when ids is empty. A failed record stops every
// migration until it goes, and one whose conversation is gone for good
// ("Neither legacy source nor office target exists") cannot be retried by
// a claim. Only the records go: no directory is touched, and no record
// that is not failed is ever removed. An id with no failed record is an
// error (ErrNotFound, or ErrFailedPrecondition when its migration is in
// another state) and nothing is removed. It takes the registry's lock like
// every writer and returns the records it removed, sorted by raw id.
func ForgetFailed(reg *office.Registry, workspace string, ids []string) ([]office.MigrationRecord, error) {
	for _, id := range ids {
		if err := office.ValidateConversationID(id); err != nil {
			return nil, err
		}
	}
	ws, err := workspaceRoot(workspace)
	if err != nil {
		return nil, err
	}
	var removed []office.MigrationRecord
	err = reg.Update(func(f *office.File) error {
		removed = nil
		status := map[string]office.MigrationStatus{}
		for _, m := range f.Migrations {
			if m.WorkspaceRoot == ws {
				status[m.RawConversationID] = m.Status
			}
		}
		for _, id := range ids {
			switch st, ok := status[id]; {
			case !ok:
				return errdefs.New(errdefs.ErrNotFound, fmt.Sprintf("No migration of %q is recorded for workspace %s", id, ws))
			case st != office.MigrationFailed:
				return errdefs.New(errdefs.ErrFailedPrecondition, fmt.Sprintf("The migration of %q is %s, not failed; only failed records are forgotten", id, st))
			}
		}
		kept := f.Migrations[:0:0]
		for _, m := range f.Migrations {
			if m.WorkspaceRoot == ws && m.Status == office.MigrationFailed && (len(ids) == 0 || slices.Contains(ids, m.RawConversationID)) {
				removed = append(removed, m)
				continue
			}
			kept = append(kept, m)
		}
		f.Migrations = kept
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(removed, func(a, b office.MigrationRecord) int {
		return strings.Compare(a.RawConversationID, b.RawConversationID)
	})
	return removed, nil
}
