package office

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/hutchsandbox/hutch/internal/atomicfile"
	"github.com/hutchsandbox/hutch/internal/fileid"
)

// RegistryFile and LockDir are the registry's entries in the state dir.
const (
	RegistryFile = "office-registry.json"
	LockDir      = ".office-registry.lock"
)

// Registry reads and changes one state dir's office registry. Reads take
// no lock: writers replace the file atomically, so a reader sees one
// complete version. Changes go through Update, which serialises every
// writer on the host (goroutines, daemons and CLI runs alike) with the
// lock directory.
//
// A Registry keeps the last version it read, parsed and indexed, and
// checks before each read that the file is still that version (one
// lstat: the same inode, size and times). Any number of Registries, in
// any number of processes, may point at the same state dir: each sees
// every other's writes on its next read. A daemon with ten thousand
// offices would otherwise parse them all for every command.
//
// Set the exported fields before the Registry is first used.
type Registry struct {
	path    string
	lockDir string

	mu     sync.Mutex // guards cached and reads
	cached *snapshot  // the version last read; nil: none yet
	reads  int        // how many times the file was read, for tests
	// racyWindow is fileid.RacyWindow, but for tests.
	racyWindow time.Duration

	// Clock stamps new records; nil means time.Now.
	Clock func() time.Time
	// LockTimeout bounds the wait for the registry lock; zero means
	// DefaultLockTimeout.
	LockTimeout time.Duration
}

// NewRegistry returns the registry of stateDir. The state dir must exist
// when the registry is first changed; creating and checking it (mode,
// ownership) is the daemon's job, not this package's.
func NewRegistry(stateDir string) *Registry {
	return &Registry{
		path:       filepath.Join(stateDir, RegistryFile),
		lockDir:    filepath.Join(stateDir, LockDir),
		racyWindow: fileid.RacyWindow,
	}
}

// Path returns the registry file's path.
func (r *Registry) Path() string { return r.path }

func (r *Registry) now() time.Time {
	if r.Clock != nil {
		return r.Clock()
	}
	return time.Now()
}

// Load reads the registry. A missing file is an empty registry; a file
// that is not a regular file, malformed, of another version or breaking an
// invariant is an error of class errdefs.ErrFailedPrecondition. The File
// is the caller's to change.
func (r *Registry) Load() (*File, error) {
	s, err := r.snapshot()
	if err != nil {
		return nil, err
	}
	return s.file.clone(), nil
}

// snapshot is one version of the registry file as read, with the indexes
// the hot paths use. It is never changed once made.
type snapshot struct {
	id   fileid.ID
	file *File
	// settled: the version had last changed well before it was read,
	// so its identity alone tells it from any later one
	// (fileid.ID.Settled).
	settled bool
	has     map[Address]bool

	// keyed and keys are built on first use, from file: a SHA-256 per
	// office, a microsecond each, too many to spend per command.
	keysOnce sync.Once
	keyed    []KeyedRecord // sorted as Offices
	keys     map[Key]Address

	// views holds what each View derived from this version: *View -> value.
	views sync.Map
}

// KeyedRecord is an office record with its office key.
type KeyedRecord struct {
	OfficeRecord
	Key Key
}

// index builds s.keyed and s.keys, once.
func (s *snapshot) index() {
	s.keysOnce.Do(func() {
		s.keyed = make([]KeyedRecord, len(s.file.Offices))
		s.keys = make(map[Key]Address, len(s.file.Offices))
		recs := slices.Clone(s.file.Offices)
		sortOffices(recs)
		for i, rec := range recs {
			a := rec.Address()
			s.keyed[i] = KeyedRecord{OfficeRecord: rec, Key: a.Key()}
			s.keys[s.keyed[i].Key] = a
		}
	})
}

// snapshot returns the registry's current version: the cached one when
// the file is still it, else the file read anew.
func (r *Registry) snapshot() (*snapshot, error) {
	r.mu.Lock()
	s := r.cached
	r.mu.Unlock()
	fi, err := os.Lstat(r.path)
	if err == nil && s != nil && s.settled {
		if id, ok := fileid.Of(fi); ok && id == s.id {
			return s, nil
		}
	}
	start := time.Now()
	f, _, id, err := readFile(r.path)
	if err != nil {
		return nil, err
	}
	s = &snapshot{id: id, file: f, has: make(map[Address]bool, len(f.Offices))}
	for _, rec := range f.Offices {
		s.has[rec.Address()] = true
	}
	s.settled = id.Settled(start, r.racyWindow)
	r.mu.Lock()
	r.cached = s
	r.reads++
	r.mu.Unlock()
	return s, nil
}

