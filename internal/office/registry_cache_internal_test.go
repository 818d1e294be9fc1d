package office

import (
	"bytes"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/internal/fileid"
)

// readsOf is how many times r has read its file.
func readsOf(r *Registry) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.reads
}

// pair returns two Registries of one state dir, as two processes hold
// them: a reader that takes every version it reads as settled, as one
// written long ago would be, so the tests need not wait out the racy
// window, and a writer.
func pair(t *testing.T) (reader, writer *Registry) {
	state := t.TempDir()
	reader, writer = NewRegistry(state), NewRegistry(state)
	reader.racyWindow = -time.Hour
	return reader, writer
}

// TestRegistry_CachedUntilReplaced: a settled version is read once for
// any number of reads; a version another Registry (another process)
// writes is seen on the next read, and so is a change in place that
// keeps the inode, the size and the modification time.
func TestRegistry_CachedUntilReplaced(t *testing.T) {
	reader, writer := pair(t)
	x := Address{Platform: "web", ConversationID: "x1"}
	if _, err := writer.Record(x); err != nil {
		t.Fatal(err)
	}

	before := readsOf(reader)
	for range 100 {
		if added, err := reader.Record(x); err != nil || added {
			t.Fatalf("Record of a recorded office: added %v, %v", added, err)
		}
		if a, ok, err := reader.Lookup(x.Key()); err != nil || !ok || a != x {
			t.Fatalf("Lookup: %v %v %v", a, ok, err)
		}
	}
	if n := readsOf(reader) - before; n != 1 {
		t.Errorf("200 reads of a settled version read the file %d times; want once", n)
	}

	y := Address{Platform: "web", ConversationID: "y2"}
	if _, err := writer.Record(y); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := reader.Lookup(y.Key()); err != nil || !ok {
		t.Fatalf("an office another registry recorded is not seen: %v %v", ok, err)
	}

	// The same inode, the same size, the same modification time: only
	// the change time differs.
	if recs, err := reader.Offices(); err != nil || len(recs) != 2 {
		t.Fatalf("Offices: %v, %v", recs, err)
	}
	prev, err := fileid.Stat(reader.path)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(reader.path)
	if err != nil {
		t.Fatal(err)
	}
	data = bytes.Replace(data, []byte(`"y2"`), []byte(`"z3"`), 1)
	if err := os.WriteFile(reader.path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if mtime := time.Unix(0, prev.Mtime); os.Chtimes(reader.path, mtime, mtime) != nil {
		t.Fatal(err)
	}
	z := Address{Platform: "web", ConversationID: "z3"}
	if _, ok, _ := reader.Lookup(z.Key()); !ok {
		t.Error("a change in place that kept inode, size and modification time is not seen")
	}
	if _, ok, _ := reader.Lookup(y.Key()); ok {
		t.Error("an office changed away in place is still found")
	}
}

// TestRegistry_RecentVersionReadAgain: a version written moments ago is
// read again on every read, since a later one in the same clock tick
// could look the same.
func TestRegistry_RecentVersionReadAgain(t *testing.T) {
	r := NewRegistry(t.TempDir())
	if _, err := r.Record(Address{Platform: "web", ConversationID: "x1"}); err != nil {
		t.Fatal(err)
	}
	before := readsOf(r)
	for range 3 {
		if _, err := r.Offices(); err != nil {
			t.Fatal(err)
		}
	}
	if n := readsOf(r) - before; n != 3 {
		t.Errorf("3 reads of a version just written read the file %d times; want 3", n)
	}
}

// TestRegistry_LoadIsACopy: what Load returns is the caller's to change;
// the cached version stays as read.
func TestRegistry_LoadIsACopy(t *testing.T) {
	r, _ := pair(t)
	if _, err := r.Record(Address{Platform: "web", ConversationID: "x1"}); err != nil {
		t.Fatal(err)
	}
	f, err := r.Load()
	if err != nil {
		t.Fatal(err)
	}
	f.Offices[0].ConversationID = "changed"
	f.Offices = append(f.Offices, OfficeRecord{Platform: "web", ConversationID: "added"})
	g, err := r.Load()
	if err != nil {
		t.Fatal(err)
	}
	if len(g.Offices) != 1 || g.Offices[0].ConversationID != "x1" {
		t.Errorf("a change to a loaded File reached the cache: %+v", g.Offices)
	}
}

// TestRegistry_ReadersBesideWriters: readers of one Registry and writers
// through others, at once (for the race detector), and every reader sees
// each office once its Record returned.
func TestRegistry_ReadersBesideWriters(t *testing.T) {
	state := t.TempDir()
	shared := NewRegistry(state)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			writer := NewRegistry(state)
			for i := range 25 {
				a := Address{Platform: "web", ConversationID: fmt.Sprintf("w%d-%d", w, i)}
				if _, err := writer.Record(a); err != nil {
					t.Error(err)
					return
				}
				if _, ok, err := shared.Lookup(a.Key()); err != nil || !ok {
					t.Errorf("%s: recorded, then not found: %v", a.ConversationID, err)
				}
				if added, err := shared.Record(a); err != nil || added {
					t.Errorf("%s: recorded twice (%v, %v)", a.ConversationID, added, err)
				}
			}
		})
	}
	wg.Wait()
	if recs, err := shared.Offices(); err != nil || len(recs) != 100 {
		t.Errorf("Offices: %d records, %v; want 100", len(recs), err)
	}
}

