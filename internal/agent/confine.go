package agent

// Confinement of file operations to a set of roots.
//
// Every operation takes an absolute, clean path and a list of roots
// (absolute, clean; directories or single files). With no roots nothing
// is confined. With roots, the path is resolved with every symlink
// followed (a path that does not exist yet resolves through its nearest
// existing ancestor, the rest kept as written), each root is resolved the
// same way, and the resolved path must be a resolved root or lie under
// one that is a directory; anything else is refused with class
// errdefs.ErrFailedPrecondition and the text
// "Path <path> is outside the sandbox's workspace", naming the path as
// given. A symlink inside a root that leads into another root is fine.
//
// That check is on names; what is then opened is checked again:
//   - read, stat and list open the path with O_PATH (no side effect on
//     what is opened: no device open, no FIFO wait), read the opened
//     file's real path back from /proc/self/fd/N and refuse it when it is
//     outside the roots; only then is the file reopened through that fd
//     (never through the path again) for its bytes or entries.
//   - write resolves the parent directory and walks to it from "/" one
//     component at a time with O_NOFOLLOW, creating missing directories
//     only strictly under a root, checks the directory fd's real path,
//     and then stages, renames and fsyncs relative to that fd
//     (openat/renameat), so a parent swapped for a symlink meanwhile
//     cannot redirect the write. A final symlink is replaced, not
//     followed (as without roots), but one that leads outside is refused.
//
// Limits:
//   - Confined operations need /proc mounted; without it they fail
//     closed (class ErrFailedPrecondition).
//   - Roots are resolved at every call, following their symlinks: whoever
//     can replace a root (or one of its parents) with a symlink moves the
//     root. Pass roots the sandbox cannot replace (mount points, or
//     directories it cannot write the parents of).
//   - A hard link inside a root to a file outside is inside: its bytes
//     can be read and stat'ed. Hard links cannot cross filesystems, and a
//     write replaces the entry (rename), never an existing inode.
//   - A write's parent directory is pinned by its fd, not by its place: a
//     process that renames that directory (or an ancestor) out of the
//     roots after the check, within one filesystem, takes the new file
//     with it. Missing parents made by the walk can be moved the same way.
//   - Stat reads a final symlink's own text (FileInfo.Link) by path after
//     the check; that is the link's text only, never a file's bytes.
//   - A file deleted while open reads back as "<path> (deleted)" from
//     /proc and is refused as outside.
//   - Error texts name the path as given; the class and text of a failure
//     met while resolving outside the roots (missing, not a directory, no
//     permission) are replaced by the outside refusal, so the existence
//     and kind of things outside do not show, nor do their bytes ever.

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/sandbox"
)

// maxSymlinks bounds how many symlinks one resolution follows.
const maxSymlinks = 255

// ReadFileWithin copies the regular file at path (absolute and clean)
// into w, refusing a path that resolves outside roots (none: no
// confinement). Missing: errdefs.ErrNotFound.
func ReadFileWithin(path string, roots []string, w io.Writer) error {
	f, err := openForRead(path, roots)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	src := &errReader{r: f}
	if _, err := io.Copy(w, src); err != nil {
		if src.err != nil {
			return fileError("read", path, src.err)
		}
		return fmt.Errorf("read %s: %w", path, err)
	}
	return nil
}

// WriteFileWithin replaces the file at path (absolute and clean)
// atomically with what r yields, creating missing parents (only under a
// root when roots are given). A zero mode keeps an existing file's mode
// (0644 for a new one). A symlink at path is replaced, not followed; one
// that leads outside roots is refused.
func WriteFileWithin(path string, roots []string, r io.Reader, mode os.FileMode) error {
	var m *os.FileMode
	if mode != 0 {
		mode = mode.Perm()
		m = &mode
	}
	_, err := writeWithin(path, roots, r, m)
	return err
}

