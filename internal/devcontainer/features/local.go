package features

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"

	"golang.org/x/sys/unix"

	"github.com/hutchsandbox/hutch/internal/beneath"
	"github.com/hutchsandbox/hutch/internal/errdefs"
)

// maxLocalDepth bounds how deeply a local feature's folders nest; each
// level holds a descriptor open while it is copied.
const maxLocalDepth = 32

// copyLocal copies the local feature ref, a folder beneath f.Dir, into
// dst, and returns the digest of what it copied (treeDigest). The
// project, and so the folder, is the sandbox's to write: every component
// is opened beneath f.ProjectRoot (or f.Dir) without following a link,
// each entry is opened O_PATH and checked by fstat before it is read (so
// a FIFO never blocks and a device is never opened), and only regular
// files and folders are copied. What is built from is this copy,
// whatever the sandbox changes afterwards, and the digest is of this
// copy too.
func (f *Fetcher) copyLocal(ref Ref, dst string, lim Limits) (string, []string, error) {
	droot, err := os.OpenRoot(dst)
	if err != nil {
		return "", nil, err
	}
	defer func() { _ = droot.Close() }()
	return f.walkLocal(ref, droot, lim)
}

// LocalDigest reads the local feature ref as Fetch copies it (beneath
// ProjectRoot without following a link, regular files and folders only,
// within Limits) and returns the digest Fetch gives its copy, copying
// nothing: what approving a devcontainer.json covers of the local
// features it installs, which can be edited from inside the sandbox.
// Neither WorkDir nor the feature's metadata is needed. A folder that is
// missing is an error of class errdefs.ErrNotFound.
func (f *Fetcher) LocalDigest(ref Ref) (string, error) {
	if ref.Kind != Local {
		return "", errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("feature %s: not a local feature", ref.ID))
	}
	digest, _, err := f.walkLocal(ref, nil, f.Limits.orDefaults())
	return digest, err
}

// walkLocal reads the local feature ref's folder, copying it beneath dst
// unless dst is nil, and returns its digest and notes on what it left
// out.
func (f *Fetcher) walkLocal(ref Ref, dst *os.Root, lim Limits) (string, []string, error) {
	if f.Dir == "" {
		return "", nil, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("feature %s: the folder holding devcontainer.json is not known, so a local feature cannot be found", ref.ID))
	}
	root := f.ProjectRoot
	if root == "" {
		root = f.Dir
	}
	folder := filepath.Join(f.Dir, filepath.FromSlash(ref.Path))
	bf, err := beneath.Open(root, folder)
	if err != nil {
		return "", nil, fmt.Errorf("feature %s: %w", ref.ID, err)
	}
	defer func() { _ = bf.Close() }()
	pf, err := bf.Dup()
	if err != nil {
		return "", nil, fmt.Errorf("feature %s: %w", ref.ID, err)
	}
	defer func() { _ = pf.Close() }()
	fd, err := unix.Openat(int(pf.Fd()), ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOTDIR) {
		return "", nil, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("feature %s: %s is not a folder; a local feature is a folder holding %s and %s", ref.ID, folder, MetadataFile, InstallScript))
	}
	if err != nil {
		return "", nil, fmt.Errorf("feature %s: opening %s: %w", ref.ID, folder, err)
	}
	c := &copier{ref: ref, folder: folder, lim: lim, dst: dst, tree: sha256.New(), skip: &skipped{feature: ref.ID}}
	if err := c.dir(fd, ".", 0); err != nil {
		return "", nil, err
	}
	return "sha256:" + hex.EncodeToString(c.tree.Sum(nil)), c.skip.notes(), nil
}

// The digest of a local feature hashes, in the order the copy walks them
// (each folder's names sorted, depth first), a record per folder and per
// regular file: its kind, its path in the feature, and for a file its
// mode as copied (0644 or 0755) and the SHA-256 of its content, each
// field ended by NUL, which no path holds. Left-out entries (links,
// FIFOs, devices) are not part of it: they are not part of the copy.
func (c *copier) record(fields ...string) {
	for _, f := range fields {
		_, _ = io.WriteString(c.tree, f)
		_, _ = c.tree.Write([]byte{0})
	}
}

type copier struct {
	ref     Ref
	folder  string
	lim     Limits
	dst     *os.Root // nil: nothing is copied, only hashed
	tree    hash.Hash
	skip    *skipped
	entries int
	total   int64
}

func (c *copier) bad(class error, format string, args ...any) error {
	return errdefs.New(class, fmt.Sprintf("feature %s: ", c.ref.ID)+fmt.Sprintf(format, args...))
}

