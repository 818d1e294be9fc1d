package engine

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/moby/patternmatcher"
	"github.com/moby/patternmatcher/ignorefile"
	"golang.org/x/sys/unix"

	"github.com/hutchsandbox/hutch/internal/errdefs"
)

// DefaultMaxContext caps the files a build context sends: 2 GiB. A
// context that big is nearly always a checkout's caches and build output
// (node_modules, target/, .git), which .dockerignore is for.
const DefaultMaxContext int64 = 2 << 30

// maxIgnoreFile caps the .dockerignore read.
const maxIgnoreFile = 1 << 20

// contextSource is what a build context tar is made of. Root and every
// path beneath it may have been written by whatever runs in a sandbox,
// so the tar is made the way hutch treats every such path: the walk from
// Root down follows no link, a link in the context is sent as a link,
// and a socket, FIFO or device is left out without being opened (opening
// a FIFO blocks until someone writes to it; opening a device node asks
// its driver to act).
type contextSource struct {
	// Root is trusted (the project, as the user named it); Dir is Root or
	// a directory beneath it.
	Root, Dir string
	// Dockerfile is sent as DockerfileName (a slash path inside the tar),
	// whatever the context holds there.
	Dockerfile     []byte
	DockerfileName string
	// ExtraIgnore is appended to the .dockerignore sent (the generated
	// name of a Dockerfile from outside the context, so COPY . leaves it
	// out as the docker CLI does).
	ExtraIgnore string
	// Max caps the bytes of file content sent.
	Max int64
}

// maxFirstName is the longest name the tar's first entry, the
// Dockerfile, may have. BuildKit tells a tar context from a bare
// Dockerfile by reading the first 1 KiB as a tar header, so that entry
// must be a plain USTAR one: no PAX header before it, which a longer name
// (or a sub-second mtime, hence the whole seconds below) would need.
const maxFirstName = 200

// dockerfileName is where a Dockerfile at dockerfilePath goes in the tar
// of the context dir: its own place when it lies inside, else a name
// made from its content (the docker CLI's way, with a stable name so the
// builder's cache holds), which must then be ignored by COPY.
func dockerfileName(dir, dockerfilePath string, content []byte) (name string, outside bool) {
	rel, err := filepath.Rel(dir, dockerfilePath)
	if err == nil && rel != "." && rel != ".." && !strings.HasPrefix(rel, "../") && !filepath.IsAbs(rel) && len(rel) <= maxFirstName {
		return filepath.ToSlash(rel), false
	}
	sum := sha256.Sum256(content)
	return ".dockerfile." + hex.EncodeToString(sum[:10]), true
}

// errTooBig is the error of a context over its cap.
func errTooBig(dir string, max int64) error {
	return errdefs.New(errdefs.ErrFailedPrecondition, fmt.Sprintf(
		"The build context %s holds more than %s of files, which hutch does not send to the engine. List what the build does not need (dependencies, build output, caches) in %s, one pattern a line, then try again.",
		dir, sizeText(max), filepath.Join(dir, ".dockerignore")))
}

// errChanged is the error of a file that changed while the tar was made.
func errChanged(p string) error {
	return errdefs.New(errdefs.ErrUnavailable, fmt.Sprintf(
		"%s changed while hutch read it for the build context; try again once nothing is writing to it.", p))
}

func sizeText(n int64) string {
	if n >= 1<<30 && n%(1<<30) == 0 {
		return strconv.FormatInt(n>>30, 10) + " GiB"
	}
	if n >= 1<<20 {
		return strconv.FormatInt(n>>20, 10) + " MiB"
	}
	return strconv.FormatInt(n, 10) + " bytes"
}

