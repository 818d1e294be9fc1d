package office

import (
	"os"
	"path/filepath"
	"regexp"
	"syscall"
	"testing"
	"time"
)

func TestLease_Release_OnlyOwnToken(t *testing.T) {
	dir := filepath.Join(t.TempDir(), ".office-registry.lock")
	l, err := acquireLock(dir, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// Another process broke the lock and retook it.
	other := "1:0123456789abcdef"
	if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(other), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := l.release(); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(dir, ownerFile))
	if err != nil || string(got) != other {
		t.Errorf("release removed a lock it no longer owned: owner %q, %v", got, err)
	}
}

func TestAcquireLock_ModesUnderUmask(t *testing.T) {
	dir := filepath.Join(t.TempDir(), ".office-registry.lock")
	old := syscall.Umask(0o777)
	defer syscall.Umask(old)
	l, err := acquireLock(dir, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.release() }()
	for path, want := range map[string]os.FileMode{dir: 0o700, filepath.Join(dir, ownerFile): 0o600} {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != want {
			t.Errorf("%s mode got %o, want %o", path, fi.Mode().Perm(), want)
		}
	}
	data, err := os.ReadFile(filepath.Join(dir, ownerFile))
	if err != nil {
		t.Fatal(err)
	}
	if !ownerPattern.Match(data) {
		t.Errorf("owner file %q does not read <pid>:<16 hex>", data)
	}
}

var ownerPattern = regexp.MustCompile(`^[1-9][0-9]*:[0-9a-f]{16}$`)
