package box

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Sessions counts the shells and agents attached to one project's
// container, across processes: each holds an flock on a file of its own
// in dir for as long as it is attached. A process that dies (even by
// SIGKILL) loses its lock with it, so a crashed session is never counted.
type Sessions struct{ dir string }

// NewSessions returns the session set kept in dir.
func NewSessions(dir string) *Sessions { return &Sessions{dir: dir} }

// Join attaches one session and returns the function that detaches it.
func (s *Sessions) Join() (leave func(), err error) {
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return nil, fmt.Errorf("session dir: %w", err)
	}
	// The file is made under a name Count passes over and only renamed
	// to *.session once locked: a counter that found it unlocked would
	// take it for a dead session's and remove it, leaving this session
	// holding a lock nobody sees.
	f, err := os.CreateTemp(s.dir, strconv.Itoa(os.Getpid())+"-*"+joiningSuffix)
	if err != nil {
		return nil, fmt.Errorf("session file: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		_ = f.Close()
		_ = os.Remove(f.Name())
		return nil, fmt.Errorf("lock session file: %w", err)
	}
	name := strings.TrimSuffix(f.Name(), joiningSuffix) + sessionSuffix
	if err := os.Rename(f.Name(), name); err != nil {
		_ = f.Close()
		_ = os.Remove(f.Name())
		return nil, fmt.Errorf("session file: %w", err)
	}
	return func() {
		_ = os.Remove(name)
		_ = f.Close()
	}, nil
}

const (
	sessionSuffix = ".session"
	joiningSuffix = ".joining"
	// joiningLeftAfter is how old a .joining file nobody holds must be
	// before Count takes it for one left by a process that died between
	// creating and renaming it; a live Join renames within microseconds.
	joiningLeftAfter = time.Minute
)

// Count returns how many sessions are attached, removing the files of
// sessions whose process is gone.
func (s *Sessions) Count() (int, error) {
	des, err := os.ReadDir(s.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	n := 0
	for _, de := range des {
		if strings.HasSuffix(de.Name(), joiningSuffix) {
			s.removeLeftJoining(de)
			continue
		}
		if !strings.HasSuffix(de.Name(), sessionSuffix) {
			continue
		}
		path := filepath.Join(s.dir, de.Name())
		f, err := os.Open(path)
		if err != nil {
			continue // left between listing and opening
		}
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
			n++ // held: a live session
		} else {
			_ = os.Remove(path) // nobody holds it: a session that died
		}
		_ = f.Close()
	}
	return n, nil
}

// removeLeftJoining removes a .joining file old enough that its Join
// cannot still be running, unless somebody holds its lock.
func (s *Sessions) removeLeftJoining(de fs.DirEntry) {
	info, err := de.Info()
	if err != nil || time.Since(info.ModTime()) < joiningLeftAfter {
		return
	}
	path := filepath.Join(s.dir, de.Name())
	f, err := os.Open(path)
	if err != nil {
		return
	}
	defer func() { _ = f.Close() }()
	if unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) == nil {
		_ = os.Remove(path)
	}
}

// Lock takes the project's lifecycle lock: a session joins and brings the
// sandbox up under it, and the last session out counts and stops under
// it, so one process never stops the container another has just joined.
func (s *Sessions) Lock() (unlock func(), err error) {
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return nil, fmt.Errorf("session dir: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(filepath.Dir(s.dir), "lifecycle.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lifecycle lock: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("lifecycle lock: %w", err)
	}
	return func() { _ = f.Close() }, nil
}
