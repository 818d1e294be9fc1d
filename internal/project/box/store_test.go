package box_test

import (
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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
	// A file left by a process that died while joining: removed once it
	// is old enough that no Join can still be renaming it, never counted.
	young, old := filepath.Join(dir, "999998-young.joining"), filepath.Join(dir, "999997-old.joining")
	for _, p := range []string{young, old} {
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chtimes(old, time.Time{}, time.Now().Add(-2*time.Minute)); err != nil {
		t.Fatal(err)
	}
	count(2)
	if _, err := os.Stat(old); !os.IsNotExist(err) {
		t.Errorf("the old .joining file is still there (%v)", err)
	}
	if _, err := os.Stat(young); err != nil {
		t.Errorf("a young .joining file was removed (%v)", err)
	}
	_ = os.Remove(young)
	leave1()
	count(1)
	leave2()
	count(0)
	if des, err := os.ReadDir(dir); err != nil || len(des) != 0 {
		t.Errorf("session dir after every session left: %v, %v; want empty", des, err)
	}
}

// TestSessions_JoinWhileCounting: a session that joins while another
// process counts is counted. Before, Count could take the lock of a file
// Join had created but not yet locked, take it for a dead session's and
// remove it; the joined session then held a lock on a file nobody saw,
// and the last session out stopped the container under it.
func TestSessions_JoinWhileCounting(t *testing.T) {
	t.Parallel()
	s := box.NewSessions(filepath.Join(t.TempDir(), "sessions"))
	stop := make(chan struct{})
	counted := make(chan struct{})
	go func() {
		defer close(counted)
		for {
			select {
			case <-stop:
				return
			default:
				_, _ = s.Count()
			}
		}
	}()
	defer func() { close(stop); <-counted }()
	for i := range 20000 {
		leave, err := s.Join()
		if err != nil {
			t.Fatal(err)
		}
		n, err := s.Count()
		leave()
		if err != nil || n != 1 {
			t.Fatalf("join %d: Count() = %d, %v; want 1", i, n, err)
		}
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
		if ok, err := tr.Trusted(project, box.Approval{Config: data}); err != nil || ok != want {
			t.Errorf("Trusted(%s, %s) = %v, %v; want %v", project, data, ok, err, want)
		}
	}
	trusted("/p/a", v1, false)
	if err := tr.Approve("/p/a", box.Approval{Config: v1}, nil); err != nil {
		t.Fatal(err)
	}
	trusted("/p/a", v1, true)
	trusted("/p/a", v2, false) // changed since approved
	trusted("/p/b", v1, false) // another project
	// What the file builds from the project is part of the approval.
	withInputs := box.Approval{Config: v1, Inputs: map[string]string{"the Dockerfile /p/a/Dockerfile": "abc"}}
	if ok, err := tr.Trusted("/p/a", withInputs); err != nil || ok {
		t.Errorf("an approval of the file alone covers a Dockerfile: %v, %v", ok, err)
	}
	if err := tr.Approve("/p/b", withInputs, nil); err != nil {
		t.Fatal(err)
	}
	for _, changed := range []map[string]string{
		{"the Dockerfile /p/a/Dockerfile": "abd"},
		{"the Dockerfile /p/a/Dockerfile": "abc", "the local feature ./x": "missing"},
		{},
	} {
		if ok, err := tr.Trusted("/p/b", box.Approval{Config: v1, Inputs: changed}); err != nil || ok {
			t.Errorf("inputs %v after approving %v: trusted %v, %v", changed, withInputs.Inputs, ok, err)
		}
	}
	if ok, err := tr.Trusted("/p/b", withInputs); err != nil || !ok {
		t.Errorf("the approved inputs: %v, %v", ok, err)
	}
	// A second store on the same file (another process) sees it.
	if ok, err := box.NewTrust(path).Trusted("/p/a", box.Approval{Config: v1}); err != nil || !ok {
		t.Errorf("a second store: Trusted = %v, %v; want true", ok, err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("trust store %s: %v, %v; want mode 0600", path, fi, err)
	}
	if err := os.WriteFile(path, []byte("not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Trusted("/p/a", box.Approval{Config: v1}); err == nil {
		t.Error("a malformed trust store was read without an error")
	}
}

// TestTrust_Sources: an approval pins where the bind sources outside the
// project resolve; a link changed after it (the sandbox may reach the
// link's directory through another mount) is reported by Moved, as is
// a source the approval did not record (a store written before sources
// were). Sources inside the project are not pinned here.
func TestTrust_Sources(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	project := filepath.Join(dir, "proj")
	shared := filepath.Join(dir, "shared")
	for _, d := range []string{project, shared, filepath.Join(dir, "data"), filepath.Join(dir, "secret")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	link := filepath.Join(shared, "link")
	if err := os.Symlink(filepath.Join(dir, "data"), link); err != nil {
		t.Fatal(err)
	}
	sources := []string{link, filepath.Join(project, "cache"), "../shared", filepath.Join(dir, "nothing")}
	got := box.ResolveSources(project, sources)
	want := map[string]string{link: filepath.Join(dir, "data"), "../shared": shared, filepath.Join(dir, "nothing"): "missing: " + filepath.Join(dir, "nothing")}
	if !maps.Equal(got, want) {
		t.Fatalf("ResolveSources = %v; want %v", got, want)
	}
	path := filepath.Join(dir, "trusted.json")
	// A store from before sources were recorded: the digest alone.
	data := []byte(`{"mounts": []}`)
	if err := os.WriteFile(path, []byte(`{"`+project+`": "`+box.Digest(data)+`"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	tr := box.NewTrust(path)
	if ok, err := tr.Trusted(project, box.Approval{Config: data}); err != nil || !ok {
		t.Errorf("an old store's approval: %v, %v", ok, err)
	}
	if moved, err := tr.Moved(project, got); err != nil || !strings.Contains(moved, "was not recorded when it was approved") {
		t.Errorf("Moved against an approval without sources = %q, %v", moved, err)
	}
	if moved, err := tr.Moved(project, map[string]string{}); err != nil || moved != "" {
		t.Errorf("Moved with no outside sources = %q, %v", moved, err)
	}
	if err := tr.Approve(project, box.Approval{Config: data}, got); err != nil {
		t.Fatal(err)
	}
	if moved, err := tr.Moved(project, box.ResolveSources(project, sources)); err != nil || moved != "" {
		t.Errorf("Moved right after approval = %q, %v", moved, err)
	}
	// The sandbox retargets the link through its mount of shared.
	if err := os.Remove(link); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "secret"), link); err != nil {
		t.Fatal(err)
	}
	moved, err := tr.Moved(project, box.ResolveSources(project, sources))
	if wantMoved := "mount source " + link + " now resolves to " + filepath.Join(dir, "secret") + ", not to " + filepath.Join(dir, "data") + " as when it was approved"; err != nil || moved != wantMoved {
		t.Errorf("Moved after the link changed = %q, %v; want %q", moved, err, wantMoved)
	}
	if ok, err := tr.Trusted(project, box.Approval{Config: data}); err != nil || !ok {
		t.Errorf("the content is still the approved one: %v, %v", ok, err)
	}
}
