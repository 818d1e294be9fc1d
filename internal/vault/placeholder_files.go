package vault

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/hutchsandbox/hutch/internal/atomicfile"
	"github.com/hutchsandbox/hutch/internal/errdefs"
)

// ProjectWithPlaceholders returns the mounts to use in place of files (a
// Plan's Files) when secrets (from ApplyPlaceholders) reach commands as
// placeholders: a file credential that holds the real value would hand the
// command what its env no longer does.
//
// Each entry, a file or a directory tree, is searched for the values of
// secrets of at least MinSearchLen bytes (shorter ones would too likely
// match bytes that are not the secret). An entry that holds none is
// returned unchanged, original path and all. An entry that holds one is
// copied to dir/<first 32 hex of SHA-256 of its host path> with every
// such value replaced by its token (where values overlap, the longest
// wins); the copy keeps the tree's relative paths, with directories 0700
// and files 0600 as in the vault, and its mount's HostPath points there.
// Values are found as plain bytes and inside standard base64 runs (the
// "auth" of ~/.docker/config.json, a kubeconfig's or .npmrc's Basic
// credentials), which are re-encoded with the token in place of the
// value; a client sending them as Basic credentials sends the token,
// which the egress proxy decodes and substitutes. Other encodings
// (URL-safe base64, hex, a value split across lines) are not recognised
// and reach the runtime as they are.
//
// Symlinks inside a tree are copied as symlinks, never followed: as in the
// original mount, the runtime resolves them inside itself, and nothing
// outside the vault entry is read. An entry that is itself a symlink, or
// a tree holding a socket, device or pipe, is ErrFailedPrecondition; a
// mount whose HostPath is not in this store is ErrInvalid.
//
// dir belongs to the caller (one per run, e.g. <run>/vault-placeholders)
// and is created 0700 when needed. A copy from an earlier call is kept
// when it already matches, so a runtime's mounts stay stable, and
// otherwise replaced in one step (renameat2 RENAME_EXCHANGE where the
// file system has it, else renamed aside first). The caller removes dir
// with the run.
func (s *Store) ProjectWithPlaceholders(files []FileMount, secrets []Secret, dir string) ([]FileMount, error) {
	out := slices.Clone(files)
	search := searchable(secrets)
	if len(search) == 0 {
		return out, nil
	}
	if !filepath.IsAbs(dir) {
		return nil, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("Placeholder copy directory %q is not an absolute path", dir))
	}
	if dir = filepath.Clean(dir); underHost(dir, s.root) {
		// Copies there would be listed, and projected, as vault entries.
		return nil, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("Placeholder copy directory %q is inside the vault store", dir))
	}
	s.projectMu.Lock()
	defer s.projectMu.Unlock()
	// Hold off vault writes while entries are read twice (search, copy).
	s.mu.RLock()
	defer s.mu.RUnlock()

	rep := replacer(search)
	prepared := false
	for i, f := range files {
		src := filepath.Clean(f.HostPath)
		if !filepath.IsAbs(src) || src == s.root || !underHost(src, s.root) {
			return nil, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("Vault file %q is not in the vault store", f.HostPath))
		}
		err := walkEntry(src, func(_ string, _ fs.FileInfo, data []byte) error {
			for _, sec := range search {
				if bytes.Contains(data, []byte(sec.Value)) {
					return errFound
				}
			}
			if _, ok := encoded(string(data), search, rep); ok {
				return errFound
			}
			return nil
		})
		if err == nil {
			continue // no value in it: mount the original
		}
		if !errors.Is(err, errFound) {
			return nil, err
		}
		if !prepared {
			if err := prepareCopyDir(dir); err != nil {
				return nil, err
			}
			prepared = true
		}
		sum := sha256.Sum256([]byte(src))
		target := filepath.Join(dir, hex.EncodeToString(sum[:16]))
		rewrite := func(data string) string {
			data, _ = encoded(rep.Replace(data), search, rep)
			return data
		}
		if err := placeCopy(src, target, dir, rewrite); err != nil {
			return nil, fmt.Errorf("placeholder copy of vault entry %q: %w", f.Name, err)
		}
		out[i].HostPath = target
	}
	return out, nil
}

// prepareCopyDir makes dir (0700, a real directory) and clears what an
// earlier process left there half-done. Only this process writes dir and
// projectMu is held, so no live stage can be mistaken for a dead one.
func prepareCopyDir(dir string) error {
	if err := os.MkdirAll(dir, dirPerm); err != nil {
		return fmt.Errorf("placeholder copy directory: %w", err)
	}
	if err := checkRealDir(dir); err != nil {
		return err
	}
	if err := os.Chmod(dir, dirPerm); err != nil {
		return fmt.Errorf("placeholder copy directory: %w", err)
	}
	des, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("placeholder copy directory: %w", err)
	}
	for _, de := range des {
		if n := de.Name(); strings.HasPrefix(n, stagePrefix) || strings.HasPrefix(n, asidePrefix) {
			_ = os.RemoveAll(filepath.Join(dir, n))
		}
	}
	return nil
}

// errFound stops the search of an entry at its first value.
var errFound = errors.New("value found")

