package box_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/hutchsandbox/hutch/internal/project/box"
)

// TestSessions counts sessions by the flocks their holders keep; a file
// nobody holds (its process died) is not counted and is removed.
func TestSessions(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "sessions")
	s := box.NewSessions(dir)
	count := func(want int) {
		t.Helper()
		if n, err := s.Count(); err != nil || n != want {
			t.Fatalf("Count() = %d, %v; want %d", n, err, want)
		}
	}
	count(0) // no dir yet
	leave1, err := s.Join()
	if err != nil {
		t.Fatal(err)
	}
	leave2, err := s.Join()
	if err != nil {
		t.Fatal(err)
	}
	count(2)
	// A session file whose process is gone: nobody holds its lock.
	stale := filepath.Join(dir, "999999-stale.session")
	if err := os.WriteFile(stale, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	count(2)
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("the stale session file is still there (%v)", err)
	}
	leave1()
	count(1)
	leave2()
	count(0)
	if des, err := os.ReadDir(dir); err != nil || len(des) != 0 {
		t.Errorf("session dir after every session left: %v, %v; want empty", des, err)
	}
}

// TestTrust records approval per project and per content.
func TestTrust(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "config", "trusted-devcontainers.json")
	tr := box.NewTrust(path)
	v1, v2 := []byte(`{"containerEnv": {"A": "1"}}`), []byte(`{"containerEnv": {"A": "2"}}`)
	trusted := func(project string, data []byte, want bool) {
		t.Helper()
		if ok, err := tr.Trusted(project, data); err != nil || ok != want {
			t.Errorf("Trusted(%s, %s) = %v, %v; want %v", project, data, ok, err, want)
		}
	}
	trusted("/p/a", v1, false)
	if err := tr.Approve("/p/a", v1); err != nil {
		t.Fatal(err)
	}
	trusted("/p/a", v1, true)
	trusted("/p/a", v2, false) // changed since approved
	trusted("/p/b", v1, false) // another project
	// A second store on the same file (another process) sees it.
	if ok, err := box.NewTrust(path).Trusted("/p/a", v1); err != nil || !ok {
		t.Errorf("a second store: Trusted = %v, %v; want true", ok, err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("trust store %s: %v, %v; want mode 0600", path, fi, err)
	}
	if err := os.WriteFile(path, []byte("not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Trusted("/p/a", v1); err == nil {
		t.Error("a malformed trust store was read without an error")
	}
}
