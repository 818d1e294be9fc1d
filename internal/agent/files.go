package agent

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/hutchsandbox/hutch/internal/errdefs"
)

const (
	// stageInfix marks the staging files of atomic writes:
	// .<name>.hutch-stage-<random> next to the target.
	stageInfix = ".hutch-stage-"
	// defaultFileMode is a new file's mode when the writer names none.
	defaultFileMode = 0o644
	// maxStageBase keeps a stage name under NAME_MAX for long targets.
	maxStageBase = 200
)

// CheckPath refuses paths that are not absolute and clean, so that what
// the daemon checked against its roots is exactly what the agent opens.
// Other runtimes that confine file operations (the bridge's) use it for
// the same texts.
func CheckPath(p string) error {
	switch {
	case p == "":
		return errdefs.New(errdefs.ErrInvalid, "Path is required")
	case strings.ContainsRune(p, 0):
		return errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("Path contains a NUL byte: %q", p))
	case !filepath.IsAbs(p):
		return errdefs.New(errdefs.ErrInvalid, "Path must be absolute: "+p)
	case strings.Contains("/"+p+"/", "/../"):
		return errdefs.New(errdefs.ErrInvalid, "Path must not contain '..': "+p)
	case filepath.Clean(p) != p:
		return errdefs.New(errdefs.ErrInvalid, "Path must be clean: "+p+" (use "+filepath.Clean(p)+")")
	}
	return nil
}

// fileError classes an error from a file operation on p.
func fileError(verb, p string, err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return errdefs.New(errdefs.ErrNotFound, "File not found: "+p)
	case errors.Is(err, syscall.ENOTDIR):
		if verb != "write" {
			return errdefs.New(errdefs.ErrNotFound, "File not found: "+p)
		}
		return errdefs.New(errdefs.ErrInvalid, "A parent of "+p+" is not a directory")
	case errors.Is(err, syscall.EISDIR):
		return errdefs.New(errdefs.ErrInvalid, "Path is a directory: "+p)
	case errors.Is(err, fs.ErrPermission), errors.Is(err, syscall.EROFS):
		return errdefs.New(errdefs.ErrFailedPrecondition, fmt.Sprintf("Cannot %s %s: %v", verb, p, cause(err)))
	}
	return fmt.Errorf("cannot %s %s: %w", verb, p, cause(err))
}

// cause strips the operation and path a *fs.PathError adds, since the
// message names the path itself.
func cause(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// handleReadFile streams a regular file. An error after the first byte
// arrives in the Hutch-Error trailer.
func (s *Server) handleReadFile(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	p := q.Get("path")
	f, err := openForRead(p, q[paramRoot])
	if err != nil {
		writeError(w, err)
		return
	}
	defer func() { _ = f.Close() }()
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Trailer", trailerError)
	w.WriteHeader(http.StatusOK)
	src := &errReader{r: f}
	if _, err := io.Copy(w, src); err != nil && src.err != nil {
		body, _ := encodeError(fileError("read", p, src.err))
		if b, err := json.Marshal(body); err == nil {
			w.Header().Set(trailerError, string(b))
		}
	}
	s.log.Debug("agent read file", "path", p, "bytes", src.n)
}

// handleWriteFile replaces a file with the request body, atomically.
func (s *Server) handleWriteFile(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	p := q.Get("path")
	if err := CheckPath(p); err != nil {
		writeError(w, err)
		return
	}
	var mode *os.FileMode
	if m := q.Get("mode"); m != "" {
		n, err := strconv.ParseUint(m, 8, 32)
		if err != nil || n > 0o777 {
			writeError(w, errdefs.New(errdefs.ErrInvalid, "File mode is not valid: "+m+" (want octal permission bits such as 0644)"))
			return
		}
		fm := os.FileMode(n)
		mode = &fm
	}
	n, err := writeWithin(p, q[paramRoot], r.Body, mode)
	if err != nil {
		s.log.Debug("agent write file failed", "path", p, "err", err)
		writeError(w, err)
		return
	}
	s.log.Debug("agent wrote file", "path", p, "bytes", n)
	w.WriteHeader(http.StatusNoContent)
}

// handleStat describes a path as JSON (a FileInfo).
func (s *Server) handleStat(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	fi, err := StatWithin(q.Get("path"), q[paramRoot])
	if err != nil {
		writeError(w, err)
		return
	}
	w.Header().Set("Content-Type", contentTypeJSON)
	_ = json.NewEncoder(w).Encode(fi)
}

// handleList lists a directory as JSON (an array of FileInfo).
func (s *Server) handleList(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	infos, err := ListWithin(q.Get("path"), q[paramRoot])
	if err != nil {
		writeError(w, err)
		return
	}
	w.Header().Set("Content-Type", contentTypeJSON)
	_ = json.NewEncoder(w).Encode(infos)
}

// writeAtomic writes r to a stage file next to p, fsyncs it and renames it
// over p, so that p holds either its old content or all of the new, never
// a part. On any failure the stage is removed and p is untouched. Missing
// parents are created (0755). A nil mode keeps an existing file's mode
// (and, when running as root, its owner) or uses 0644. A symlink at p is
// replaced, not followed. p is not confined: see writeWithin.
func writeAtomic(p string, r io.Reader, mode *os.FileMode) (int64, error) {
	if p == "/" {
		return 0, errdefs.New(errdefs.ErrInvalid, "Path is a directory: "+p)
	}
	dir := filepath.Dir(p)
	if err := mkdirAll(dir); err != nil {
		return 0, fileError("write", p, err)
	}
	dfd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, fileError("write", p, err)
	}
	defer func() { _ = unix.Close(dfd) }()
	return writeInDir(dfd, p, filepath.Base(p), r, mode)
}

