package egress_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/internal/egress"
)

func journalEvent(seq int) egress.Event {
	return egress.Event{
		Time: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Office: office, Secret: "GH_TOKEN",
		Host: "api.github.com", Port: seq, Kind: egress.KindRefused, Reason: egress.ReasonNotListed,
	}
}

func TestJournal_RotationAndRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "egress.journal")
	if got, err := egress.ReadJournal(path, 10); err != nil || len(got) != 0 {
		t.Fatalf("ReadJournal of no journal: %v, %v; want nothing and no error", got, err)
	}
	j := egress.OpenJournal(path)
	n := 0
	for ; ; n++ {
		if _, err := os.Stat(path + ".1"); err == nil {
			break
		}
		if n > 10000 {
			t.Fatal("the journal never rotated")
		}
		j.Record(journalEvent(n))
	}
	for range 5 {
		j.Record(journalEvent(n))
		n++
	}

	for file, maxSize := range map[string]int64{path + ".1": 256 << 10, path: 4 << 10} {
		fi, err := os.Stat(file)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size() > maxSize || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %d bytes, mode %v; want at most %d, 0600", file, fi.Size(), fi.Mode().Perm(), maxSize)
		}
	}
	data, _ := os.ReadFile(path)
	first, _, _ := bytes.Cut(data, []byte("\n"))
	var fields map[string]any
	if err := json.Unmarshal(first, &fields); err != nil {
		t.Fatalf("journal line %q: %v", first, err)
	}
	for _, k := range []string{"time", "office", "secret", "host", "port", "kind", "reason"} {
		if _, ok := fields[k]; !ok {
			t.Errorf("journal line %s lacks %q", first, k)
		}
	}

	all, err := egress.ReadJournal(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != n {
		t.Fatalf("ReadJournal(0) gave %d events across both files, want all %d", len(all), n)
	}
	for i, e := range all {
		if want := n - 1 - i; e.Port != want {
			t.Fatalf("event %d is number %d, want %d (newest first)", i, e.Port, want)
		}
	}
	if all[0] != journalEvent(n-1) {
		t.Errorf("read back %+v, want %+v", all[0], journalEvent(n-1))
	}
	last, err := egress.ReadJournal(path, 8)
	if err != nil || len(last) != 8 || last[0].Port != n-1 || last[7].Port != n-8 {
		t.Errorf("ReadJournal(8): %d events from %v, %v; want %d down to %d", len(last), last, err, n-1, n-8)
	}
}

// TestJournal_Concurrent records from several goroutines, each with its
// own file descriptors as another process would have, across rotations:
// every line stays whole, and each writer's events stay in its order.
func TestJournal_Concurrent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "egress.journal")
	const writers, each = 4, 1000
	var wg sync.WaitGroup
	for w := range writers {
		j := egress.OpenJournal(path) // one Journal per "process"
		wg.Go(func() {
			for i := range each {
				j.Record(journalEvent(w*each + i))
			}
		})
	}
	wg.Wait()

	lines := 0
	for _, file := range []string{path + ".1", path} {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for l := range strings.Lines(string(data)) {
			var e egress.Event
			if err := json.Unmarshal([]byte(l), &e); err != nil {
				t.Fatalf("%s has a broken line %q: %v", file, l, err)
			}
			lines++
		}
	}
	events, err := egress.ReadJournal(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != lines || lines == 0 {
		t.Fatalf("ReadJournal gave %d events of %d lines", len(events), lines)
	}
	seen := map[int]bool{}
	newest := map[int]int{} // writer → the latest sequence read so far (reading newest first)
	for _, e := range events {
		if seen[e.Port] {
			t.Fatalf("event %d appears twice", e.Port)
		}
		seen[e.Port] = true
		w := e.Port / each
		if prev, ok := newest[w]; ok && e.Port >= prev {
			t.Fatalf("writer %d: event %d read after %d, want newest first", w, e.Port, prev)
		}
		newest[w] = e.Port
	}
	for w := range writers {
		if !seen[w*each+each-1] {
			t.Errorf("writer %d's last event is missing", w)
		}
	}
}
