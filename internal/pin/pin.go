// Package pin opens a host path beneath a root without following any
// symbolic link on the way, and keeps the opened file. An engine resolves
// a bind mount's source by name when it starts a container, after hutch
// checked it, and a runtime that can write the workspace can swap a
// checked directory for a link in between. Holding what was checked lets
// the caller compare it, by device and inode, with what the engine
// mounted, and the open file keeps its inode from being reused meanwhile.
package pin

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/hutchsandbox/hutch/internal/errdefs"
)

// File is a path opened (O_PATH) beneath a root with no link followed.
type File struct {
	fd int
	// Path is the path that was opened.
	Path string
	// Dev and Ino identify the file opened.
	Dev, Ino uint64
}

// Open opens path, which must be root or lie beneath it (both absolute),
// walking from root one component at a time and refusing any component
// that is a symbolic link. root itself is opened as it resolves: it is
// the operator's path (a workspace under a linked /home is common), not
// one a runtime can write. Errors are of class errdefs.ErrFailedPrecondition
// for a link, errdefs.ErrNotFound for a missing component.
func Open(root, path string) (*File, error) {
	root, path = filepath.Clean(root), filepath.Clean(path)
	rel, err := filepath.Rel(root, path)
	if err != nil || !filepath.IsAbs(root) || !filepath.IsAbs(path) || rel == ".." || strings.HasPrefix(rel, "../") {
		return nil, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("%s is not beneath %s", path, root))
	}
	fd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, openError(root, err)
	}
	cur := root
	if rel != "." {
		for comp := range strings.SplitSeq(rel, "/") {
			cur = filepath.Join(cur, comp)
			next, err := unix.Openat(fd, comp, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			_ = unix.Close(fd)
			if err != nil {
				return nil, openError(cur, err)
			}
			fd = next
			var st unix.Stat_t
			if err := unix.Fstat(fd, &st); err != nil {
				_ = unix.Close(fd)
				return nil, openError(cur, err)
			}
			if st.Mode&unix.S_IFMT == unix.S_IFLNK {
				_ = unix.Close(fd)
				return nil, errdefs.New(errdefs.ErrFailedPrecondition, fmt.Sprintf(
					"%s is a symbolic link: hutch mounts nothing through a link in the workspace (a runtime that can write there may have put it in place of what was there). Remove it.", cur))
			}
		}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		_ = unix.Close(fd)
		return nil, openError(path, err)
	}
	return &File{fd: fd, Path: path, Dev: st.Dev, Ino: st.Ino}, nil
}

// Same reports whether dev and ino identify the file that was opened.
func (f *File) Same(dev, ino uint64) bool { return f.Dev == dev && f.Ino == ino }

// Close releases the file.
func (f *File) Close() error { return unix.Close(f.fd) }

func openError(path string, err error) error {
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
		return errdefs.New(errdefs.ErrNotFound, fmt.Sprintf("%s does not exist", path))
	}
	return fmt.Errorf("open %s: %w", path, err)
}
