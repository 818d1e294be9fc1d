package events_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/internal/events"
)

func TestLog_AppendLast(t *testing.T) {
	dir := t.TempDir()
	l := events.Open(dir)
	if evs, err := l.Last(10); err != nil || len(evs) != 0 {
		t.Fatalf("Last on no file: %v, %v", evs, err)
	}
	for i := range 5 {
		if err := l.Append(events.Event{Surface: events.SurfaceAPI, Action: events.DoorSet, Target: fmt.Sprint("web/", i)}); err != nil {
			t.Fatal(err)
		}
	}
	evs, err := l.Last(3)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range evs {
		got = append(got, e.Target)
	}
	if fmt.Sprint(got) != "[web/2 web/3 web/4]" {
		t.Errorf("Last(3) = %v", got)
	}
	st, err := os.Stat(l.Path())
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("log file mode %v, %v; want 0600", st.Mode(), err)
	}
}

// A line torn by a crash (no newline, or not JSON) is skipped, and what
// comes after it is read.
func TestLog_TornLineSkipped(t *testing.T) {
	dir := t.TempDir()
	l := events.Open(dir)
	if err := l.Append(events.Event{Surface: "cli", Action: events.VaultSet, Target: "a"}); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(l.Path(), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = f.WriteString(`{"time":"2026-01-01T00:00:00Z","surf` + "\n")
	_ = f.Close()
	if err := l.Append(events.Event{Surface: "cli", Action: events.VaultSet, Target: "b"}); err != nil {
		t.Fatal(err)
	}
	f, _ = os.OpenFile(l.Path(), os.O_WRONLY|os.O_APPEND, 0)
	_, _ = f.WriteString(`{"time":"2026-01-01T00:00:00Z","action":"refused","tar`) // torn last line
	_ = f.Close()
	evs, err := l.Last(10)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 2 || evs[0].Target != "a" || evs[1].Target != "b" {
		t.Errorf("Last = %+v, want a and b", evs)
	}
}

// What an agent controls (a conversation id, a file name, a refusal's
// text) cannot make an event two lines, nor a line past MaxLine, nor its
// text carry a raw escape, C1 control or direction override.
func TestEvent_LineAttack(t *testing.T) {
	hostile := "x\n{\"action\":\"forged\"}\r\n\u2028\u2029\x00\x1b[31m\u202e\u009b" + strings.Repeat("\x01", 5000) + "\xff\xfe"
	e := events.Event{Time: time.Now(), Surface: hostile, Who: hostile, Action: hostile, Target: hostile, Detail: hostile}
	line := e.Line()
	if len(line) > events.MaxLine {
		t.Errorf("line of %d bytes, bound %d", len(line), events.MaxLine)
	}
	if bytes.Count(line, []byte{'\n'}) != 1 || line[len(line)-1] != '\n' {
		t.Errorf("line is not one line: %q", line)
	}
	if bytes.Contains(line, []byte("\u2028")) || bytes.Contains(line, []byte{'\r'}) || bytes.Contains(line, []byte{0x1b}) {
		t.Errorf("line carries a raw separator or control: %q", line[:200])
	}
	if _, ok := events.Parse(bytes.TrimSuffix(line, []byte{'\n'})); !ok {
		t.Errorf("bounded line does not parse")
	}
	if txt := e.Text(); strings.ContainsAny(txt, "\n\r\x1b\u202e\u009b") {
		t.Errorf("Text carries a line break or escape: %q", txt[:100])
	}
}

// A flood of appends rotates the file: the log never holds more than two
// files of about MaxSize, and the newest events are still read.
func TestLog_RotationBounds(t *testing.T) {
	dir := t.TempDir()
	l := events.Open(dir)
	l.MaxSize = 64 << 10
	detail := strings.Repeat("d", 900)
	start := time.Now()
	const n = 2000
	for i := range n {
		if err := l.Append(events.Event{Surface: "api", Action: events.Refused, Target: fmt.Sprint(i), Detail: detail}); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d appends (write+fsync+stat each) in %v: %v each", n, time.Since(start), time.Since(start)/n)
	entries, _ := os.ReadDir(dir)
	var total int64
	for _, de := range entries {
		fi, _ := de.Info()
		if strings.HasPrefix(de.Name(), "events.jsonl") {
			total += fi.Size()
		}
	}
	if total > 2*(l.MaxSize+events.MaxLine) {
		t.Errorf("log files hold %d bytes, bound %d", total, 2*(l.MaxSize+events.MaxLine))
	}
	if _, err := os.Stat(l.Path() + ".2"); err == nil {
		t.Errorf("a second older file was kept")
	}
	// Two files of 64 KiB hold at least 64 lines of about 1 KiB.
	evs, err := l.Last(60)
	if err != nil || len(evs) != 60 || evs[59].Target != fmt.Sprint(n-1) {
		t.Fatalf("Last(60) after rotation: %d events, %v", len(evs), err)
	}
	for i := 1; i < len(evs); i++ {
		if evs[i].Target <= evs[i-1].Target && len(evs[i].Target) == len(evs[i-1].Target) {
			t.Errorf("events out of order across the rotation: %s then %s", evs[i-1].Target, evs[i].Target)
		}
	}
}

// Writers in parallel (as a daemon and CLI commands are) never interleave
// within a line.
func TestLog_ConcurrentAppend(t *testing.T) {
	dir := t.TempDir()
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := events.Open(dir) // one Log per writer, as per process
			l.MaxSize = 256 << 10
			for i := range 200 {
				_ = l.Append(events.Event{Surface: "cli", Action: events.VaultSet, Target: fmt.Sprint(w, "/", i), Detail: strings.Repeat("v", 3000)})
			}
		}()
	}
	wg.Wait()
	for _, p := range []string{events.Path(dir), events.Path(dir) + ".1"} {
		data, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		for _, line := range bytes.Split(bytes.TrimSuffix(data, []byte{'\n'}), []byte{'\n'}) {
			if _, ok := events.Parse(line); !ok {
				t.Fatalf("%s: a line does not parse (interleaved?): %.80q", p, line)
			}
		}
	}
}