// dir copies the folder open at fd (which it closes) to rel beneath the
// destination.
func (c *copier) dir(fd int, rel string, depth int) error {
	d := os.NewFile(uintptr(fd), path.Join(c.folder, rel))
	defer func() { _ = d.Close() }()
	if depth > maxLocalDepth {
		return c.bad(errdefs.ErrInvalid, "its folders nest deeper than %d levels", maxLocalDepth)
	}
	names, err := d.Readdirnames(-1)
	if err != nil {
		return c.bad(errdefs.ErrUnavailable, "reading %s: %v", d.Name(), err)
	}
	slices.Sort(names)
	for _, name := range names {
		c.entries++
		if c.entries > c.lim.Files {
			return c.bad(errdefs.ErrInvalid, "its folder holds more than %d files and folders, the most a feature may have", c.lim.Files)
		}
		child := path.Join(rel, name)
		pfd, err := unix.Openat(fd, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if errors.Is(err, unix.ENOENT) {
			continue // removed while we read
		}
		if err != nil {
			return c.bad(errdefs.ErrUnavailable, "opening %s: %v", child, err)
		}
		if err := c.entry(pfd, child, depth); err != nil {
			return err
		}
	}
	return nil
}

// entry copies the entry open (O_PATH) at pfd, which it closes.
func (c *copier) entry(pfd int, child string, depth int) error {
	var st unix.Stat_t
	if err := unix.Fstat(pfd, &st); err != nil {
		_ = unix.Close(pfd)
		return c.bad(errdefs.ErrUnavailable, "inspecting %s: %v", child, err)
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		sub, err := unix.Openat(pfd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		_ = unix.Close(pfd)
		if err != nil {
			return c.bad(errdefs.ErrUnavailable, "opening %s: %v", child, err)
		}
		if c.dst != nil {
			if err := c.dst.Mkdir(child, 0o755); err != nil {
				_ = unix.Close(sub)
				return err
			}
		}
		c.record("dir", child)
		return c.dir(sub, child, depth+1)
	case unix.S_IFREG:
		defer func() { _ = unix.Close(pfd) }()
		return c.file(pfd, child, &st)
	case unix.S_IFLNK:
		c.skip.add("the link " + child)
	case unix.S_IFIFO:
		c.skip.add("the FIFO " + child)
	case unix.S_IFCHR, unix.S_IFBLK:
		c.skip.add("the device " + child)
	default:
		c.skip.add("the socket " + child)
	}
	_ = unix.Close(pfd)
	return nil
}

// file copies the regular file open (O_PATH) at pfd. It is reopened for
// reading through /proc/self/fd, which reaches the inode fstat saw,
// whatever has been put at its name since.
func (c *copier) file(pfd int, child string, st *unix.Stat_t) error {
	tooLarge := func() error {
		return c.bad(errdefs.ErrInvalid, "its files are larger than the %s a feature may hold", mebibytes(c.lim.Extracted))
	}
	left := c.lim.Extracted - c.total
	if st.Size > left {
		return tooLarge()
	}
	rfd, err := unix.Open(fmt.Sprintf("/proc/self/fd/%d", pfd), unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return c.bad(errdefs.ErrUnavailable, "opening %s: %v", child, err)
	}
	src := os.NewFile(uintptr(rfd), child)
	defer func() { _ = src.Close() }()
	var again unix.Stat_t
	if err := unix.Fstat(rfd, &again); err != nil || again.Dev != st.Dev || again.Ino != st.Ino || again.Mode&unix.S_IFMT != unix.S_IFREG {
		return c.bad(errdefs.ErrUnavailable, "%s changed while it was copied; try again", child)
	}
	mode := os.FileMode(0o644)
	if st.Mode&0o111 != 0 {
		mode = 0o755
	}
	sum := sha256.New()
	var n int64
	if c.dst == nil {
		n, err = io.Copy(sum, &capReader{r: src, n: left})
	} else {
		out, oerr := c.dst.OpenFile(child, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
		if oerr != nil {
			return oerr
		}
		n, err = io.Copy(io.MultiWriter(out, sum), &capReader{r: src, n: left})
		if err == nil {
			err = out.Chmod(mode) // whatever the umask
		}
		if cerr := out.Close(); err == nil {
			err = cerr
		}
	}
	c.total += n
	if errors.Is(err, errTooLarge) {
		return tooLarge()
	}
	if err != nil {
		return c.bad(errdefs.ErrUnavailable, "copying %s: %v", child, err)
	}
	c.record("file", child, fmt.Sprintf("%04o", mode), hex.EncodeToString(sum.Sum(nil)))
	return nil
}