// writeTo writes the context as a tar stream to w.
func (s contextSource) writeTo(w io.Writer) error {
	if s.Max <= 0 {
		s.Max = DefaultMaxContext
	}
	dirfd, err := openDirBeneath(s.Root, s.Dir)
	if err != nil {
		return err
	}
	defer func() { _ = unix.Close(dirfd) }()

	ignore, err := readIgnoreFile(dirfd, filepath.Join(s.Dir, ".dockerignore"))
	if err != nil {
		return err
	}
	patterns, err := ignorefile.ReadAll(bytes.NewReader(ignore))
	if err != nil {
		return errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("%s: %v. Fix the pattern.", filepath.Join(s.Dir, ".dockerignore"), err))
	}
	pm, err := patternmatcher.New(patterns)
	if err != nil {
		return errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("%s: %v. Fix the pattern.", filepath.Join(s.Dir, ".dockerignore"), err))
	}
	if s.ExtraIgnore != "" {
		ignore = append(append(ignore, '\n'), s.ExtraIgnore+"\n"...)
	}

	tw := tar.NewWriter(w)
	t := &tarWalk{src: s, tw: tw, pm: pm}
	// The Dockerfile and .dockerignore go first and always, as the docker
	// CLI sends them even when .dockerignore names them: the builder
	// reads both before it applies the patterns.
	now := time.Now().Truncate(time.Second)
	if err := t.file(s.DockerfileName, s.Dockerfile, now); err != nil {
		return err
	}
	if len(ignore) > 0 {
		if err := t.file(".dockerignore", ignore, now); err != nil {
			return err
		}
	}
	if err := t.dir(dirfd, ""); err != nil {
		return err
	}
	return tw.Close()
}

// tarWalk is one walk of a context dir.
type tarWalk struct {
	src  contextSource
	tw   *tar.Writer
	pm   *patternmatcher.PatternMatcher
	sent int64
}

// file writes a file hutch made (the Dockerfile, the .dockerignore).
func (t *tarWalk) file(name string, data []byte, mtime time.Time) error {
	if err := t.count(int64(len(data))); err != nil {
		return err
	}
	if err := t.tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: int64(len(data)), ModTime: mtime}); err != nil {
		return err
	}
	_, err := t.tw.Write(data)
	return err
}

func (t *tarWalk) count(n int64) error {
	t.sent += n
	if t.sent > t.src.Max {
		return errTooBig(t.src.Dir, t.src.Max)
	}
	return nil
}

// skip reports whether .dockerignore leaves rel out, and for a directory
// left out whether an exception ("!pattern") may still bring back
// something beneath it, so the walk must go in.
func (t *tarWalk) skip(rel string, isDir bool) (skip, descend bool, err error) {
	excluded, err := t.pm.MatchesOrParentMatches(rel)
	if err != nil || !excluded {
		return false, isDir, err
	}
	if !isDir || !t.pm.Exclusions() {
		return true, false, nil
	}
	for _, p := range t.pm.Patterns() {
		if p.Exclusion() && strings.HasPrefix(p.String()+"/", rel+"/") {
			return true, true, nil
		}
	}
	return true, false, nil
}

// dir writes the entries of the directory open at dirfd, rel being its
// path in the tar ("" for the context itself).
func (t *tarWalk) dir(dirfd int, rel string) error {
	names, err := readDirNames(dirfd, t.hostPath(rel))
	if err != nil {
		return err
	}
	for _, name := range names {
		r := path.Join(rel, name)
		if r == t.src.DockerfileName || r == ".dockerignore" {
			continue // sent first, see writeTo
		}
		var st unix.Stat_t
		if err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			if errors.Is(err, unix.ENOENT) {
				continue // gone since the listing
			}
			return fmt.Errorf("build context: %s: %w", t.hostPath(r), err)
		}
		kind := st.Mode & unix.S_IFMT
		skip, descend, err := t.skip(r, kind == unix.S_IFDIR)
		if err != nil {
			return fmt.Errorf("build context: %s: %w", t.hostPath(".dockerignore"), err)
		}
		if skip && !descend {
			continue
		}
		hdr := &tar.Header{Name: r, Mode: int64(st.Mode & 0o7777), ModTime: time.Unix(st.Mtim.Unix())}
		switch kind {
		case unix.S_IFDIR:
			if err := t.subdir(dirfd, name, r, hdr, skip); err != nil {
				return err
			}
		case unix.S_IFLNK:
			target, err := readlinkat(dirfd, name)
			if err != nil {
				return fmt.Errorf("build context: %s: %w", t.hostPath(r), err)
			}
			hdr.Typeflag, hdr.Linkname = tar.TypeSymlink, target
			if err := t.tw.WriteHeader(hdr); err != nil {
				return err
			}
		case unix.S_IFREG:
			if err := t.regular(dirfd, name, r, hdr); err != nil {
				return err
			}
		default:
			// A socket, FIFO or device: nothing a build can use, and
			// opening one may block or act.
		}
	}
	return nil
}

