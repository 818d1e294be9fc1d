package office

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/hutchsandbox/hutch/internal/errdefs"
)

// Ensure makes sure a's office exists under workspace and returns its
// directory. The workspace root is created (0700) when missing. The office
// is recorded in reg before its directory is made, so every office
// directory hutch creates is in the registry even if the process dies
// right after mkdir; the reverse (a record without a directory) is
// harmless and fixed by the next Ensure.
//
// The workspace root is shared with runtimes that may see all of it, so a
// symlink or file planted where an office belongs is refused, never
// followed: errdefs.ErrFailedPrecondition.
func Ensure(reg *Registry, workspace string, a Address) (string, error) {
	if err := a.Validate(); err != nil {
		return "", err
	}
	if workspace == "" {
		return "", errdefs.New(errdefs.ErrInvalid, "Workspace root must not be empty")
	}
	if err := ensurePrivateDir(workspace, "Workspace root", true); err != nil {
		return "", err
	}
	if _, err := reg.Record(a); err != nil {
		return "", err
	}
	dir := Dir(workspace, a.Key())
	if err := ensurePrivateDir(dir, "Office directory", false); err != nil {
		return "", err
	}
	return dir, nil
}

// EnsureStateDir makes sure the host-only state directory of k exists
// (0700, with <state>/conversations) and returns it. The state dir itself
// must exist already. A symlink or file in the way is refused with
// errdefs.ErrFailedPrecondition.
func EnsureStateDir(stateDir string, k Key) (string, error) {
	if _, err := ParseKey(string(k)); err != nil {
		return "", err
	}
	if stateDir == "" {
		return "", errdefs.New(errdefs.ErrInvalid, "State dir must not be empty")
	}
	if err := ensurePrivateDir(filepath.Join(stateDir, conversationsDir), "Conversation state root", false); err != nil {
		return "", err
	}
	dir := StateDir(stateDir, k)
	if err := ensurePrivateDir(dir, "Office state directory", false); err != nil {
		return "", err
	}
	return dir, nil
}

// ensurePrivateDir makes sure path is a real directory, creating it with
// mode 0700 when missing (with its parents when parents is set). An
// existing directory keeps its mode: an operator may have widened it on
// purpose. what names the directory in the refusal text.
func ensurePrivateDir(path, what string, parents bool) error {
	refuse := errdefs.New(errdefs.ErrFailedPrecondition, what+" must be a regular non-symlink directory: "+path)
	fi, err := os.Lstat(path)
	if err == nil {
		if !fi.IsDir() {
			return refuse
		}
		return nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("inspect %s: %w", path, err)
	}
	mkdir := os.Mkdir
	if parents {
		mkdir = os.MkdirAll
	}
	if err := mkdir(path, 0o700); err != nil {
		if errors.Is(err, fs.ErrExist) {
			// Lost a race with another creator; judge what it made.
			return ensurePrivateDir(path, what, false)
		}
		return fmt.Errorf("create %s: %w", path, err)
	}
	// The umask may have narrowed the mode, even to nothing; set it
	// explicitly, through a descriptor opened without following links, so
	// a symlink swapped in after the mkdir is refused instead of having its
	// target chmodded. O_PATH needs no read permission on the directory,
	// which a 0000 mkdir under an all-masking umask would not grant.
	fd, err := unix.Open(path, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
		return refuse
	}
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	defer func() { _ = unix.Close(fd) }()
	if err := fchmodPath(fd, path, 0o700); err != nil {
		return fmt.Errorf("chmod %s: %w", path, err)
	}
	return nil
}

// fchmodPath changes the mode of the inode an O_PATH descriptor refers to.
// fchmod itself refuses O_PATH descriptors, so it uses fchmodat2 with
// AT_EMPTY_PATH (Linux 6.6+), else the descriptor's /proc/self/fd link
// (as the C library does), else, with no /proc, a chmod by name after
// checking the name still leads to the same inode.
func fchmodPath(fd int, path string, mode uint32) error {
	err := unix.Fchmodat(fd, "", mode, unix.AT_EMPTY_PATH)
	if !errors.Is(err, unix.EOPNOTSUPP) && !errors.Is(err, unix.ENOSYS) {
		return err
	}
	err = unix.Chmod("/proc/self/fd/"+strconv.Itoa(fd), mode)
	if !errors.Is(err, unix.ENOENT) {
		return err
	}
	var byFD, byName unix.Stat_t
	if err := unix.Fstat(fd, &byFD); err != nil {
		return err
	}
	if err := unix.Lstat(path, &byName); err != nil {
		return err
	}
	if byFD.Dev != byName.Dev || byFD.Ino != byName.Ino {
		return unix.ESTALE
	}
	return unix.Chmod(path, mode)
}