// placeCopy writes the rewritten copy of src into a stage in dir and puts
// it at target, unless target already holds exactly that copy.
func placeCopy(src, target, dir string, rewrite func(string) string) error {
	stage, err := os.MkdirTemp(dir, stagePrefix+"*")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(stage) }()
	built := filepath.Join(stage, "copy")
	err = walkEntry(src, func(rel string, info fs.FileInfo, data []byte) error {
		to := filepath.Join(built, rel)
		switch mode := info.Mode(); {
		case mode.IsDir():
			if err := os.Mkdir(to, dirPerm); err != nil {
				return err
			}
			return os.Chmod(to, dirPerm)
		case mode&fs.ModeSymlink != 0:
			link, err := os.Readlink(filepath.Join(src, rel))
			if err != nil {
				return err
			}
			return os.Symlink(link, to)
		default:
			f, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, filePerm)
			if err != nil {
				return err
			}
			err = f.Chmod(filePerm)
			if err == nil {
				_, err = io.WriteString(f, rewrite(string(data)))
			}
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			return err
		}
	})
	if err != nil {
		return err
	}
	if same, err := sameEntry(built, target); err != nil || same {
		return err
	}
	// A copy is rebuilt from the vault on every call and compared in
	// full, so one torn by a crash is replaced next time: no fsync of its
	// files, only of the directory that names it. A file over a file is
	// one rename; a directory on either side needs an exchange.
	if old, err := os.Lstat(target); err == nil && (old.IsDir() || isDir(built)) {
		err := unix.Renameat2(unix.AT_FDCWD, built, unix.AT_FDCWD, target, unix.RENAME_EXCHANGE)
		if err == nil {
			return atomicfile.SyncDir(dir) // the old copy is in the stage now
		}
		if !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOSYS) && !errors.Is(err, unix.EOPNOTSUPP) {
			return err
		}
		// Without an exchange, rename cannot put a directory over
		// anything, so the old copy steps aside first.
		aside := filepath.Join(dir, asidePrefix+randomSuffix())
		if err := os.Rename(target, aside); err != nil {
			return err
		}
		if err := os.Rename(built, target); err != nil {
			_ = os.Rename(aside, target)
			return err
		}
		_ = os.RemoveAll(aside)
		return atomicfile.SyncDir(dir)
	}
	if err := os.Rename(built, target); err != nil {
		return err
	}
	return atomicfile.SyncDir(dir)
}

func isDir(p string) bool {
	info, err := os.Lstat(p)
	return err == nil && info.IsDir()
}

// walkEntry visits the vault entry root and, for a directory, everything
// below it in lexical order, parents first, without following a symlink:
// visit gets the path relative to root ("." for root itself), its Lstat
// info, and for a regular file its content. A symlink at root, or a
// socket, device or pipe anywhere, is ErrFailedPrecondition.
func walkEntry(root string, visit func(rel string, info fs.FileInfo, data []byte) error) error {
	info, err := os.Lstat(root)
	if err != nil {
		return fmt.Errorf("read vault entry: %w", err)
	}
	if info.Mode()&fs.ModeSymlink != 0 {
		return errdefs.New(errdefs.ErrFailedPrecondition, fmt.Sprintf("Vault entry %q is a symlink; remove it", root))
	}
	return walkFrom(root, ".", info, visit)
}

func walkFrom(root, rel string, info fs.FileInfo, visit func(string, fs.FileInfo, []byte) error) error {
	p := filepath.Join(root, rel)
	switch mode := info.Mode(); {
	case mode&fs.ModeSymlink != 0:
		return visit(rel, info, nil)
	case mode.IsRegular():
		data, err := readNoFollow(p, info)
		if err != nil {
			return err
		}
		return visit(rel, info, data)
	case mode.IsDir():
		if err := visit(rel, info, nil); err != nil {
			return err
		}
		des, err := os.ReadDir(p)
		if err != nil {
			return fmt.Errorf("read vault entry: %w", err)
		}
		for _, de := range des {
			child := filepath.Join(rel, de.Name())
			ci, err := os.Lstat(filepath.Join(root, child))
			if err != nil {
				return fmt.Errorf("read vault entry: %w", err)
			}
			if err := walkFrom(root, child, ci, visit); err != nil {
				return err
			}
		}
		return nil
	default:
		return errdefs.New(errdefs.ErrFailedPrecondition, fmt.Sprintf("Vault entry %q is not a regular file, directory or symlink; remove it", p))
	}
}

// readNoFollow reads the regular file p, which an earlier Lstat saw as
// want, refusing whatever has taken its place since (a symlink above all).
func readNoFollow(p string, want fs.FileInfo) ([]byte, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("read vault entry: %w", err)
	}
	defer func() { _ = f.Close() }()
	got, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("read vault entry: %w", err)
	}
	if !got.Mode().IsRegular() || !os.SameFile(want, got) {
		return nil, errdefs.New(errdefs.ErrConflict, fmt.Sprintf("Vault entry %q changed while it was read", p))
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return nil, fmt.Errorf("read vault entry: %w", err)
	}
	return data, nil
}

// sameEntry reports whether the copy at b (which may not exist) has
// exactly the paths, types, permissions, contents and link targets of the
// copy at a.
func sameEntry(a, b string) (bool, error) {
	if _, err := os.Lstat(b); errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	want, err := describe(a)
	if err != nil {
		return false, err
	}
	got, err := describe(b)
	if err != nil {
		// A copy that cannot be read as one (a planted socket, say) is
		// simply replaced.
		return false, nil
	}
	return slices.Equal(want, got), nil
}

// describe lists a copy as one line per path.
func describe(root string) ([]string, error) {
	var lines []string
	err := walkEntry(root, func(rel string, info fs.FileInfo, data []byte) error {
		line := rel + "\x00" + info.Mode().String()
		if info.Mode()&fs.ModeSymlink != 0 {
			link, err := os.Readlink(filepath.Join(root, rel))
			if err != nil {
				return err
			}
			line += "\x00" + link
		} else if info.Mode().IsRegular() {
			line += "\x00" + string(data)
		}
		lines = append(lines, line)
		return nil
	})
	return lines, err
}