func (t *tarWalk) subdir(dirfd int, name, rel string, hdr *tar.Header, skipped bool) error {
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	switch {
	case errors.Is(err, unix.ENOENT):
		return nil
	case errors.Is(err, unix.ELOOP), errors.Is(err, unix.ENOTDIR):
		return errChanged(t.hostPath(rel)) // replaced since it was looked at
	case err != nil:
		return fmt.Errorf("build context: %s: %w", t.hostPath(rel), err)
	}
	defer func() { _ = unix.Close(fd) }()
	if !skipped {
		hdr.Typeflag, hdr.Name = tar.TypeDir, rel+"/"
		if err := t.tw.WriteHeader(hdr); err != nil {
			return err
		}
	}
	return t.dir(fd, rel)
}

// regular sends one regular file: opened O_PATH (which opens nothing:
// no FIFO blocks, no driver is asked), checked to still be a regular
// file, then reopened for reading through /proc/self/fd, which reaches
// that same inode whatever has since been put at its name. Its size is
// the one checked: a file that grew is sent as it was, one that shrank
// fails the build rather than sending what was never there.
func (t *tarWalk) regular(dirfd int, name, rel string, hdr *tar.Header) error {
	pfd, err := unix.Openat(dirfd, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("build context: %s: %w", t.hostPath(rel), err)
	}
	defer func() { _ = unix.Close(pfd) }()
	var st unix.Stat_t
	if err := unix.Fstat(pfd, &st); err != nil {
		return fmt.Errorf("build context: %s: %w", t.hostPath(rel), err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return errChanged(t.hostPath(rel))
	}
	f, err := reopen(pfd, t.hostPath(rel))
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	if err := t.count(st.Size); err != nil {
		return err
	}
	hdr.Typeflag, hdr.Size = tar.TypeReg, st.Size
	if err := t.tw.WriteHeader(hdr); err != nil {
		return err
	}
	return sendExactly(t.tw, f, st.Size, t.hostPath(rel))
}

// sendExactly copies size bytes of r to w: the size the tar header
// promised. More is left unread; less is the file shrinking under the
// read, an error rather than a tar that lies.
func sendExactly(w io.Writer, r io.Reader, size int64, hostPath string) error {
	n, err := io.CopyN(w, r, size)
	switch {
	case errors.Is(err, io.EOF) && n < size:
		return errChanged(hostPath)
	case err != nil:
		return fmt.Errorf("build context: reading %s: %w", hostPath, err)
	}
	return nil
}

func (t *tarWalk) hostPath(rel string) string {
	return filepath.Join(t.src.Dir, filepath.FromSlash(rel))
}

// openDirBeneath opens dir (Root or beneath it) for reading, walking from
// root one component at a time with O_NOFOLLOW: a link anywhere on the
// way is refused, not followed.
func openDirBeneath(root, dir string) (int, error) {
	root, dir = filepath.Clean(root), filepath.Clean(dir)
	rel, err := filepath.Rel(root, dir)
	if err != nil || !filepath.IsAbs(root) || rel == ".." || strings.HasPrefix(rel, "../") {
		return -1, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("The build context %s is not inside %s.", dir, root))
	}
	fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("build context: %s: %w", root, err)
	}
	if rel == "." {
		return fd, nil
	}
	cur := root
	for _, comp := range strings.Split(rel, "/") {
		cur = filepath.Join(cur, comp)
		next, err := unix.Openat(fd, comp, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if errors.Is(err, unix.ENOTDIR) {
			// O_DIRECTORY answers a link with ENOTDIR before O_NOFOLLOW
			// would with ELOOP: tell the two apart.
			var st unix.Stat_t
			if unix.Fstatat(fd, comp, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
				err = unix.ELOOP
			}
		}
		_ = unix.Close(fd)
		switch {
		case errors.Is(err, unix.ENOENT):
			return -1, errdefs.New(errdefs.ErrNotFound, fmt.Sprintf("The build context %s does not exist.", cur))
		case errors.Is(err, unix.ELOOP):
			return -1, errdefs.New(errdefs.ErrFailedPrecondition, fmt.Sprintf(
				"%s is a symbolic link: hutch follows no link in a place a sandbox can write (one may have been put in place of what was there). Remove it.", cur))
		case errors.Is(err, unix.ENOTDIR):
			return -1, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("The build context %s is not a directory.", cur))
		case err != nil:
			return -1, fmt.Errorf("build context: %s: %w", cur, err)
		}
		fd = next
	}
	return fd, nil
}

