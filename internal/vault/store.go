package vault

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/hutchsandbox/hutch/internal/atomicfile"
	"github.com/hutchsandbox/hutch/internal/errdefs"
)

const (
	dirPerm  os.FileMode = 0o700
	filePerm os.FileMode = 0o600

	// envFile is the name of the env variables file in a vault directory.
	envFile = "env"
	// stagePrefix and asidePrefix name the store's own temporary entries
	// in a vault directory; envTempPrefix is what atomicfile stages the
	// env file under. Entry names with these prefixes are refused and
	// leftovers of a crash are never listed or projected.
	stagePrefix   = ".hutch-stage-"
	asidePrefix   = ".hutch-old-"
	envTempPrefix = ".env.tmp-"

	// placeholdersFile holds the vault's placeholder marks (JSON, 0600);
	// placeholdersTempPrefix is what atomicfile stages it under. Like the
	// env file it is the store's own: never listed, never projected, and
	// refused as an entry name.
	placeholdersFile       = ".hutch-placeholders"
	placeholdersTempPrefix = "." + placeholdersFile + ".tmp-"
)

// EntryKind says what a vault entry is.
type EntryKind string

// The kinds of vault entry.
const (
	// EntryEnv is a variable in the vault's env file.
	EntryEnv EntryKind = "env"
	// EntryFile is a file credential.
	EntryFile EntryKind = "file"
	// EntryDir is a directory credential, projected as a whole.
	EntryDir EntryKind = "dir"
)

// Entry names one vault entry. It never carries a value.
type Entry struct {
	Name string
	Kind EntryKind
}

// Store reads and writes the vaults under <state>/vaults. Directories it
// makes are 0700 and files 0600, set with chmod whatever the umask.
//
// A Store serialises its own writes; it assumes it is the only writer of
// its state dir (one daemon per state dir), as the office registry does.
// The zero value is not usable; call NewStore.
type Store struct {
	root string
	// mu makes read-modify-write (merging env, replacing an entry) atomic
	// within the process, and keeps readers from seeing a directory entry
	// in the instant it is renamed aside.
	mu sync.RWMutex
	// projectMu serialises ProjectWithPlaceholders, so two commands
	// starting at once never swap the same copy under each other.
	projectMu sync.Mutex
}

// NewStore returns the store of stateDir. The path is made absolute (when
// the working directory can be read) because mount sources must be.
func NewStore(stateDir string) *Store {
	if abs, err := filepath.Abs(stateDir); err == nil {
		stateDir = abs
	}
	return &Store{root: filepath.Join(stateDir, "vaults")}
}

// Dir returns the directory of the vault key. It does not validate key;
// every other method does.
func (s *Store) Dir(key string) string { return filepath.Join(s.root, key) }

// SetEnv validates vars and merges them into the vault's env file, which
// is rewritten sorted, atomically and 0600. The vault is created when
// missing. An empty vars changes nothing. Invalid names or values are
// ErrInvalid and nothing is written; a name already used by a file entry
// is ErrConflict.
func (s *Store) SetEnv(key string, vars map[string]string) error {
	if err := ValidateKey(key); err != nil {
		return err
	}
	if _, err := FormatEnv(vars); err != nil {
		return err
	}
	if len(vars) == 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	dir, err := s.ensureDir(key)
	if err != nil {
		return err
	}
	env, err := readEnv(dir)
	if err != nil {
		return err
	}
	for name, value := range vars {
		// A variable called "env" does not clash with the env file itself.
		if _, err := os.Lstat(filepath.Join(dir, name)); err == nil && name != envFile {
			return errdefs.New(errdefs.ErrConflict, fmt.Sprintf("Vault entry %q already exists as a file", name))
		}
		env[name] = value
	}
	return writeEnv(dir, env)
}

// Env returns the vault's env variables: an empty map when the vault or
// its env file does not exist. A malformed env file is
// ErrFailedPrecondition naming the file and line.
func (s *Store) Env(key string) (map[string]string, error) {
	if err := ValidateKey(key); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	dir, ok, err := s.existingDir(key)
	if err != nil {
		return nil, err
	}
	if !ok {
		return map[string]string{}, nil
	}
	return readEnv(dir)
}

