package bridge

import (
	"context"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/internal/errdefs"
)

func id(t *testing.T, s string) execID {
	t.Helper()
	x, err := parseExecID(s)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// TestExecs_Remember: an id is a conflict for at least RememberFor, then
// forgotten; the memory is bounded and says so when full.
func TestExecs_Remember(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	e := newExecs()
	e.now = func() time.Time { return now }
	e.max = 2
	a, b, c := id(t, "0000000000000000000000000000000a"), id(t, "0000000000000000000000000000000B"), id(t, "0000000000000000000000000000000c")
	noop := func() {}
	run := func(x execID) error {
		r, err := e.begin(x, "s", noop)
		if err == nil {
			e.end(x, r, false)
		}
		return err
	}
	if err := run(a); err != nil {
		t.Fatal(err)
	}
	now = now.Add(RememberFor / 2)
	if err := run(b); err != nil {
		t.Fatal(err)
	}
	if err := run(a); !errdefs.IsConflict(err) {
		t.Errorf("a again within the hour: %v; want a conflict", err)
	}
	if err := run(c); !errdefs.IsUnavailable(err) {
		t.Errorf("a third id with room for two: %v; want unavailable", err)
	}
	now = now.Add(RememberFor/2 - time.Nanosecond)
	if err := run(a); !errdefs.IsConflict(err) {
		t.Errorf("a again just before the hour: %v; want a conflict", err)
	}
	now = now.Add(time.Nanosecond)
	if err := run(c); err != nil {
		t.Errorf("c once a is an hour old: %v", err)
	}
	if err := run(b); !errdefs.IsConflict(err) {
		t.Errorf("b again within its hour: %v; want a conflict", err)
	}
	if len(e.seen) != 2 || len(e.order) != 2 || len(e.running) != 0 {
		t.Errorf("remembered %d, queued %d, running %d; want 2, 2, 0", len(e.seen), len(e.order), len(e.running))
	}
}

// TestExecs_RunningPastTheHour: a command still running is never run
// again, however old its id.
func TestExecs_RunningPastTheHour(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	e := newExecs()
	e.now = func() time.Time { return now }
	a := id(t, "0123456789abcdef0123456789abcdef")
	ctx, cancel := context.WithCancel(context.Background())
	r, err := e.begin(a, "s", cancel)
	if err != nil {
		t.Fatal(err)
	}
	now = now.Add(2 * RememberFor)
	if _, err := e.begin(a, "s", func() {}); !errdefs.IsConflict(err) {
		t.Errorf("begin while the first runs: %v; want a conflict", err)
	}
	done := make(chan bool)
	go func() {
		ok, _ := e.cancel(context.Background(), a, "s")
		done <- ok
	}()
	<-ctx.Done() // the cancel reached the command
	e.end(a, r, true)
	if !<-done {
		t.Error("cancel of a running command reported false")
	}
}
