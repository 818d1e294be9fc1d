// Package latemount binds host directories and files into a container
// after it started. The container receives a host directory (a Point, a
// small tmpfs of hutch's) as a bind mount with rslave propagation; whatever hutch mounts beneath
// that directory on the host later appears inside the container, and
// nothing the container does propagates back (it cannot mount or unmount
// anyway: hutch's containers keep no CAP_SYS_ADMIN). A runtime started
// before its conversation is known (a warm pool's) gets the office and
// the door's mounts this way when it is handed out.
//
// Two traps shape the code. A mount made read-only after it propagated
// stays writable in the container's copy (remount flags do not
// propagate), so a read-only mount is made read-only while it is still
// detached and only then attached. And the Point's directory is the
// container's to write once handed out: every path beneath it is walked
// without following links, every mount is made and removed by file
// descriptor, and the directory is removed only once no mount is left
// beneath it, never through one into an office.
package latemount

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/mountinfo"
)

// Point is a host directory a container sees, with rslave propagation,
// at some path of its own.
type Point struct {
	// Dir is the absolute host path.
	Dir string
}

// Prepare creates p.Dir (parents 0700), mounts a small tmpfs of its own
// there (what a container writes beside its late mounts then lands in
// memory hutch caps, never on a host disk) and makes it a shared mount,
// as an rslave bind source must be. It is idempotent.
func (p Point) Prepare() error {
	if !filepath.IsAbs(p.Dir) {
		return errdefs.New(errdefs.ErrInvalid, "late mount point must be absolute: "+p.Dir)
	}
	if err := os.MkdirAll(filepath.Dir(p.Dir), 0o700); err != nil {
		return fmt.Errorf("late mount point: %w", err)
	}
	if err := os.Mkdir(p.Dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("late mount point: %w", err)
	}
	root, err := isMountRoot(p.Dir)
	if err != nil {
		return err
	}
	if !root {
		if err := unix.Mount("hutch-late", p.Dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, pointTmpfs); err != nil {
			return fmt.Errorf("late mount point %s: tmpfs: %w", p.Dir, err)
		}
	}
	if err := unix.Mount("", p.Dir, "", unix.MS_SHARED, ""); err != nil {
		return fmt.Errorf("late mount point %s: make shared: %w", p.Dir, err)
	}
	return nil
}

// pointTmpfs sizes a Point's tmpfs: room for the mount targets of a
// door's plan, nothing worth filling.
const pointTmpfs = "size=256k,nr_inodes=256,mode=0755"

// Seal makes the Point's tmpfs read-only for every mount of it, the
// container's copy included: unlike a mount's flags, a superblock's
// read-only flag is shared by all its mounts. Attach needs it writable (it
// makes the targets), so a Point is sealed once everything is attached;
// the mounts beneath keep their own flags.
func (p Point) Seal() error {
	if err := unix.Mount("", p.Dir, "", unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, pointTmpfs); err != nil {
		return fmt.Errorf("late mount point %s: seal: %w", p.Dir, err)
	}
	return nil
}

// isMountRoot reports whether dir is the root of a mount.
func isMountRoot(dir string) (bool, error) {
	var st unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, dir, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_BASIC_STATS, &st); err != nil {
		return false, fmt.Errorf("late mount point %s: %w", dir, err)
	}
	if st.Attributes_mask&unix.STATX_ATTR_MOUNT_ROOT == 0 {
		return false, errdefs.New(errdefs.ErrNotSupported, "this kernel does not say which directories are mount roots (statx, Linux 5.8)")
	}
	return st.Attributes&unix.STATX_ATTR_MOUNT_ROOT != 0, nil
}

