// Package beneath opens, reads and writes host paths beneath a root
// without following any symbolic link below it. Whatever a runtime can
// write (an office, a project checkout) may hold a link it planted where
// hutch will later look: a bind source an engine resolves by name at the
// next start, a .git/info/exclude hutch appends to. Walking one component
// at a time with O_NOFOLLOW, and replacing files by rename within the
// directory that was walked, keeps every such access on the files the
// root really holds. Open keeps the opened file, so what was checked can
// be compared, by device and inode, with what an engine mounted later;
// the open file also keeps its inode from being reused meanwhile.
package beneath

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
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
	comps, err := split(root, path)
	if err != nil {
		return nil, err
	}
	fd, err := walk(root, comps, 0)
	if err != nil {
		return nil, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		_ = unix.Close(fd)
		return nil, openError(path, err)
	}
	return &File{fd: fd, Path: filepath.Clean(path), Dev: st.Dev, Ino: st.Ino}, nil
}

// Same reports whether dev and ino identify the file that was opened.
func (f *File) Same(dev, ino uint64) bool { return f.Dev == dev && f.Ino == ino }

// Close releases the file.
func (f *File) Close() error { return unix.Close(f.fd) }

// Dup returns a descriptor of the same open file as an *os.File, to hand
// to a child process (exec.Cmd.ExtraFiles): a child that opens
// /proc/self/fd/N reaches the file opened here, whatever has since been
// renamed or linked at its path. The caller closes it.
func (f *File) Dup() (*os.File, error) {
	fd, err := unix.FcntlInt(uintptr(f.fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, openError(f.Path, err)
	}
	return os.NewFile(uintptr(fd), f.Path), nil
}

// CloseAll releases every file of fs.
func CloseAll(fs []*File) {
	for _, f := range fs {
		_ = f.Close()
	}
}

// ReadFile reads the regular file path beneath root, following no link.
// A missing file is an error of class errdefs.ErrNotFound.
func ReadFile(root, path string) ([]byte, error) {
	comps, err := split(root, path)
	if err != nil {
		return nil, err
	}
	if len(comps) == 0 {
		return nil, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("%s is a directory", path))
	}
	dir, err := walk(root, comps[:len(comps)-1], 0)
	if err != nil {
		return nil, err
	}
	defer func() { _ = unix.Close(dir) }()
	fd, err := unix.Openat(dir, comps[len(comps)-1], unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, openError(path, err)
	}
	f := os.NewFile(uintptr(fd), path)
	defer func() { _ = f.Close() }()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, errdefs.New(errdefs.ErrFailedPrecondition, fmt.Sprintf("%s is not a regular file", path))
	}
	return io.ReadAll(f)
}

// WriteFile replaces path beneath root with data (mode perm): a new file
// written in the directory that was walked, then renamed over the name,
// so a link there is replaced, never followed. Missing directories are
// created (0755).
func WriteFile(root, path string, data []byte, perm os.FileMode) error {
	comps, err := split(root, path)
	if err != nil {
		return err
	}
	if len(comps) == 0 {
		return errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("%s is a directory", path))
	}
	dir, err := walk(root, comps[:len(comps)-1], 0o755)
	if err != nil {
		return err
	}
	defer func() { _ = unix.Close(dir) }()
	var suffix [6]byte
	if _, err := rand.Read(suffix[:]); err != nil {
		return err
	}
	name := comps[len(comps)-1]
	tmp := "." + name + ".hutch-" + hex.EncodeToString(suffix[:])
	fd, err := unix.Openat(dir, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, uint32(perm.Perm()))
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	f := os.NewFile(uintptr(fd), tmp)
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(perm.Perm()) // whatever the umask
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = unix.Renameat(dir, tmp, dir, name)
	}
	if err != nil {
		_ = unix.Unlinkat(dir, tmp, 0)
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// split checks that path is root or beneath it and returns the
// components from root to path.
func split(root, path string) ([]string, error) {
	root, path = filepath.Clean(root), filepath.Clean(path)
	rel, err := filepath.Rel(root, path)
	if err != nil || !filepath.IsAbs(root) || !filepath.IsAbs(path) || rel == ".." || strings.HasPrefix(rel, "../") {
		return nil, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("%s is not beneath %s", path, root))
	}
	if rel == "." {
		return nil, nil
	}
	return strings.Split(rel, "/"), nil
}

// walk opens root, then each of comps in turn with O_PATH|O_NOFOLLOW,
// refusing a link. With mkdir set, a missing component is made a
// directory of that mode. It returns an O_PATH fd of the last one.
func walk(root string, comps []string, mkdir os.FileMode) (int, error) {
	fd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, openError(root, err)
	}
	cur := root
	for _, comp := range comps {
		cur = filepath.Join(cur, comp)
		next, err := unix.Openat(fd, comp, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if errors.Is(err, unix.ENOENT) && mkdir != 0 {
			if err = unix.Mkdirat(fd, comp, uint32(mkdir.Perm())); err == nil || errors.Is(err, unix.EEXIST) {
				next, err = unix.Openat(fd, comp, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			}
		}
		_ = unix.Close(fd)
		if err != nil {
			return -1, openError(cur, err)
		}
		fd = next
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			_ = unix.Close(fd)
			return -1, openError(cur, err)
		}
		if st.Mode&unix.S_IFMT == unix.S_IFLNK {
			_ = unix.Close(fd)
			return -1, errdefs.New(errdefs.ErrFailedPrecondition, fmt.Sprintf(
				"%s is a symbolic link: hutch follows no link in a place a sandbox can write (one may have been put in place of what was there). Remove it.", cur))
		}
	}
	return fd, nil
}

func openError(path string, err error) error {
	switch {
	case errors.Is(err, unix.ENOENT):
		return errdefs.New(errdefs.ErrNotFound, fmt.Sprintf("%s does not exist", path))
	case errors.Is(err, unix.ELOOP):
		// O_NOFOLLOW on a final link (a file opened for reading).
		return errdefs.New(errdefs.ErrFailedPrecondition, fmt.Sprintf(
			"%s is a symbolic link: hutch follows no link in a place a sandbox can write (one may have been put in place of what was there). Remove it.", path))
	}
	return fmt.Errorf("open %s: %w", path, err)
}