// StatWithin describes what path resolves to (like os.Stat); when path
// itself is a symlink, Link holds its target. Name is path's last element.
func StatWithin(path string, roots []string) (sandbox.FileInfo, error) {
	if err := CheckPath(path); err != nil {
		return sandbox.FileInfo{}, err
	}
	c, err := confine("stat", path, roots)
	if err != nil {
		return sandbox.FileInfo{}, err
	}
	fd, st, err := c.openPath("stat", path)
	if err != nil {
		return sandbox.FileInfo{}, err
	}
	_ = unix.Close(fd)
	fi := fileInfo(filepath.Base(path), &st)
	if lfi, err := os.Lstat(path); err == nil && lfi.Mode()&os.ModeSymlink != 0 {
		fi.Link, _ = os.Readlink(path)
	}
	return fi, nil
}

// ListWithin returns the entries of the directory path resolves to,
// sorted by name. Entries are not followed: a symlink is reported as one,
// with Link set, wherever it points.
func ListWithin(path string, roots []string) ([]sandbox.FileInfo, error) {
	if err := CheckPath(path); err != nil {
		return nil, err
	}
	c, err := confine("list", path, roots)
	if err != nil {
		return nil, err
	}
	fd, st, err := c.openPath("list", path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = unix.Close(fd) }()
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return nil, errdefs.New(errdefs.ErrInvalid, "Path is not a directory: "+path)
	}
	dfd, err := unix.Openat(fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fileError("list", path, err)
	}
	d := os.NewFile(uintptr(dfd), path)
	defer func() { _ = d.Close() }()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, fileError("list", path, err)
	}
	slices.Sort(names)
	infos := make([]sandbox.FileInfo, 0, len(names))
	for _, name := range names {
		var est unix.Stat_t
		if err := unix.Fstatat(dfd, name, &est, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue // removed meanwhile
			}
			return nil, fileError("list", path, err)
		}
		fi := fileInfo(name, &est)
		if est.Mode&unix.S_IFMT == unix.S_IFLNK {
			fi.Link = readlinkat(dfd, name)
		}
		infos = append(infos, fi)
	}
	return infos, nil
}

// openForRead opens path's regular file for reading, confined to roots.
func openForRead(path string, roots []string) (*os.File, error) {
	if err := CheckPath(path); err != nil {
		return nil, err
	}
	c, err := confine("read", path, roots)
	if err != nil {
		return nil, err
	}
	var f *os.File
	if c == nil {
		// O_NONBLOCK: opening a FIFO must not wait for a writer.
		if f, err = os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0); err != nil {
			return nil, fileError("read", path, err)
		}
	} else {
		fd, st, err := c.openPath("read", path)
		if err != nil {
			return nil, err
		}
		defer func() { _ = unix.Close(fd) }()
		if err := regularFile(path, st.Mode); err != nil {
			return nil, err
		}
		// Reopen the checked file itself, never the path again.
		if f, err = os.OpenFile(fdPath(fd), os.O_RDONLY|syscall.O_NONBLOCK, 0); err != nil {
			return nil, fileError("read", path, err)
		}
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		_ = f.Close()
		return nil, fileError("read", path, err)
	}
	if err := regularFile(path, st.Mode); err != nil {
		_ = f.Close()
		return nil, err
	}
	return f, nil
}

func regularFile(path string, mode uint32) error {
	switch mode & unix.S_IFMT {
	case unix.S_IFREG:
		return nil
	case unix.S_IFDIR:
		return errdefs.New(errdefs.ErrInvalid, "Path is a directory: "+path)
	}
	return errdefs.New(errdefs.ErrInvalid, "Path is not a regular file: "+path)
}

// writeWithin is writeAtomic confined to roots (none: writeAtomic).
func writeWithin(path string, roots []string, r io.Reader, mode *os.FileMode) (int64, error) {
	if err := CheckPath(path); err != nil {
		return 0, err
	}
	c, err := confine("write", path, roots)
	if err != nil {
		return 0, err
	}
	if c == nil {
		return writeAtomic(path, r, mode)
	}
	if path == "/" {
		return 0, errdefs.New(errdefs.ErrInvalid, "Path is a directory: "+path)
	}
	name := filepath.Base(path)
	dir, at, err := resolvePath(filepath.Dir(path))
	if err != nil {
		return 0, c.resolveError("write", path, at, err)
	}
	dfd, err := c.walkDir(dir, path)
	if err != nil {
		return 0, err
	}
	defer func() { _ = unix.Close(dfd) }()
	real, err := c.fdRealPath(dfd, path)
	if err != nil {
		return 0, err
	}
	if entry := filepath.Join(real, name); !c.within(entry) && !slices.Contains(c.entries, entry) {
		return 0, outside(path)
	}
	return writeInDir(dfd, path, name, r, mode)
}

