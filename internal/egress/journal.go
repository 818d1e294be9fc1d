package egress

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"slices"
	"sync"

	"golang.org/x/sys/unix"
)

// journalLimit is the size at which a journal moves to path+".1",
// replacing the one before.
const journalLimit = 256 << 10

// Journal is an append-only file of Events, one JSON object a line, kept
// to two generations: path, and path+".1" once path reached 256 KiB.
// Its Record fits Proxy.Record.
//
// Each Record opens the file, takes an flock on it and writes its line
// in one O_APPEND write, so the goroutines of a process and several
// processes may record into one journal: lines never interleave, and a
// rotation (a rename under the same lock) loses none of them.
type Journal struct {
	path  string
	limit int64
	// Log receives a warning for each event that could not be written.
	// Nil discards.
	Log *slog.Logger

	mu sync.Mutex // one writer of this process at a time
}

// OpenJournal returns the journal at path. Nothing is opened until the
// first Record; a missing directory shows then, in Log.
func OpenJournal(path string) *Journal {
	return &Journal{path: path, limit: journalLimit}
}

// Record appends e.
func (j *Journal) Record(e Event) {
	if err := j.append(e); err != nil && j.Log != nil {
		j.Log.LogAttrs(context.Background(), slog.LevelWarn, "egress journal not written",
			slog.String("path", j.path), slog.String("error", err.Error()))
	}
}

func (j *Journal) append(e Event) error {
	// Event.Secret is the secret's name; no Event carries a value.
	line, err := json.Marshal(e) //nolint:gosec // G117: see above
	if err != nil {
		return err
	}
	line = append(line, '\n')
	j.mu.Lock()
	defer j.mu.Unlock()
	// Another process may rotate between our open and our lock; each
	// round opens the file that is at path now. A few rounds suffice
	// unless the journal rotates faster than it is written.
	for range 8 {
		f, err := j.openLocked(os.O_WRONLY|os.O_APPEND|os.O_CREATE, unix.LOCK_EX)
		if err != nil {
			return err
		}
		if f == nil {
			continue
		}
		fi, err := f.Stat()
		if err != nil {
			_ = f.Close()
			return err
		}
		if fi.Size() > 0 && fi.Size()+int64(len(line)) > j.limit {
			// Renamed while locked: whoever waits on this file finds it
			// is no longer at path and opens the new one.
			err := os.Rename(j.path, j.path+".1")
			_ = f.Close()
			if err != nil {
				return err
			}
			continue
		}
		_, err = f.Write(line)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		return err
	}
	return errors.New("the journal kept rotating under this writer")
}

// openLocked opens path and locks it with how (LOCK_EX or LOCK_SH). It
// returns nil, nil when the file it locked is no longer the one at path
// (it was rotated meanwhile), for the caller to try again.
func (j *Journal) openLocked(flag int, how int) (*os.File, error) {
	f, err := os.OpenFile(j.path, flag, 0o600)
	if err != nil {
		return nil, err
	}
	for {
		err = unix.Flock(int(f.Fd()), how)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("lock %s: %w", j.path, err)
	}
	fi, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	now, err := os.Stat(j.path)
	if err != nil || !os.SameFile(fi, now) {
		_ = f.Close()
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		return nil, nil
	}
	return f, nil
}

// ReadJournal returns the last n events of the journal at path (every
// one when n <= 0), newest first, from path+".1" and path. A line that
// does not parse (the torn end of a write cut short by a crash) is
// skipped. A journal that does not exist yet has no events.
func ReadJournal(path string, n int) ([]Event, error) {
	j := &Journal{path: path}
	// A shared lock on path holds off rotation between the two reads.
	var f *os.File
	for range 8 {
		var err error
		f, err = j.openLocked(os.O_RDONLY, unix.LOCK_SH)
		if errors.Is(err, fs.ErrNotExist) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("egress journal: %w", err)
		}
		if f != nil {
			break
		}
	}
	var older, newer []byte
	if f != nil {
		defer func() { _ = f.Close() }()
		var err error
		if newer, err = io.ReadAll(f); err != nil {
			return nil, fmt.Errorf("egress journal: %w", err)
		}
	}
	older, err := os.ReadFile(path + ".1")
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("egress journal: %w", err)
	}
	var events []Event
	for _, data := range [][]byte{older, newer} {
		for line := range bytes.Lines(data) {
			var e Event
			if json.Unmarshal(line, &e) == nil {
				events = append(events, e)
			}
		}
	}
	slices.Reverse(events)
	if n > 0 && len(events) > n {
		events = events[:n]
	}
	return events, nil
}
