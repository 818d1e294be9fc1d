// Package atomicfile writes files so that a reader, or a process that
// starts after a crash, sees either the old content or the new content,
// never a torn mix: the data goes to a temporary file in the same
// directory, is fsynced, renamed over the target, and the directory is
// fsynced so the rename itself survives power loss.
//
// It does not protect against two writers racing on one path (the last
// rename wins); callers that read-modify-write hold their own lock.
package atomicfile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// WriteFile atomically replaces path with data, with permission bits perm.
// The permission is set explicitly (not left to the umask), so a 0600
// credential file is 0600 on disk whatever the process umask is. A symlink
// at path is replaced, never followed.
func WriteFile(path string, data []byte, perm os.FileMode) (err error) {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, tempPrefix(path)+"*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmpName := tmp.Name()
	defer func() {
		if err != nil {
			_ = tmp.Close()
			_ = os.Remove(tmpName)
		}
	}()
	if err = tmp.Chmod(perm); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if _, err = tmp.Write(data); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err = tmp.Sync(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err = tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err = os.Rename(tmpName, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return SyncDir(dir)
}

// SyncDir fsyncs a directory so that entries created, renamed or removed
// in it are durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	defer func() { _ = d.Close() }()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}

// tempPrefix is how the names of WriteFile's temporary files for path
// begin; os.CreateTemp ends them with a run of decimal digits.
func tempPrefix(path string) string { return "." + filepath.Base(path) + ".tmp-" }

// RemoveTemps removes the temporary files that WriteFile calls on path
// left in its directory because their process died before the rename.
// Only regular files named as WriteFile names them go: a symlink,
// directory or any other name is left alone, and no link is followed
// (each entry is checked and unlinked relative to the directory, and
// unlink never follows a link or removes a directory).
//
// Call it only where no WriteFile of path can be in flight, that is
// under the lock its writers hold: a live writer's temp file looks the
// same as a dead one's.
func RemoveTemps(path string) error {
	dir := filepath.Dir(path)
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("remove temporary files of %s: %w", path, err)
	}
	defer func() { _ = d.Close() }()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return fmt.Errorf("remove temporary files of %s: %w", path, err)
	}
	prefix := tempPrefix(path)
	var errs []error
	removed := false
	for _, name := range names {
		rest, ok := strings.CutPrefix(name, prefix)
		if !ok || rest == "" || strings.Trim(rest, "0123456789") != "" {
			continue
		}
		var st unix.Stat_t
		if err := unix.Fstatat(int(d.Fd()), name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
			continue
		}
		if err := unix.Unlinkat(int(d.Fd()), name, 0); err != nil && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("remove %s: %w", filepath.Join(dir, name), err))
			continue
		}
		removed = true
	}
	if removed {
		errs = append(errs, SyncDir(dir))
	}
	return errors.Join(errs...)
}