// confinement holds resolved roots; a nil one confines nothing.
type confinement struct {
	// roots are the roots resolved.
	roots []string
	// entries are the roots' own directory entries (their parent
	// resolved, their last element as given): a write may replace a root
	// that is a symlink to a file.
	entries []string
}

// confine resolves roots (nil for none) and checks that path resolves
// within them.
func confine(verb, path string, roots []string) (*confinement, error) {
	if len(roots) == 0 {
		return nil, nil
	}
	c := &confinement{}
	for _, root := range roots {
		if err := CheckPath(root); err != nil {
			return nil, errdefs.New(errdefs.ErrInvalid, "Root is not valid: "+err.Error())
		}
		real, _, err := resolvePath(root)
		if err != nil {
			return nil, errdefs.New(errdefs.ErrFailedPrecondition, fmt.Sprintf("Root %s cannot be resolved: %v", root, cause(err)))
		}
		c.roots = append(c.roots, real)
		if root != "/" {
			if dir, _, err := resolvePath(filepath.Dir(root)); err == nil {
				c.entries = append(c.entries, filepath.Join(dir, filepath.Base(root)))
			}
		}
	}
	real, at, err := resolvePath(path)
	if err != nil {
		return nil, c.resolveError(verb, path, at, err)
	}
	if !c.within(real) {
		return nil, outside(path)
	}
	return c, nil
}

// outside is the refusal of a path that leads out of the roots.
func outside(path string) error { return sandbox.OutsideRefusal(path) }

// within reports whether the resolved path p is a root or under one.
func (c *confinement) within(p string) bool {
	for _, r := range c.roots {
		if p == r || r == "/" || strings.HasPrefix(p, r+"/") {
			return true
		}
	}
	return false
}

// under reports whether the resolved path p lies strictly under a root.
func (c *confinement) under(p string) bool {
	for _, r := range c.roots {
		if p != r && (r == "/" || strings.HasPrefix(p, r+"/")) {
			return true
		}
	}
	return false
}

// onTheWay reports whether p is on the way to the roots: within one or
// one of their ancestors.
func (c *confinement) onTheWay(p string) bool {
	if c.within(p) {
		return true
	}
	for _, r := range c.roots {
		if p == "/" || strings.HasPrefix(r, p+"/") {
			return true
		}
	}
	return false
}

// resolveError classes a resolution of path that failed at at: the real
// error when at is within the roots or on the way to them, the outside
// refusal otherwise (so nothing is said about what lies outside).
func (c *confinement) resolveError(verb, path, at string, err error) error {
	if c.onTheWay(at) {
		return fileError(verb, path, err)
	}
	return outside(path)
}

// openPath opens path with O_PATH, following symlinks, and checks where
// the opened file really is.
func (c *confinement) openPath(verb, path string) (int, unix.Stat_t, error) {
	var st unix.Stat_t
	fd, err := unix.Open(path, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, st, fileError(verb, path, err)
	}
	if c != nil {
		real, err := c.fdRealPath(fd, path)
		if err == nil && !c.within(real) {
			err = outside(path)
		}
		if err != nil {
			_ = unix.Close(fd)
			return -1, st, err
		}
	}
	if err := unix.Fstat(fd, &st); err != nil {
		_ = unix.Close(fd)
		return -1, st, fileError(verb, path, err)
	}
	return fd, st, nil
}

func fdPath(fd int) string { return "/proc/self/fd/" + strconv.Itoa(fd) }

// fdRealPath is the path the kernel has for fd.
func (c *confinement) fdRealPath(fd int, path string) (string, error) {
	real, err := os.Readlink(fdPath(fd))
	if err != nil || !filepath.IsAbs(real) {
		return "", errdefs.New(errdefs.ErrFailedPrecondition,
			"Cannot check that "+path+" is inside the sandbox's workspace: /proc/self/fd is not readable")
	}
	return real, nil
}

