package fileid

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestID_TellsVersionsApart: a rewrite in place of the same size, and a
// replacement by rename, each give another ID; reading gives the same.
func TestID_TellsVersionsApart(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, []byte("one"), 0o600); err != nil {
		t.Fatal(err)
	}
	first, err := Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.ReadFile(p); err != nil {
		t.Fatal(err)
	}
	if again, _ := Stat(p); again != first {
		t.Errorf("a read changed the ID: %+v, then %+v", first, again)
	}
	old := time.Unix(0, first.Mtime)
	if err := os.WriteFile(p, []byte("two"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(p, old, old); err != nil { // the same size and mtime
		t.Fatal(err)
	}
	inPlace, _ := Stat(p)
	if inPlace == first {
		t.Error("a rewrite in place keeping size and modification time kept the ID")
	}
	q := p + ".new"
	if err := os.WriteFile(q, []byte("six"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(q, p); err != nil {
		t.Fatal(err)
	}
	if replaced, _ := Stat(p); replaced == inPlace || replaced.Ino == inPlace.Ino {
		t.Errorf("a replacement by rename kept the ID or inode: %+v", replaced)
	}
}

// TestID_Settled: settled once the later of the two times is older than
// the window; never for the zero ID.
func TestID_Settled(t *testing.T) {
	now := time.Now()
	id := ID{Ino: 1, Mtime: now.Add(-time.Hour).UnixNano(), Ctime: now.Add(-time.Second).UnixNano()}
	if id.Settled(now, RacyWindow) {
		t.Error("a version whose change time is a second old is settled")
	}
	if !id.Settled(now.Add(RacyWindow), RacyWindow) {
		t.Error("a version changed more than the window ago is not settled")
	}
	if (ID{}).Settled(now, -time.Hour) {
		t.Error("the zero ID is settled")
	}
}