// PutFile stores source as the file credential name, replacing an entry
// of that name atomically: the copy is staged under a temporary name in
// the vault directory and renamed into place; an entry being replaced by
// (or replacing) a directory is first renamed aside and removed after.
//
// name is one path component, not "env" and not one of the store's
// temporary prefixes. source is a regular file or a directory (a symlink
// naming one is followed); a directory is copied recursively with
// directories 0700 and files 0600, and a symlink or special file inside it
// is refused, never followed. A name used by an env variable is
// ErrConflict; a missing source is ErrNotFound.
func (s *Store) PutFile(key, name, source string) error {
	if err := ValidateKey(key); err != nil {
		return err
	}
	if err := validateEntryName(name); err != nil {
		return err
	}
	src, err := filepath.Abs(source)
	if err != nil {
		return fmt.Errorf("vault source %q: %w", source, err)
	}
	srcInfo, err := os.Stat(src)
	if errors.Is(err, fs.ErrNotExist) {
		return errdefs.New(errdefs.ErrNotFound, fmt.Sprintf("Vault source %q does not exist", source))
	}
	if err != nil {
		return fmt.Errorf("vault source %q: %w", source, err)
	}
	if !srcInfo.IsDir() && !srcInfo.Mode().IsRegular() {
		return errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("Vault source %q is not a regular file or directory", source))
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	dir, err := s.ensureDir(key)
	if err != nil {
		return err
	}
	// Copying the store into itself (or a directory holding it) would
	// recurse into the stage and copy other vaults' secrets along.
	if realSrc, err := filepath.EvalSymlinks(src); err == nil {
		realRoot, err := filepath.EvalSymlinks(s.root)
		if err == nil && (underHost(realSrc, realRoot) || underHost(realRoot, realSrc)) {
			return errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("Vault source %q overlaps the vault store", source))
		}
	}
	env, err := readEnv(dir)
	if err != nil {
		return err
	}
	if _, ok := env[name]; ok {
		return errdefs.New(errdefs.ErrConflict, fmt.Sprintf("Vault entry %q already exists as an env variable", name))
	}

	var stage string
	if srcInfo.IsDir() {
		stage, err = os.MkdirTemp(dir, stagePrefix+"*")
		if err == nil {
			err = os.Chmod(stage, dirPerm)
		}
		if err == nil {
			err = copyTree(source, src, src, stage, srcInfo)
		}
	} else {
		stage, err = stageFile(dir, src, srcInfo)
	}
	if err != nil {
		if stage != "" {
			_ = os.RemoveAll(stage)
		}
		return err
	}
	if err := replaceEntry(dir, name, stage, srcInfo.IsDir()); err != nil {
		_ = os.RemoveAll(stage)
		return err
	}
	return nil
}

// Remove deletes the env variable or file entry called name; when both
// exist (only possible if someone edited the directory by hand) both go.
// A removed variable loses its placeholder mark, if any.
// Removing the last env variable removes the env file, so an emptied vault
// holds no stray empty files. Neither existing is ErrNotFound.
func (s *Store) Remove(key, name string) error {
	if err := ValidateKey(key); err != nil {
		return err
	}
	notFound := errdefs.New(errdefs.ErrNotFound, fmt.Sprintf("No vault entry named %q", name))
	s.mu.Lock()
	defer s.mu.Unlock()
	dir, ok, err := s.existingDir(key)
	if err != nil {
		return err
	}
	if !ok {
		return notFound
	}
	removed := false
	env, err := readEnv(dir)
	if err != nil {
		return err
	}
	if _, ok := env[name]; ok {
		delete(env, name)
		if err := writeEnv(dir, env); err != nil {
			return err
		}
		// The mark goes after the variable: failing in between leaves a
		// mark without a variable (harmless, and it still hides a value
		// set again), never a marked value delivered unmarked.
		if err := dropPlaceholder(dir, name); err != nil {
			return err
		}
		removed = true
	}
	// An invalid entry name cannot name a file entry (and "../x" must not
	// reach the file system).
	if validateEntryName(name) == nil {
		target := filepath.Join(dir, name)
		info, err := os.Lstat(target)
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return fmt.Errorf("remove vault entry %q: %w", name, err)
		default:
			if err := removeEntry(dir, target, info); err != nil {
				return fmt.Errorf("remove vault entry %q: %w", name, err)
			}
			removed = true
		}
	}
	if !removed {
		return notFound
	}
	return nil
}

