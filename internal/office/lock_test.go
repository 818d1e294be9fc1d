package office_test

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/office"
)

// deadPID returns the pid of a process that has exited and been reaped.
func deadPID(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatalf("run true: %v", err)
	}
	return cmd.Process.Pid
}

// plantLock makes the lock directory as another process would have left
// it: with the given owner text (none when owner is empty) and mtime.
func plantLock(t *testing.T, state, owner string, age time.Duration) string {
	t.Helper()
	dir := filepath.Join(state, ".office-registry.lock")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if owner != "" {
		if err := os.WriteFile(filepath.Join(dir, "owner"), []byte(owner), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if age > 0 {
		old := time.Now().Add(-age)
		if err := os.Chtimes(dir, old, old); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestRegistry_Lock_StaleHolder(t *testing.T) {
	tests := []struct {
		name  string
		owner func(t *testing.T) string
		age   time.Duration
		taken bool // whether Record takes the lock over
	}{
		{"dead_owner", func(t *testing.T) string { return fmt.Sprintf("%d:0123456789abcdef", deadPID(t)) }, 0, true},
		{"dead_owner_with_newline", func(t *testing.T) string { return fmt.Sprintf("%d:0123456789abcdef\n", deadPID(t)) }, 0, true},
		{"live_owner_other_token", func(*testing.T) string { return fmt.Sprintf("%d:fedcba9876543210", os.Getpid()) }, 0, false},
		// A live owner wins even when the lock is old: holders may be slow.
		{"live_owner_old_lock", func(*testing.T) string { return fmt.Sprintf("%d:fedcba9876543210", os.Getpid()) }, 2 * time.Minute, false},
		{"ownerless_old", func(*testing.T) string { return "" }, 2 * time.Minute, true},
		{"ownerless_fresh", func(*testing.T) string { return "" }, 0, false},
		{"garbage_owner_old", func(*testing.T) string { return "not a pid" }, 61 * time.Second, true},
		{"garbage_owner_fresh", func(*testing.T) string { return "not a pid" }, 0, false},
		// Pid 0 would address the process group; it is no owner at all.
		{"pid_zero_fresh", func(*testing.T) string { return "0:0123456789abcdef" }, 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			reg, state := newTestRegistry(t)
			owner := tc.owner(t)
			dir := plantLock(t, state, owner, tc.age)
			if tc.taken {
				reg.LockTimeout = 2 * time.Second
			} else {
				reg.LockTimeout = 150 * time.Millisecond
			}
			start := time.Now()
			added, err := reg.Record(mustAddress(t, "slack/C1"))
			if !tc.taken {
				checkErr(t, err, "Timed out acquiring office registry lock: "+dir, errdefs.ErrUnavailable)
				if owner != "" {
					got, err := os.ReadFile(filepath.Join(dir, "owner"))
					if err != nil || string(got) != owner {
						t.Errorf("held lock disturbed: owner %q, %v; want %q", got, err, owner)
					}
				} else if _, err := os.Stat(dir); err != nil {
					t.Errorf("held lock removed: %v", err)
				}
				return
			}
			checkErr(t, err, "", nil)
			if !added {
				t.Error("Record added = false")
			}
			// Breaking a stale lock needs no waiting; a generous bound
			// still tells it apart from running into the timeout.
			if d := time.Since(start); d > time.Second {
				t.Errorf("taking over a stale lock took %v", d)
			}
			for _, p := range []string{dir, dir + ".break"} {
				if _, err := os.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("%s left behind: %v", p, err)
				}
			}
		})
	}
}

func TestRegistry_Lock_AbandonedBreakGuard(t *testing.T) {
	t.Run("old_guard_removed", func(t *testing.T) {
		reg, state := newTestRegistry(t)
		reg.LockTimeout = 2 * time.Second
		dir := plantLock(t, state, fmt.Sprintf("%d:0123456789abcdef", deadPID(t)), 0)
		guard := dir + ".break"
		if err := os.Mkdir(guard, 0o700); err != nil {
			t.Fatal(err)
		}
		old := time.Now().Add(-2 * time.Minute)
		if err := os.Chtimes(guard, old, old); err != nil {
			t.Fatal(err)
		}
		_, err := reg.Record(mustAddress(t, "slack/C1"))
		checkErr(t, err, "", nil)
	})
	t.Run("fresh_guard_waited_for", func(t *testing.T) {
		reg, state := newTestRegistry(t)
		reg.LockTimeout = 150 * time.Millisecond
		dir := plantLock(t, state, fmt.Sprintf("%d:0123456789abcdef", deadPID(t)), 0)
		if err := os.Mkdir(dir+".break", 0o700); err != nil {
			t.Fatal(err)
		}
		_, err := reg.Record(mustAddress(t, "slack/C1"))
		checkErr(t, err, "Timed out acquiring office registry lock: "+dir, errdefs.ErrUnavailable)
	})
}

func TestRegistry_Lock_NotADirectory(t *testing.T) {
	reg, state := newTestRegistry(t)
	dir := filepath.Join(state, ".office-registry.lock")
	if err := os.WriteFile(dir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := reg.Record(mustAddress(t, "slack/C1"))
	checkErr(t, err, "Office registry lock must be a directory: "+dir, errdefs.ErrFailedPrecondition)
}

func TestRegistry_Lock_MissingStateDir(t *testing.T) {
	reg := office.NewRegistry(filepath.Join(t.TempDir(), "missing"))
	_, err := reg.Record(mustAddress(t, "slack/C1"))
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Record in a missing state dir got %v, want a not-exist error", err)
	}
}

// TestRegistry_Record_Concurrent records from many goroutines, each with
// its own Registry as separate processes would have; the lock must not
// lose a single record.
func TestRegistry_Record_Concurrent(t *testing.T) {
	state := t.TempDir()
	const n = 16
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			reg := office.NewRegistry(state)
			// Generous: the point is lost updates, not speed.
			reg.LockTimeout = 60 * time.Second
			a, err := office.NewAddress("web", fmt.Sprintf("conversation-%02d", i))
			if err != nil {
				errs[i] = err
				return
			}
			added, err := reg.Record(a)
			if err == nil && !added {
				err = fmt.Errorf("Record(%s) added = false", a)
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("goroutine %d: %v", i, err)
		}
	}
	recs, err := office.NewRegistry(state).Offices()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != n {
		t.Errorf("registry holds %d offices, want %d", len(recs), n)
	}
	if _, err := os.Lstat(filepath.Join(state, ".office-registry.lock")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("lock directory left behind: %v", err)
	}
}

// TestRegistry_Lock_OwnerlessTakenOverSoon: a writer killed between its
// mkdir and its owner file leaves a lock no one owns. The next writer
// waits a short grace (the owner file follows the mkdir at once), not a
// minute, and takes it over well within its lock timeout.
func TestRegistry_Lock_OwnerlessTakenOverSoon(t *testing.T) {
	for _, tc := range []struct {
		name, owner string
		age         time.Duration
	}{
		{"just_left", "", 0},
		{"seconds_old", "", 5 * time.Second},
		{"empty_owner_file_seconds_old", "\n", 5 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg, state := newTestRegistry(t)
			reg.LockTimeout = office.DefaultLockTimeout
			dir := plantLock(t, state, tc.owner, tc.age)
			start := time.Now()
			added, err := reg.Record(mustAddress(t, "slack/C1"))
			checkErr(t, err, "", nil)
			if !added {
				t.Error("Record added = false")
			}
			if d := time.Since(start); d > 4*time.Second {
				t.Errorf("taking over an ownerless lock took %v", d)
			}
			if _, err := os.Lstat(dir); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("lock left behind: %v", err)
			}
		})
	}
}