// writeInDir is writeAtomic for the entry name of the directory open as
// dfd (p names it in messages): every step is relative to dfd, so nothing
// that happens to p's parents meanwhile can move the write elsewhere.
func writeInDir(dfd int, p, name string, r io.Reader, mode *os.FileMode) (n int64, err error) {
	perm := os.FileMode(defaultFileMode)
	uid, gid := -1, -1
	var st unix.Stat_t
	err = unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
	switch {
	case err == nil:
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
			return 0, errdefs.New(errdefs.ErrInvalid, "Path is a directory: "+p)
		case unix.S_IFREG:
			perm = os.FileMode(st.Mode & 0o777)
			uid, gid = int(st.Uid), int(st.Gid)
		}
	case errors.Is(err, fs.ErrNotExist):
	default:
		return 0, fileError("write", p, err)
	}
	if mode != nil {
		perm = *mode
	}

	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	base := name
	if len(base) > maxStageBase {
		base = base[:maxStageBase]
	}
	stage := "." + base + stageInfix + hex.EncodeToString(rnd[:])
	fd, err := unix.Openat(dfd, stage, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return 0, fileError("write", p, err)
	}
	f := os.NewFile(uintptr(fd), filepath.Join(filepath.Dir(p), stage))
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = unix.Unlinkat(dfd, stage, 0)
		}
	}()
	src := &errReader{r: r}
	if n, err = io.Copy(f, src); err != nil {
		if src.err != nil {
			return n, errdefs.New(errdefs.ErrUnavailable, fmt.Sprintf("Writing %s failed: the content did not arrive whole: %v", p, src.err))
		}
		return n, fileError("write", p, err)
	}
	if err = f.Chmod(perm); err != nil {
		return n, fileError("write", p, err)
	}
	if uid >= 0 && os.Geteuid() == 0 {
		_ = f.Chown(uid, gid) // best effort: keep the owner of the file replaced
	}
	if err = f.Sync(); err != nil {
		return n, fileError("write", p, err)
	}
	if err = f.Close(); err != nil {
		return n, fileError("write", p, err)
	}
	if err = unix.Renameat(dfd, stage, dfd, name); errors.Is(err, unix.EBUSY) {
		// The target is a mount point: a file mounted on its own (the
		// shared MEMORY.md) cannot be replaced, only written in place.
		err = writeInPlace(dfd, p, name, stage)
		_ = unix.Unlinkat(dfd, stage, 0)
		if err != nil {
			return n, err
		}
		return n, nil
	}
	if err != nil {
		return n, fileError("write", p, err)
	}
	// Make the rename durable; the content is in place whatever this says.
	if d, err := unix.Openat(dfd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err == nil {
		_ = unix.Fsync(d)
		_ = unix.Close(d)
	}
	return n, nil
}

// writeInPlace copies the staged content over the file name of the
// directory open as dfd, which rename cannot replace because it is a
// mount point. It is not atomic: a reader may see the old bytes, the new
// or a mix while it runs, and a crash may leave a mix; the content itself
// has fully arrived (it was staged) before the target is touched. The
// target must be a regular file, and is opened without following a
// symlink, relative to dfd like every other step of a write. Its mode and
// owner stay as they are (they belong to the mount's source).
func writeInPlace(dfd int, p, name, stage string) error {
	sfd, err := unix.Openat(dfd, stage, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fileError("write", p, err)
	}
	src := os.NewFile(uintptr(sfd), stage)
	defer func() { _ = src.Close() }()
	tfd, err := unix.Openat(dfd, name, unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return fileError("write", p, err)
	}
	dst := os.NewFile(uintptr(tfd), p)
	defer func() { _ = dst.Close() }() // on the way out of an error; the end closes it and checks
	var st unix.Stat_t
	if err := unix.Fstat(tfd, &st); err != nil {
		return fileError("write", p, err)
	}
	if err := regularFile(p, st.Mode); err != nil {
		return err
	}
	// Written from the start, then cut to length: the file is never
	// seen empty when the new content is not.
	n, err := io.Copy(dst, src)
	if err != nil {
		return fileError("write", p, err)
	}
	if err := dst.Truncate(n); err != nil {
		return fileError("write", p, err)
	}
	if err := dst.Sync(); err != nil {
		return fileError("write", p, err)
	}
	if err := dst.Close(); err != nil {
		return fileError("write", p, err)
	}
	return nil
}

// mkdirAll creates dir and its missing parents, each 0755 whatever the
// umask.
func mkdirAll(dir string) error {
	fi, err := os.Stat(dir)
	switch {
	case err == nil && fi.IsDir():
		return nil
	case err == nil:
		return &fs.PathError{Op: "mkdir", Path: dir, Err: syscall.ENOTDIR}
	case !errors.Is(err, fs.ErrNotExist):
		return err
	}
	if parent := filepath.Dir(dir); parent != dir {
		if err := mkdirAll(parent); err != nil {
			return err
		}
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil // made by someone else meanwhile
		}
		return err
	}
	return os.Chmod(dir, 0o755)
}

// errReader remembers its reader's error, so a copy can tell a failing
// source from a failing destination.
type errReader struct {
	r   io.Reader
	n   int64
	err error
}

func (e *errReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	e.n += int64(n)
	if err != nil && err != io.EOF {
		e.err = err
	}
	return n, err
}