// List returns the vault's entries, names only: env variables sorted by
// name, then file and directory entries sorted by name. A missing vault is
// an empty list.
func (s *Store) List(key string) ([]Entry, error) {
	if err := ValidateKey(key); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	dir, ok, err := s.existingDir(key)
	if err != nil {
		return nil, err
	}
	entries := []Entry{}
	if !ok {
		return entries, nil
	}
	env, err := readEnv(dir)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(env))
	for name := range env {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		entries = append(entries, Entry{Name: name, Kind: EntryEnv})
	}
	files, err := listFiles(dir)
	if err != nil {
		return nil, err
	}
	return append(entries, files...), nil
}

// HasFiles reports whether the vault holds any file or directory entry,
// which a mode without file mounts must refuse.
func (s *Store) HasFiles(key string) (bool, error) {
	if err := ValidateKey(key); err != nil {
		return false, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	dir, ok, err := s.existingDir(key)
	if err != nil || !ok {
		return false, err
	}
	files, err := listFiles(dir)
	return len(files) > 0, err
}

// Plan reads the vault's env variables and its top-level file entries
// (sorted by name) into an injection plan. A missing vault is an empty
// plan. Plan does not check mount targets: the caller knows the runtime's
// workspace targets and calls CheckTargets.
func (s *Store) Plan(key string) (Plan, error) {
	if err := ValidateKey(key); err != nil {
		return Plan{}, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	plan := Plan{Env: map[string]string{}, Files: []FileMount{}}
	dir, ok, err := s.existingDir(key)
	if err != nil {
		return Plan{}, err
	}
	if !ok {
		return plan, nil
	}
	if plan.Env, err = readEnv(dir); err != nil {
		return Plan{}, err
	}
	files, err := listFiles(dir)
	if err != nil {
		return Plan{}, err
	}
	for _, f := range files {
		plan.Files = append(plan.Files, FileMount{
			Name:        f.Name,
			HostPath:    filepath.Join(dir, f.Name),
			RuntimePath: FileTarget(f.Name),
		})
	}
	return plan, nil
}

// ensureDir creates the vaults root and the key's directory when missing
// and forces both to 0700: MkdirAll alone leaves the mode to the umask.
func (s *Store) ensureDir(key string) (string, error) {
	dir := s.Dir(key)
	for _, d := range []string{s.root, dir} {
		if err := os.MkdirAll(d, dirPerm); err != nil {
			return "", fmt.Errorf("create vault %q: %w", key, err)
		}
		if err := checkRealDir(d); err != nil {
			return "", err
		}
		if err := os.Chmod(d, dirPerm); err != nil {
			return "", fmt.Errorf("create vault %q: %w", key, err)
		}
	}
	return dir, nil
}

// existingDir returns the key's directory and whether it exists.
func (s *Store) existingDir(key string) (string, bool, error) {
	dir := s.Dir(key)
	for _, d := range []string{s.root, dir} {
		if _, err := os.Lstat(d); errors.Is(err, fs.ErrNotExist) {
			return dir, false, nil
		}
		if err := checkRealDir(d); err != nil {
			return dir, false, err
		}
	}
	return dir, true, nil
}

// checkRealDir refuses a symlink where a vault directory belongs: following
// it would read or write credentials somewhere the store does not own.
func checkRealDir(d string) error {
	info, err := os.Lstat(d)
	if err != nil {
		return fmt.Errorf("vault directory %q: %w", d, err)
	}
	if !info.IsDir() {
		return errdefs.New(errdefs.ErrFailedPrecondition, fmt.Sprintf("Vault directory %q is not a directory", d))
	}
	return nil
}

// readEnv parses the env file of dir; a missing file is an empty map.
func readEnv(dir string) (map[string]string, error) {
	path := filepath.Join(dir, envFile)
	info, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]string{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read vault env file: %w", err)
	}
	if !info.Mode().IsRegular() {
		return nil, errdefs.New(errdefs.ErrFailedPrecondition, fmt.Sprintf("Vault env file %q is not a regular file", path))
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read vault env file: %w", err)
	}
	env, err := ParseEnv(data)
	if err != nil {
		// ParseEnv's text names the line and never a value.
		return nil, errdefs.New(errdefs.ErrFailedPrecondition, fmt.Sprintf("Malformed vault env file %q: %s", path, err))
	}
	return env, nil
}

// writeEnv replaces the env file of dir with env, or removes it when env
// is empty.
func writeEnv(dir string, env map[string]string) error {
	path := filepath.Join(dir, envFile)
	if len(env) == 0 {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove vault env file: %w", err)
		}
		return atomicfile.SyncDir(dir)
	}
	data, err := FormatEnv(env)
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(path, data, filePerm)
}