// TestRegistry_RemovesAbandonedTempFiles: a writer killed between making
// its temp file and renaming it over the registry leaves the temp file
// behind. The next write, under the lock (so no write of hutch is in
// flight), removes hutch's own leftovers and nothing else: no other
// name, no directory, no symlink (and never what one points to).
func TestRegistry_RemovesAbandonedTempFiles(t *testing.T) {
	reg, state := newTestRegistry(t)
	abandoned := []string{".office-registry.json.tmp-123456", ".office-registry.json.tmp-7"}
	for _, name := range abandoned {
		if err := os.WriteFile(filepath.Join(state, name), []byte(`{"version": 1, "offi`), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	outside := filepath.Join(t.TempDir(), "outside")
	if err := os.WriteFile(outside, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	kept := map[string]func(string) error{
		".office-registry.json.tmp-999": func(p string) error { return os.Symlink(outside, p) },
		".office-registry.json.tmp-777": func(p string) error { return os.Mkdir(p, 0o700) },
		".office-registry.json.tmp-abc": func(p string) error { return os.WriteFile(p, nil, 0o600) },
		".office-registry.json.tmp-":    func(p string) error { return os.WriteFile(p, nil, 0o600) },
		"office-registry.json.tmp-1":    func(p string) error { return os.WriteFile(p, nil, 0o600) },
		".settings.json.tmp-1":          func(p string) error { return os.WriteFile(p, nil, 0o600) },
	}
	for name, plant := range kept {
		if err := plant(filepath.Join(state, name)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := reg.Record(mustAddress(t, "slack/C1")); err != nil {
		t.Fatal(err)
	}
	for _, name := range abandoned {
		if _, err := os.Lstat(filepath.Join(state, name)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("abandoned temp file %s left behind: %v", name, err)
		}
	}
	for name := range kept {
		if _, err := os.Lstat(filepath.Join(state, name)); err != nil {
			t.Errorf("%s removed, want it kept: %v", name, err)
		}
	}
	if got, err := os.ReadFile(outside); err != nil || string(got) != "keep" {
		t.Errorf("symlink target got %q, %v; want it untouched", got, err)
	}
	if recs, err := reg.Offices(); err != nil || len(recs) != 1 {
		t.Errorf("registry after the sweep: %v, %v", recs, err)
	}
}