// walkDir opens the resolved directory dir from "/" one component at a
// time, never following a symlink, and creates the missing components
// that lie strictly under a root (0755). path names the write in errors.
func (c *confinement) walkDir(dir, path string) (int, error) {
	fd, err := unix.Open("/", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fileError("write", path, err)
	}
	cur := "/"
	for comp := range strings.SplitSeq(strings.TrimPrefix(dir, "/"), "/") {
		if comp == "" {
			continue
		}
		cur = filepath.Join(cur, comp)
		next, err := unix.Openat(fd, comp, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if errors.Is(err, unix.ENOENT) && c.under(cur) {
			made := unix.Mkdirat(fd, comp, 0o755)
			if made != nil && !errors.Is(made, unix.EEXIST) {
				_ = unix.Close(fd)
				return -1, fileError("write", path, made)
			}
			next, err = unix.Openat(fd, comp, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if err == nil && made == nil {
				if err = unix.Fchmod(next, 0o755); err != nil { // whatever the umask
					_ = unix.Close(next)
				}
			}
		}
		_ = unix.Close(fd)
		if err != nil {
			if errors.Is(err, unix.ELOOP) {
				err = unix.ENOTDIR // a component is a symlink (swapped in meanwhile)
			}
			return -1, fileError("write", path, err)
		}
		fd = next
	}
	return fd, nil
}

// resolvePath returns the real path of the absolute path p: every symlink
// followed, like filepath.EvalSymlinks, except that components that do
// not exist are kept as written (a ".." after them applies to the name),
// so that a path yet to be made resolves too. A dangling symlink is
// followed to where it points. On error, at is the path whose lookup
// failed.
func resolvePath(p string) (real, at string, err error) {
	real = "/"
	todo := strings.TrimPrefix(p, "/")
	links := 0
	for todo != "" {
		var comp string
		comp, todo, _ = strings.Cut(todo, "/")
		switch comp {
		case "", ".":
			continue
		case "..":
			real = filepath.Dir(real)
			continue
		}
		next := filepath.Join(real, comp)
		fi, err := os.Lstat(next)
		switch {
		case errors.Is(err, unix.ENOENT):
			real = next
			continue
		case err != nil:
			return "", next, err
		case fi.Mode()&os.ModeSymlink == 0:
			real = next
			continue
		}
		if links++; links > maxSymlinks {
			return "", next, &fs.PathError{Op: "resolve", Path: p, Err: unix.ELOOP}
		}
		target, err := os.Readlink(next)
		if err != nil {
			return "", next, err
		}
		if filepath.IsAbs(target) {
			real = "/"
		}
		if todo != "" {
			target += "/" + todo
		}
		todo = target
	}
	return real, "", nil
}

// readlinkat is the target of the symlink name in dfd ("" when unreadable).
func readlinkat(dfd int, name string) string {
	for size := 256; size <= 1<<16; size *= 4 {
		buf := make([]byte, size)
		n, err := unix.Readlinkat(dfd, name, buf)
		if err != nil {
			return ""
		}
		if n < size {
			return string(buf[:n])
		}
	}
	return ""
}

// fileInfo describes st under name.
func fileInfo(name string, st *unix.Stat_t) sandbox.FileInfo {
	mode := os.FileMode(st.Mode & 0o777)
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFBLK:
		mode |= os.ModeDevice
	case unix.S_IFCHR:
		mode |= os.ModeDevice | os.ModeCharDevice
	case unix.S_IFDIR:
		mode |= os.ModeDir
	case unix.S_IFIFO:
		mode |= os.ModeNamedPipe
	case unix.S_IFLNK:
		mode |= os.ModeSymlink
	case unix.S_IFSOCK:
		mode |= os.ModeSocket
	}
	if st.Mode&unix.S_ISUID != 0 {
		mode |= os.ModeSetuid
	}
	if st.Mode&unix.S_ISGID != 0 {
		mode |= os.ModeSetgid
	}
	if st.Mode&unix.S_ISVTX != 0 {
		mode |= os.ModeSticky
	}
	return sandbox.FileInfo{
		Name:    name,
		Size:    st.Size,
		Mode:    mode,
		ModTime: time.Unix(st.Mtim.Unix()),
		IsDir:   st.Mode&unix.S_IFMT == unix.S_IFDIR,
	}
}