// listFiles returns the file and directory entries of dir, sorted by
// name. Anything else found there (a symlink, a socket, a name the store
// would refuse) was not put there by the store; projecting a symlink would
// mount whatever it points at, so it fails the call instead.
func listFiles(dir string) ([]Entry, error) {
	des, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list vault: %w", err)
	}
	entries := []Entry{}
	for _, de := range des {
		name := de.Name()
		if name == envFile || isInternalName(name) {
			continue
		}
		path := filepath.Join(dir, name)
		if validateEntryName(name) != nil {
			return nil, errdefs.New(errdefs.ErrFailedPrecondition, fmt.Sprintf("Vault entry %q has a name the vault refuses; remove it", path))
		}
		switch t := de.Type(); {
		case t.IsDir():
			entries = append(entries, Entry{Name: name, Kind: EntryDir})
		case t.IsRegular():
			entries = append(entries, Entry{Name: name, Kind: EntryFile})
		default:
			return nil, errdefs.New(errdefs.ErrFailedPrecondition, fmt.Sprintf("Vault entry %q is not a regular file or directory; remove it", path))
		}
	}
	return entries, nil
}

// validateEntryName reports whether name can be a file entry: one path
// component, no control characters, not the env file and not one of the
// store's temporary names. Errors are of class ErrInvalid.
func validateEntryName(name string) error {
	invalid := func(reason string) error {
		return errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("Invalid vault entry name %q: %s", name, reason))
	}
	switch {
	case name == "":
		return errdefs.New(errdefs.ErrInvalid, "Vault entry name must be non-empty")
	case name == "." || name == "..":
		return invalid("must not be a path marker")
	case strings.ContainsAny(name, `/\`):
		return invalid("must not contain path separators")
	case hasControl(name):
		return invalid("must not contain control characters")
	case name == envFile:
		return invalid("the name is reserved for env variables")
	case name == placeholdersFile:
		return invalid("the name is reserved for placeholder marks")
	case isInternalName(name):
		return invalid("the prefix is reserved")
	}
	return nil
}

func isInternalName(name string) bool {
	return strings.HasPrefix(name, stagePrefix) || strings.HasPrefix(name, asidePrefix) ||
		strings.HasPrefix(name, envTempPrefix) ||
		name == placeholdersFile || strings.HasPrefix(name, placeholdersTempPrefix)
}

// stageFile copies the regular file src into a new 0600 temporary file in
// dir and returns its path.
func stageFile(dir, src string, want fs.FileInfo) (string, error) {
	f, err := os.CreateTemp(dir, stagePrefix+"*")
	if err != nil {
		return "", fmt.Errorf("stage vault entry: %w", err)
	}
	stage := f.Name()
	err = fillFile(f, src, src, want)
	if cerr := f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("stage vault entry: %w", cerr)
	}
	return stage, err
}

// fillFile chmods dst to 0600 and copies src into it. want is what an
// earlier stat saw at src; a file swapped in since (a symlink, another
// file) is refused rather than copied.
func fillFile(dst *os.File, display, src string, want fs.FileInfo) error {
	if err := dst.Chmod(filePerm); err != nil {
		return fmt.Errorf("stage vault entry: %w", err)
	}
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("vault source %q: %w", display, err)
	}
	defer func() { _ = in.Close() }()
	got, err := in.Stat()
	if err != nil {
		return fmt.Errorf("vault source %q: %w", display, err)
	}
	if !os.SameFile(want, got) || !got.Mode().IsRegular() {
		return errdefs.New(errdefs.ErrConflict, fmt.Sprintf("Vault source %q changed while it was copied", display))
	}
	if _, err := io.Copy(dst, in); err != nil {
		return fmt.Errorf("copy vault source %q: %w", display, err)
	}
	if err := dst.Sync(); err != nil {
		return fmt.Errorf("stage vault entry: %w", err)
	}
	return nil
}

// copyTree copies the directory src (whose stat is want) into the
// existing directory dst. root is the top of the source, to name entries
// relative to it in errors; source is the path as the caller gave it.
func copyTree(source, root, src, dst string, want fs.FileInfo) error {
	d, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("vault source %q: %w", source, err)
	}
	defer func() { _ = d.Close() }()
	if got, err := d.Stat(); err != nil || !os.SameFile(want, got) {
		return errdefs.New(errdefs.ErrConflict, fmt.Sprintf("Vault source %q changed while it was copied", source))
	}
	des, err := d.ReadDir(-1)
	if err != nil {
		return fmt.Errorf("vault source %q: %w", source, err)
	}
	for _, de := range des {
		from := filepath.Join(src, de.Name())
		to := filepath.Join(dst, de.Name())
		rel, _ := filepath.Rel(root, from)
		info, err := os.Lstat(from)
		if err != nil {
			return fmt.Errorf("vault source %q: %w", source, err)
		}
		switch mode := info.Mode(); {
		case mode&fs.ModeSymlink != 0:
			return errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("Vault source %q contains a symlink %q; symlinks are not copied", source, rel))
		case mode.IsDir():
			if err := os.Mkdir(to, dirPerm); err != nil {
				return fmt.Errorf("stage vault entry: %w", err)
			}
			if err := os.Chmod(to, dirPerm); err != nil {
				return fmt.Errorf("stage vault entry: %w", err)
			}
			if err := copyTree(source, root, from, to, info); err != nil {
				return err
			}
		case mode.IsRegular():
			out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, filePerm)
			if err != nil {
				return fmt.Errorf("stage vault entry: %w", err)
			}
			err = fillFile(out, source, from, info)
			if cerr := out.Close(); err == nil && cerr != nil {
				err = fmt.Errorf("stage vault entry: %w", cerr)
			}
			if err != nil {
				return err
			}
		default:
			return errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("Vault source %q contains %q, which is not a regular file or directory", source, rel))
		}
	}
	return nil
}

// replaceEntry moves stage to dir/name. A file over a file (or over
// nothing) is one atomic rename. When either side is a directory, rename
// cannot replace it, so the old entry is renamed aside first, restored if
// the second rename fails, and removed after.
func replaceEntry(dir, name, stage string, stageIsDir bool) error {
	target := filepath.Join(dir, name)
	old, err := os.Lstat(target)
	switch {
	case errors.Is(err, fs.ErrNotExist) || err == nil && !old.IsDir() && !stageIsDir:
		if err := os.Rename(stage, target); err != nil {
			return fmt.Errorf("store vault entry %q: %w", name, err)
		}
	case err != nil:
		return fmt.Errorf("store vault entry %q: %w", name, err)
	default:
		aside := filepath.Join(dir, asidePrefix+randomSuffix())
		if err := os.Rename(target, aside); err != nil {
			return fmt.Errorf("store vault entry %q: %w", name, err)
		}
		if err := os.Rename(stage, target); err != nil {
			_ = os.Rename(aside, target)
			return fmt.Errorf("store vault entry %q: %w", name, err)
		}
		// The new entry is in place; a failed cleanup leaves only an
		// ignored, owner-only leftover, so it does not fail the call.
		_ = os.RemoveAll(aside)
	}
	return atomicfile.SyncDir(dir)
}

// removeEntry removes target; a directory is renamed aside first so a
// failure half-way never leaves a partial credential to be projected.
func removeEntry(dir, target string, info fs.FileInfo) error {
	if !info.IsDir() {
		if err := os.Remove(target); err != nil {
			return err
		}
		return atomicfile.SyncDir(dir)
	}
	aside := filepath.Join(dir, asidePrefix+randomSuffix())
	if err := os.Rename(target, aside); err != nil {
		return err
	}
	if err := atomicfile.SyncDir(dir); err != nil {
		return err
	}
	_ = os.RemoveAll(aside)
	return nil
}

func randomSuffix() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// underHost reports whether host path p equals dir or lies below it.
func underHost(p, dir string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}