// readIgnoreFile reads .dockerignore from the context dir, "" when there
// is none. One that is not a regular file (a link, a FIFO) is refused:
// the patterns decide what leaves the machine.
func readIgnoreFile(dirfd int, hostPath string) ([]byte, error) {
	pfd, err := unix.Openat(dirfd, ".dockerignore", unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("build context: %s: %w", hostPath, err)
	}
	defer func() { _ = unix.Close(pfd) }()
	var st unix.Stat_t
	if err := unix.Fstat(pfd, &st); err != nil {
		return nil, fmt.Errorf("build context: %s: %w", hostPath, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, errdefs.New(errdefs.ErrFailedPrecondition, fmt.Sprintf("%s is not a regular file (a link, a FIFO?); make it one, or remove it.", hostPath))
	}
	f, err := reopen(pfd, hostPath)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	data, err := io.ReadAll(io.LimitReader(f, maxIgnoreFile+1))
	if err != nil {
		return nil, fmt.Errorf("build context: reading %s: %w", hostPath, err)
	}
	if len(data) > maxIgnoreFile {
		return nil, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("%s is larger than 1 MiB; a .dockerignore that long is not one.", hostPath))
	}
	return data, nil
}

// reopen opens the file an O_PATH descriptor refers to for reading.
func reopen(pfd int, hostPath string) (*os.File, error) {
	fd, err := unix.Open("/proc/self/fd/"+strconv.Itoa(pfd), unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("build context: reopening %s through /proc/self/fd (is /proc mounted?): %w", hostPath, err)
	}
	return os.NewFile(uintptr(fd), hostPath), nil
}

// readDirNames lists the directory open at dirfd, sorted, so the same
// context makes the same tar. The listing reads through a duplicate: the
// caller keeps dirfd for the openat calls that follow.
func readDirNames(dirfd int, hostPath string) ([]string, error) {
	dup, err := unix.FcntlInt(uintptr(dirfd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("build context: %s: %w", hostPath, err)
	}
	f := os.NewFile(uintptr(dup), hostPath)
	defer func() { _ = f.Close() }()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return nil, fmt.Errorf("build context: listing %s: %w", hostPath, err)
	}
	slices.Sort(names)
	return names, nil
}

func readlinkat(dirfd int, name string) (string, error) {
	for size := 256; ; size *= 2 {
		buf := make([]byte, size)
		n, err := unix.Readlinkat(dirfd, name, buf)
		if err != nil {
			return "", err
		}
		if n < size {
			return string(buf[:n]), nil
		}
	}
}

// maxBuildFile caps ReadBuildFile.
const maxBuildFile = 4 << 20

// ReadBuildFile reads the regular file path (a Dockerfile), which must
// lie beneath root, the way a build context is read: no link followed
// from root down, and nothing but a regular file opened (a FIFO or a
// device node planted there is refused unopened). A missing file is an
// error of class ErrNotFound; one over 4 MiB is refused.
func ReadBuildFile(root, path string) ([]byte, error) {
	dirfd, err := openDirBeneath(root, filepath.Dir(path))
	if err != nil {
		return nil, err
	}
	defer func() { _ = unix.Close(dirfd) }()
	pfd, err := unix.Openat(dirfd, filepath.Base(path), unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return nil, errdefs.New(errdefs.ErrNotFound, fmt.Sprintf("%s does not exist.", path))
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	defer func() { _ = unix.Close(pfd) }()
	var st unix.Stat_t
	if err := unix.Fstat(pfd, &st); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
	case unix.S_IFLNK:
		return nil, errdefs.New(errdefs.ErrFailedPrecondition, fmt.Sprintf(
			"%s is a symbolic link: hutch follows no link in a place a sandbox can write (one may have been put in place of what was there). Remove it.", path))
	default:
		return nil, errdefs.New(errdefs.ErrFailedPrecondition, fmt.Sprintf("%s is not a regular file; make it one.", path))
	}
	f, err := reopen(pfd, path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	data, err := io.ReadAll(io.LimitReader(f, maxBuildFile+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	if len(data) > maxBuildFile {
		return nil, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("%s is larger than 4 MiB, which no Dockerfile is.", path))
	}
	return data, nil
}
