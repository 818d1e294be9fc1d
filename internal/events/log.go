package events

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// DefaultMaxSize is the size past which the log is rotated.
const DefaultMaxSize = 8 << 20

// MaxLast bounds how many events Last and Follow return from the past.
const MaxLast = 1000

// Log is the event log of one state dir. Its zero value is not usable:
// use Open.
type Log struct {
	path string
	// MaxSize is the size past which the file is rotated (DefaultMaxSize).
	MaxSize int64
	// Poll is how often Follow looks for new lines (250 ms).
	Poll time.Duration
}

// Path is the log's file in stateDir.
func Path(stateDir string) string { return filepath.Join(stateDir, "events.jsonl") }

// Open returns the log of stateDir (the file is made on the first Append).
func Open(stateDir string) *Log {
	return &Log{path: Path(stateDir), MaxSize: DefaultMaxSize, Poll: 250 * time.Millisecond}
}

// Path is the current file of the log.
func (l *Log) Path() string { return l.path }

func (l *Log) older() string { return l.path + ".1" }

// Append writes e (its time set to now when zero) in one write and syncs
// it, rotating the file when it grew past MaxSize.
func (l *Log) Append(e Event) error {
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	e.Time = e.Time.UTC()
	line := e.Line()
	f, err := os.OpenFile(l.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("event log: %w", err)
	}
	defer func() { _ = f.Close() }()
	if _, err := f.Write(line); err != nil {
		return fmt.Errorf("event log: %w", err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("event log: %w", err)
	}
	if st, err := f.Stat(); err == nil && st.Size() > l.maxSize() {
		if err := l.rotate(); err != nil {
			// The event is written; the file grows past its bound
			// until the rename works, and the caller logs why.
			return fmt.Errorf("event log written, not rotated: %w", err)
		}
	}
	return nil
}

func (l *Log) maxSize() int64 {
	if l.MaxSize <= 0 {
		return DefaultMaxSize
	}
	return l.MaxSize
}

// rotate renames the file to its .1 under an flock, when it is still
// past the bound (another process may have rotated it meanwhile). A
// process that finds the lock taken leaves the rotation to its holder.
// An error says the file could not be rotated (a .1 that is no file, a
// lock that cannot be made).
func (l *Log) rotate() error {
	lf, err := os.OpenFile(l.path+".lock", os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return err
	}
	defer func() { _ = lf.Close() }()
	if unix.Flock(int(lf.Fd()), unix.LOCK_EX|unix.LOCK_NB) != nil {
		return nil
	}
	defer func() { _ = unix.Flock(int(lf.Fd()), unix.LOCK_UN) }()
	if st, err := os.Lstat(l.path); err == nil && st.Mode().IsRegular() && st.Size() > l.maxSize() {
		return os.Rename(l.path, l.older())
	}
	return nil
}

// Last returns up to n (at most MaxLast) of the newest events, oldest
// first.
func (l *Log) Last(n int) ([]Event, error) {
	evs, _, err := l.last(n)
	return evs, err
}

// last also returns the current file, open at its end as last read it,
// for Follow to go on from (nil when there is none yet).
func (l *Log) last(n int) ([]Event, *os.File, error) {
	n = min(max(n, 0), MaxLast)
	cur, err := openRead(l.path)
	if err != nil {
		return nil, nil, err
	}
	var evs []Event
	var end int64
	if cur != nil {
		if evs, end, err = tail(cur, n, -1); err != nil {
			_ = cur.Close()
			return nil, nil, err
		}
		if _, err := cur.Seek(end, io.SeekStart); err != nil {
			_ = cur.Close()
			return nil, nil, err
		}
	}
	if len(evs) < n {
		old, err := openRead(l.older())
		if err != nil {
			if cur != nil {
				_ = cur.Close()
			}
			return nil, nil, err
		}
		if old != nil {
			more, _, err := tail(old, n-len(evs), -1)
			_ = old.Close()
			if err != nil {
				if cur != nil {
					_ = cur.Close()
				}
				return nil, nil, err
			}
			evs = append(more, evs...)
		}
	}
	return evs, cur, nil
}

func openRead(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("event log: %w", err)
	}
	return f, nil
}

// tail reads the last n events of f before offset end (-1: its size),
// reading at most n*MaxLine bytes. It returns them oldest first, and the
// offset just past the last whole line.
func tail(f *os.File, n int, end int64) ([]Event, int64, error) {
	if end < 0 {
		st, err := f.Stat()
		if err != nil {
			return nil, 0, err
		}
		end = st.Size()
	}
	start := max(end-int64(n+1)*MaxLine, 0)
	buf := make([]byte, end-start)
	if _, err := f.ReadAt(buf, start); err != nil && !errors.Is(err, io.EOF) {
		return nil, 0, err
	}
	// A line past the last newline is being written, or was torn: it is
	// not read, and Follow starts before it.
	last := bytes.LastIndexByte(buf, '\n')
	whole := start + int64(last+1)
	buf = buf[:last+1]
	if start > 0 {
		// The first line may be cut: skip to the first newline.
		if i := bytes.IndexByte(buf, '\n'); i >= 0 {
			buf = buf[i+1:]
		}
	}
	var evs []Event
	for _, line := range bytes.Split(buf, []byte{'\n'}) {
		if e, ok := Parse(line); ok {
			evs = append(evs, e)
		}
	}
	if len(evs) > n {
		evs = evs[len(evs)-n:]
	}
	return evs, whole, nil
}

// Follow calls fn with the last n events, then with each new event as it
// is appended, until ctx ends or fn returns an error (which Follow
// returns; ctx's end returns nil). It polls every Poll and follows the
// log across rotations. fn is called from Follow's goroutine only.
func (l *Log) Follow(ctx context.Context, n int, fn func(Event) error) error {
	evs, f, err := l.last(n)
	if err != nil {
		return err
	}
	defer func() {
		if f != nil {
			_ = f.Close()
		}
	}()
	for _, e := range evs {
		if err := fn(e); err != nil {
			return err
		}
	}
	poll := l.Poll
	if poll <= 0 {
		poll = 250 * time.Millisecond
	}
	t := time.NewTicker(poll)
	defer t.Stop()
	var partial []byte
	buf := make([]byte, 64<<10)
	for {
		if f == nil {
			if f, err = openRead(l.path); err != nil {
				return err
			}
		}
		if f != nil {
			// Read what is new; then, if the path names another file
			// now (rotated), read the old one to its end and move on.
			for {
				k, rerr := f.Read(buf)
				partial = append(partial, buf[:k]...)
				for {
					i := bytes.IndexByte(partial, '\n')
					if i < 0 {
						break
					}
					if e, ok := Parse(partial[:i]); ok {
						if err := fn(e); err != nil {
							return err
						}
					}
					partial = partial[i+1:]
				}
				if len(partial) > MaxLine {
					partial = partial[:0] // no line is this long: not ours
				}
				if rerr != nil || k == 0 {
					break
				}
			}
			if rotated(f, l.path) {
				_ = f.Close()
				f, partial = nil, partial[:0]
				continue
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// rotated says whether path no longer names f's file.
func rotated(f *os.File, path string) bool {
	a, err := f.Stat()
	if err != nil {
		return true
	}
	b, err := os.Lstat(path)
	if err != nil {
		return errors.Is(err, fs.ErrNotExist)
	}
	return !os.SameFile(a, b)
}