// TestView_KeyedOffices: a view gets the offices sorted, each with its
// key, and a later version's offices with theirs.
func TestView_KeyedOffices(t *testing.T) {
	reader, writer := pair(t)
	keyed := NewView(func(recs []KeyedRecord) ([]KeyedRecord, error) { return slices.Clone(recs), nil })
	addrs := []Address{{Platform: "web", ConversationID: "b"}, {Platform: "discord", ConversationID: "z"}, {Platform: "web", ConversationID: "a"}}
	check := func(n int) {
		t.Helper()
		got, err := keyed.Of(reader)
		if err != nil {
			t.Fatal(err)
		}
		want, err := reader.Offices()
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != n || len(want) != n {
			t.Fatalf("%d keyed offices, %d offices; want %d", len(got), len(want), n)
		}
		for i, rec := range got {
			if rec.OfficeRecord != want[i] || rec.Key != want[i].Address().Key() {
				t.Errorf("keyed office %d: %+v; want %+v with key %s", i, rec, want[i], want[i].Address().Key())
			}
		}
	}
	for _, a := range addrs[:2] {
		if _, err := writer.Record(a); err != nil {
			t.Fatal(err)
		}
	}
	check(2)
	if _, err := writer.Record(addrs[2]); err != nil {
		t.Fatal(err)
	}
	check(3)
}

// TestView_BuiltOncePerVersion: a view is built once for any number of
// calls on a settled version, again once another process records an
// office, and a build's error is returned but not kept.
func TestView_BuiltOncePerVersion(t *testing.T) {
	reader, writer := pair(t)
	x := Address{Platform: "web", ConversationID: "x1"}
	if _, err := writer.Record(x); err != nil {
		t.Fatal(err)
	}

	builds := 0
	fail := false
	v := NewView(func(recs []KeyedRecord) (string, error) {
		builds++
		if fail {
			return "", fmt.Errorf("build failed")
		}
		s := ""
		for _, r := range recs {
			s += r.ConversationID + "=" + string(r.Key)[:8] + ";"
		}
		return s, nil
	})
	for range 50 {
		got, err := v.Of(reader)
		if err != nil || got != "x1=v1-web-x;" {
			t.Fatalf("Of = %q, %v", got, err)
		}
	}
	if builds != 1 {
		t.Errorf("50 calls on one settled version built the view %d times; want once", builds)
	}

	fail = true
	y := Address{Platform: "web", ConversationID: "y2"}
	if _, err := writer.Record(y); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Of(reader); err == nil {
		t.Fatal("a failing build's error is not returned")
	}
	fail = false
	got, err := v.Of(reader)
	if err != nil || got != "x1=v1-web-x;y2=v1-web-y;" {
		t.Errorf("after a failed build, Of = %q, %v; want the new version's view", got, err)
	}
	if builds != 3 {
		t.Errorf("the view was built %d times; want 3 (first version, the failure, the retry)", builds)
	}
}