// Update changes the registry under its lock: it reloads the file (another
// process may have changed it since any earlier Load), calls fn, checks the
// result and writes it atomically with mode 0600. If fn returns an error
// nothing is written and that error is returned. An unchanged file is not
// rewritten. Waiting longer than LockTimeout for the lock fails with
// errdefs.ErrUnavailable.
func (r *Registry) Update(fn func(*File) error) error {
	return r.Hold(func(j *Journal) error {
		if err := fn(j.File()); err != nil {
			return err
		}
		// fn may have broken an invariant (say, appended a duplicate);
		// Save refuses to write a file the next Load would reject.
		return j.Save()
	})
}

// Record makes sure the registry holds an office for a and reports whether
// it added one. It is idempotent, and takes no lock when a fresh read
// already shows the office, which is the common case: every command of a
// conversation ensures its office. Errors of class errdefs.ErrInvalid mean
// a is invalid.
func (r *Registry) Record(a Address) (added bool, err error) {
	if err := a.Validate(); err != nil {
		return false, err
	}
	s, err := r.snapshot()
	if err != nil {
		return false, err
	}
	if s.has[a] {
		return false, nil
	}
	// Second-precision UTC keeps the timestamp plain RFC 3339.
	at := r.now().UTC().Truncate(time.Second)
	err = r.Update(func(f *File) error {
		added = f.AddOffice(a, at)
		return nil
	})
	if err != nil {
		return false, err
	}
	return added, nil
}

// Offices returns every recorded office, sorted by platform then
// conversation id.
func (r *Registry) Offices() ([]OfficeRecord, error) {
	s, err := r.snapshot()
	if err != nil {
		return nil, err
	}
	out := slices.Clone(s.file.Offices)
	sortOffices(out)
	return out, nil
}

// Lookup returns the address whose office key is k, if one is recorded.
// Keys are one-way, so this is the only way back from a directory name to
// the conversation it belongs to.
func (r *Registry) Lookup(k Key) (Address, bool, error) {
	s, err := r.snapshot()
	if err != nil {
		return Address{}, false, err
	}
	s.index()
	a, ok := s.keys[k]
	return a, ok, nil
}

// A View is a value derived from every office of the registry, such as
// a listing's encoded answer, computed once per version of the file and
// then served from memory until the file changes.
type View[T any] struct {
	build func(recs []KeyedRecord) (T, error)
}

// NewView returns the view that build derives. build gets the offices
// sorted as Offices, with their keys, and must not change them: the same
// records serve every caller.
func NewView[T any](build func(recs []KeyedRecord) (T, error)) *View[T] {
	return &View[T]{build: build}
}

// Of is v of r's current version. An error is returned, never kept: the
// next call builds again.
func (v *View[T]) Of(r *Registry) (T, error) {
	s, err := r.snapshot()
	if err != nil {
		var zero T
		return zero, err
	}
	if got, ok := s.views.Load(v); ok {
		return got.(T), nil
	}
	s.index()
	val, err := v.build(s.keyed)
	if err != nil {
		return val, err
	}
	// Two callers may both have built it; either result is this version's.
	got, _ := s.views.LoadOrStore(v, val)
	return got.(T), nil
}

// Journal is the registry held under its lock for a run of several
// writes, as a migration needs: each step must be on disk before the file
// system changes it describes, and no other process may write in between.
type Journal struct {
	r    *Registry
	file *File
	last []byte // the file as last read or written
}

// File is the registry as this journal holds it; change it, then Save.
func (j *Journal) File() *File { return j.file }

// Save checks the file and writes it atomically (fsynced, so the journal
// is durable before whatever the caller does next). An unchanged file is
// not rewritten.
func (j *Journal) Save() error {
	if err := j.file.validate(j.r.path); err != nil {
		return err
	}
	data, err := j.file.encode()
	if err != nil {
		return fmt.Errorf("encode office registry %s: %w", j.r.path, err)
	}
	if j.last != nil && bytes.Equal(data, j.last) {
		return nil
	}
	if err := atomicfile.WriteFile(j.r.path, data, 0o600); err != nil {
		return err
	}
	j.last = data
	return nil
}

// Hold takes the registry lock, removes the temp files of registry
// writes whose process died, loads the file and runs fn with a Journal
// on it; the lock is released when fn returns. Nothing is written unless
// fn calls Save.
func (r *Registry) Hold(fn func(*Journal) error) (err error) {
	timeout := r.LockTimeout
	if timeout <= 0 {
		timeout = DefaultLockTimeout
	}
	l, err := acquireLock(r.lockDir, timeout)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, l.release()) }()
	// Under the lock no write of the registry is in flight, so a temp file
	// of one is what a writer killed mid-write left, and would otherwise
	// stay forever. A failed sweep must not block the change: the next
	// holder tries again.
	_ = atomicfile.RemoveTemps(r.path)
	f, raw, _, err := readFile(r.path)
	if err != nil {
		return err
	}
	return fn(&Journal{r: r, file: f, last: raw})
}

// Now is the registry's clock, second-precision UTC, for records a caller
// adds through a Journal.
func (r *Registry) Now() time.Time { return r.now().UTC().Truncate(time.Second) }
