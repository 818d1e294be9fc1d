package apply

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"

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