// Attach mounts src, an open directory or regular file the caller has
// checked (beneath.File.Dup or os.Open of a path it trusts), at name in
// p.Dir: read-only when readOnly, and never setuid or device files either
// way. name is one path component (a door's mounts all sit directly in
// the runtime's workspace root), made as src's kind when missing; it
// must not be a link. One component also keeps Detach's paths stable: a
// mount point cannot be renamed or removed from inside.
func (p Point) Attach(src *os.File, name string, readOnly bool) error {
	if name == "" || name == "." || name == ".." || strings.ContainsRune(name, '/') {
		return errdefs.New(errdefs.ErrInvalid, "late mount target must be one path component: "+strconv.Quote(name))
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(src.Fd()), &st); err != nil {
		return fmt.Errorf("late mount source %s: %w", src.Name(), err)
	}
	isDir := st.Mode&unix.S_IFMT == unix.S_IFDIR
	if !isDir && st.Mode&unix.S_IFMT != unix.S_IFREG {
		return errdefs.New(errdefs.ErrInvalid, "late mount source is neither a directory nor a regular file: "+src.Name())
	}
	tree, err := unix.OpenTree(int(src.Fd()), "", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_EMPTY_PATH)
	if err != nil {
		return fmt.Errorf("late mount source %s: clone: %w", src.Name(), err)
	}
	defer func() { _ = unix.Close(tree) }()
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV}
	if readOnly {
		attr.Attr_set |= unix.MOUNT_ATTR_RDONLY
	}
	if err := unix.MountSetattr(tree, "", unix.AT_EMPTY_PATH, &attr); err != nil {
		return fmt.Errorf("late mount source %s: set attributes: %w", src.Name(), err)
	}
	target, err := p.makeTarget(name, isDir)
	if err != nil {
		return err
	}
	defer func() { _ = unix.Close(target) }()
	if err := unix.MoveMount(tree, "", target, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH); err != nil {
		return fmt.Errorf("late mount %s: attach: %w", filepath.Join(p.Dir, name), err)
	}
	return nil
}

// makeTarget makes name in p.Dir as a directory or an empty file when it
// is missing, and returns an O_PATH descriptor of it; a link, or an entry
// of another kind, is refused.
func (p Point) makeTarget(name string, isDir bool) (int, error) {
	path := filepath.Join(p.Dir, name)
	dir, err := unix.Open(p.Dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("late mount point %s: %w", p.Dir, err)
	}
	defer func() { _ = unix.Close(dir) }()
	if isDir {
		if err := unix.Mkdirat(dir, name, 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
			return -1, fmt.Errorf("late mount target %s: %w", path, err)
		}
	} else {
		// O_EXCL: an existing entry (a link, a FIFO) is never opened
		// here; the check below decides whether it will do.
		f, err := unix.Openat(dir, name, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
		if err == nil {
			_ = unix.Close(f)
		} else if !errors.Is(err, unix.EEXIST) {
			return -1, fmt.Errorf("late mount target %s: %w", path, err)
		}
	}
	// O_PATH|O_NOFOLLOW opens a link itself rather than failing: the
	// kind is checked on what was opened.
	fd, err := unix.Openat(dir, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("late mount target %s: %w", path, err)
	}
	var st unix.Stat_t
	want := uint32(unix.S_IFREG)
	if isDir {
		want = unix.S_IFDIR
	}
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != want {
		_ = unix.Close(fd)
		return -1, errdefs.New(errdefs.ErrFailedPrecondition, "late mount target is a link or another kind of file (planted there?): "+path)
	}
	return fd, nil
}

// Detach unmounts everything mounted in p.Dir, then p.Dir's own bind,
// and removes p.Dir. It removes nothing while any mount is left beneath
// p.Dir: removing through a mount would delete an office's files. A
// missing p.Dir is not an error.
func (p Point) Detach() error {
	if _, err := os.Lstat(p.Dir); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	points, err := mountsAt(p.Dir)
	if err != nil {
		return err
	}
	for _, m := range points {
		if m != p.Dir && filepath.Dir(m) != p.Dir {
			// Attach makes none deeper: something else did.
			return errdefs.New(errdefs.ErrFailedPrecondition, fmt.Sprintf("late mount point %s holds a mount hutch did not make, at %s; not removed", p.Dir, m))
		}
	}
	// Deepest first, p.Dir itself (and any bind stacked on it) last.
	slices.SortFunc(points, func(a, b string) int { return len(b) - len(a) })
	for _, m := range points {
		if err := unix.Unmount(m, unix.MNT_DETACH|unix.UMOUNT_NOFOLLOW); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("late mount %s: unmount: %w", m, err)
		}
	}
	if left, err := mountsAt(p.Dir); err != nil || len(left) > 0 {
		if err == nil {
			err = fmt.Errorf("still mounted: %s", strings.Join(left, ", "))
		}
		return fmt.Errorf("late mount point %s: not removed: %w", p.Dir, err)
	}
	// Only the Point's own files are left; RemoveAll removes links
	// themselves, never what they name.
	if err := os.RemoveAll(p.Dir); err != nil {
		return fmt.Errorf("late mount point %s: %w", p.Dir, err)
	}
	return nil
}

// mountsAt lists the mount points of this mount namespace at dir or
// beneath it.
func mountsAt(dir string) ([]string, error) {
	entries, err := mountinfo.Self()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if e.Target == dir || strings.HasPrefix(e.Target, dir+"/") {
			out = append(out, e.Target)
		}
	}
	return out, nil
}
