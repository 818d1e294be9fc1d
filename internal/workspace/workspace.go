package workspace

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/projection"
)

// Labels name a mount's path in errors, the way operators know them.
const (
	LabelRoot   = "Workspace root"
	LabelOffice = "Office directory"
	LabelMemory = "Shared MEMORY.md"
	LabelSkills = "Shared skills"
	LabelEvents = "Shared events"
)

const (
	dirMode  fs.FileMode = 0o700
	fileMode fs.FileMode = 0o600
)

// EnsureRoot creates the workspace root (and missing parents) with mode
// 0700 when it does not exist, and otherwise checks that it is a directory
// and not a symlink; an existing root keeps its mode. The root must be
// absolute, because it becomes the source of bind mounts.
func EnsureRoot(root string) error {
	if !filepath.IsAbs(root) {
		return errdefs.New(errdefs.ErrInvalid, "Workspace root must be an absolute path: "+root)
	}
	root = filepath.Clean(root)
	if _, err := os.Lstat(root); errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(filepath.Dir(root), dirMode); err != nil {
			return fmt.Errorf("create workspace root %s: %w", root, err)
		}
		// Two first commands may race here; the loser finds the
		// directory made and checks it like any existing one.
		if err := mkdir(root); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("create workspace root %s: %w", root, err)
		}
	}
	return check(root, LabelRoot, projection.EntryDir)
}

// Materialize prepares the host side of mounts (a plan from
// projection.Plan). Shared MEMORY.md is created empty (0600) and shared
// skills/ and events/ (0700) when missing; the office and a full-layout
// root are only checked, because creating an office is the office
// registry's job and a missing one means the plan is for the wrong place.
// Every mount's path must be of its planned type and not a symlink, and
// so must the directory holding it.
func Materialize(mounts []projection.Mount) error {
	for _, m := range mounts {
		label, create, err := roleInfo(m)
		if err != nil {
			return err
		}
		if m.Role != projection.RoleRoot {
			if err := checkParent(filepath.Dir(m.HostPath)); err != nil {
				return err
			}
		}
		if create {
			if err := createMissing(m); err != nil {
				return err
			}
		}
		if err := check(m.HostPath, label, m.Type); err != nil {
			return err
		}
	}
	return nil
}

// roleInfo returns the label of m's role and whether Materialize may
// create m's path.
func roleInfo(m projection.Mount) (label string, create bool, err error) {
	if m.Type != projection.EntryDir && m.Type != projection.EntryFile {
		return "", false, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("Unknown mount entry type %q for %s", string(m.Type), m.HostPath))
	}
	if !filepath.IsAbs(m.HostPath) {
		return "", false, errdefs.New(errdefs.ErrInvalid, "Mount host path must be absolute: "+m.HostPath)
	}
	switch m.Role {
	case projection.RoleRoot:
		return LabelRoot, false, nil
	case projection.RoleOffice:
		return LabelOffice, false, nil
	case projection.RoleMemory:
		return LabelMemory, true, nil
	case projection.RoleSkills:
		return LabelSkills, true, nil
	case projection.RoleEvents:
		return LabelEvents, true, nil
	}
	return "", false, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("Unknown mount role %q for %s", string(m.Role), m.HostPath))
}

// checkParent refuses to create or bind anything under a symlinked or
// missing workspace root.
func checkParent(dir string) error {
	return check(dir, LabelRoot, projection.EntryDir)
}

// createMissing creates m's path when nothing is there. An entry that
// appears meanwhile (or a dangling symlink, which O_EXCL and mkdir both
// refuse to follow) is left for check to judge.
func createMissing(m projection.Mount) error {
	if _, err := os.Lstat(m.HostPath); !errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	var err error
	if m.Type == projection.EntryFile {
		err = createFile(m.HostPath)
	} else {
		err = mkdir(m.HostPath)
	}
	if err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("create %s: %w", m.HostPath, err)
	}
	return nil
}

// createFile creates an empty file exclusively, then sets its mode past
// the umask.
func createFile(path string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, fileMode)
	if err != nil {
		return err
	}
	if err := f.Chmod(fileMode); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// mkdir creates one directory, then sets its mode past the umask.
func mkdir(path string) error {
	if err := os.Mkdir(path, dirMode); err != nil {
		return err
	}
	return os.Chmod(path, dirMode)
}

// check refuses a path that is missing (ErrNotFound), a symlink or of the
// wrong type (ErrFailedPrecondition).
func check(path, label string, want projection.EntryType) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return errdefs.New(errdefs.ErrNotFound, fmt.Sprintf("%s does not exist: %s", label, path))
	}
	if err != nil {
		return fmt.Errorf("check %s: %w", path, err)
	}
	ok := fi.Mode().IsRegular()
	kind := "file"
	if want == projection.EntryDir {
		ok, kind = fi.IsDir(), "directory"
	}
	if !ok { // a symlink is neither IsRegular nor IsDir under Lstat
		return errdefs.New(errdefs.ErrFailedPrecondition, fmt.Sprintf("%s must be a regular non-symlink %s: %s", label, kind, path))
	}
	return nil
}