func TestLog_FollowAcrossRotation(t *testing.T) {
	dir := t.TempDir()
	l := events.Open(dir)
	l.MaxSize = 8 << 10
	l.Poll = 10 * time.Millisecond
	_ = l.Append(events.Event{Surface: "api", Action: events.DoorSet, Target: "before"})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan string, 1000)
	done := make(chan error, 1)
	go func() {
		done <- l.Follow(ctx, 1, func(e events.Event) error { got <- e.Target; return nil })
	}()
	if g := <-got; g != "before" {
		t.Fatalf("first followed event %q, want the last one before", g)
	}
	const n = 60 // about 4 rotations of 8 KiB at ~600 bytes a line
	for i := range n {
		if err := l.Append(events.Event{Surface: "api", Action: events.Refused, Target: fmt.Sprint(i), Detail: strings.Repeat("r", 500)}); err != nil {
			t.Fatal(err)
		}
		if i%10 == 0 {
			time.Sleep(30 * time.Millisecond) // let the follower see each file
		}
	}
	timeout := time.After(10 * time.Second)
	for i := range n {
		select {
		case g := <-got:
			if g != fmt.Sprint(i) {
				t.Fatalf("followed event %d is %q", i, g)
			}
		case <-timeout:
			t.Fatalf("followed %d of %d events", i, n)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Follow: %v", err)
	}
}

// A rotation that cannot be done (here a directory where the older file
// goes) is said, not swallowed: the event is still written.
func TestLog_RotationFailureSaid(t *testing.T) {
	dir := t.TempDir()
	l := events.Open(dir)
	l.MaxSize = 100
	if err := os.MkdirAll(filepath.Join(dir, "events.jsonl.1", "x"), 0o700); err != nil {
		t.Fatal(err)
	}
	e := events.Event{Surface: events.SurfaceCLI, Action: events.DoorSet, Target: "web/x", Detail: strings.Repeat("d", 200)}
	err := l.Append(e)
	if err == nil || !strings.Contains(err.Error(), "not rotated") {
		t.Errorf("Append past the bound with no room to rotate: %v", err)
	}
	if evs, err := l.Last(1); err != nil || len(evs) != 1 || evs[0].Target != "web/x" {
		t.Errorf("the event was not written: %+v, %v", evs, err)
	}
}
