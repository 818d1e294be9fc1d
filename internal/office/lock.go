package office

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hutchsandbox/hutch/internal/errdefs"
)

// The registry lock is a directory, because mkdir is atomic on every
// filesystem hutch supports (flock is not reliable on network mounts) and
// the reference system uses the same protocol, so the two never write the
// registry at once.
const (
	lockRetry = 25 * time.Millisecond
	// DefaultLockTimeout is how long Registry waits for the lock by default.
	DefaultLockTimeout = 5 * time.Second
	// ownerlessGrace is how old a lock without a readable owner must be
	// before it counts as abandoned: a holder writes its owner file
	// microseconds after its mkdir, so seconds without one mean it died
	// in between. It is well under DefaultLockTimeout, so the writer that
	// finds such a lock takes it over instead of timing out (a minute,
	// as before, blocked every writer for that minute).
	ownerlessGrace = 2 * time.Second
	// guardStaleAge is how old a break guard must be before it counts as
	// abandoned. A breaker holds it for two syscalls, but a slow one that
	// lost its guard could delete a lock retaken meanwhile, so this errs
	// long: only a breaker that died mid-break leaves one.
	guardStaleAge = 60 * time.Second
	ownerFile     = "owner"
	// breakSuffix names the directory a process holds while it breaks a
	// stale lock. Without it two waiters could both judge the same lock
	// stale, and the slower one would delete the lock the faster one had
	// just retaken.
	breakSuffix = ".break"
)

// lease is a held registry lock.
type lease struct {
	dir   string
	owner string // "<pid>:<token>", compared on release
}

// acquireLock takes the lock directory dir, breaking it when its holder is
// dead, and gives up after timeout with an ErrUnavailable error.
func acquireLock(dir string, timeout time.Duration) (*lease, error) {
	var tok [8]byte
	if _, err := rand.Read(tok[:]); err != nil {
		return nil, fmt.Errorf("office registry lock token: %w", err)
	}
	owner := strconv.Itoa(os.Getpid()) + ":" + hex.EncodeToString(tok[:])
	deadline := time.Now().Add(timeout)
	for {
		err := os.Mkdir(dir, 0o700)
		switch {
		case err == nil:
			werr := writeOwner(dir, owner)
			if werr == nil {
				return &lease{dir: dir, owner: owner}, nil
			}
			if !errors.Is(werr, fs.ErrNotExist) && !errors.Is(werr, fs.ErrExist) {
				_ = os.RemoveAll(dir)
				return nil, werr
			}
			// This process stalled past ownerlessGrace between its mkdir
			// and its owner file, and a waiter broke the lock: the
			// directory is gone or another's now, and must not be
			// removed. Wait like any other waiter.
		case !errors.Is(err, fs.ErrExist):
			return nil, fmt.Errorf("acquire office registry lock: %w", err)
		}
		stale, err := lockIsStale(dir)
		if err != nil {
			return nil, err
		}
		if stale {
			broke, err := breakLock(dir)
			if err != nil {
				return nil, err
			}
			if broke {
				continue
			}
		}
		if !time.Now().Before(deadline) {
			return nil, errdefs.New(errdefs.ErrUnavailable, "Timed out acquiring office registry lock: "+dir)
		}
		time.Sleep(min(lockRetry, max(time.Until(deadline), time.Millisecond)))
	}
}

// writeOwner writes the owner file of a freshly made lock. Modes are set
// explicitly because the umask may have narrowed them, even to nothing,
// which would leave this process unable to write its own owner file.
func writeOwner(dir, owner string) error {
	if err := os.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("acquire office registry lock: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(dir, ownerFile), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("acquire office registry lock: %w", err)
	}
	merr := f.Chmod(0o600)
	_, werr := f.WriteString(owner)
	cerr := f.Close()
	if err := errors.Join(merr, werr, cerr); err != nil {
		return fmt.Errorf("acquire office registry lock: %w", err)
	}
	return nil
}

// lockIsStale reports whether the lock at dir was abandoned: its owner
// process is gone, or it has no readable owner and is old enough that its
// maker must have died between mkdir and writing the owner file. A lock
// that vanished meanwhile is not stale (the next mkdir simply wins).
func lockIsStale(dir string) (bool, error) {
	fi, err := os.Lstat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("inspect office registry lock: %w", err)
	}
	if !fi.IsDir() {
		// Breaking it would mean deleting a file hutch did not make.
		return false, errdefs.New(errdefs.ErrFailedPrecondition, "Office registry lock must be a directory: "+dir)
	}
	if pid, ok := readOwnerPID(dir); ok {
		return !processAlive(pid), nil
	}
	return time.Since(fi.ModTime()) >= ownerlessGrace, nil
}

// readOwnerPID returns the pid named by dir's owner file, if the file is
// there, readable and well formed.
func readOwnerPID(dir string) (int, bool) {
	data, err := os.ReadFile(filepath.Join(dir, ownerFile))
	if err != nil {
		return 0, false
	}
	pidText, token, ok := strings.Cut(strings.TrimSpace(string(data)), ":")
	if !ok || token == "" {
		return 0, false
	}
	pid, err := strconv.Atoi(pidText)
	// kill(0) and kill(-n) address process groups, never one holder.
	if err != nil || pid <= 0 {
		return 0, false
	}
	return pid, true
}

// processAlive reports whether pid names a live process. Only ESRCH proves
// it dead: EPERM means it exists under another user, and any other error
// is treated as alive so that a doubt never breaks a held lock.
func processAlive(pid int) bool {
	return !errors.Is(unix.Kill(pid, 0), unix.ESRCH)
}

// breakLock removes the stale lock at dir while holding dir+".break", after
// checking again under that guard that the lock is still stale: another
// waiter may have broken and retaken it since it was judged. A guard left
// by a process that died mid-break is itself removed once it is old. It
// reports whether the lock is gone, so the caller can retry at once.
func breakLock(dir string) (bool, error) {
	guard := dir + breakSuffix
	if err := os.Mkdir(guard, 0o700); err != nil {
		if !errors.Is(err, fs.ErrExist) {
			return false, fmt.Errorf("break stale office registry lock: %w", err)
		}
		// Someone else is breaking it; the caller waits and retries.
		if fi, err := os.Lstat(guard); err == nil && fi.IsDir() && time.Since(fi.ModTime()) >= guardStaleAge {
			_ = os.Remove(guard)
		}
		return false, nil
	}
	defer func() { _ = os.Remove(guard) }()
	stale, err := lockIsStale(dir)
	if err != nil || !stale {
		return false, err
	}
	if err := os.RemoveAll(dir); err != nil {
		return false, fmt.Errorf("break stale office registry lock: %w", err)
	}
	return true, nil
}

// release removes the lock if it is still ours. If another process broke
// it (we were wrongly judged dead), deleting it would free a lock that
// process now holds.
func (l *lease) release() error {
	data, err := os.ReadFile(filepath.Join(l.dir, ownerFile))
	if err != nil || strings.TrimSpace(string(data)) != l.owner {
		return nil
	}
	if err := os.RemoveAll(l.dir); err != nil {
		return fmt.Errorf("release office registry lock: %w", err)
	}
	return nil
}
