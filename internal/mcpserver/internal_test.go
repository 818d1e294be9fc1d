package mcpserver

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/internal/sandbox"
)

func TestDescribe(t *testing.T) {
	limits := sandbox.Limits{CPUs: 2, MemoryBytes: 4 << 30, Pids: 1024}
	tests := []struct {
		name string
		st   sandbox.Status
		want string
	}{
		{"missing", sandbox.Status{State: sandbox.StateMissing},
			"State: not created yet (the next command creates it, with the default limits)"},
		{"stopped", sandbox.Status{State: sandbox.StateStopped, Limits: sandbox.Limits{CPUs: 0.5, MemoryBytes: 1 << 30, Pids: 1024}},
			"State: stopped (the next command starts it, with the default limits)\nLimits: 0.5 CPUs, 1GiB memory, 1024 processes\nBoosted: no\nTemporary limits: no"},
		{"boosted", sandbox.Status{State: sandbox.StateRunning, Limits: limits, Boosted: true},
			"State: running\nLimits: 2 CPUs, 4GiB memory, 1024 processes\nBoosted: yes\nTemporary limits: no\nBoosts and temporary limits last until the sandbox stops."},
		{"boosted_and_set", sandbox.Status{State: sandbox.StateRunning, Limits: limits, Boosted: true, TempLimits: true},
			"State: running\nLimits: 2 CPUs, 4GiB memory, 1024 processes\nBoosted: yes\nTemporary limits: yes\nBoosts and temporary limits last until the sandbox stops."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := describe(tt.st); got != tt.want {
				t.Errorf("describe got\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}

func TestKeyedLock(t *testing.T) {
	l := &keyedLock{held: map[string]*turn{}}
	ctx := context.Background()

	// One holder per key at a time.
	var mu sync.Mutex
	inside, most := 0, 0
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			unlock, err := l.lock(ctx, "a")
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			inside++
			most = max(most, inside)
			mu.Unlock()
			time.Sleep(time.Millisecond)
			mu.Lock()
			inside--
			mu.Unlock()
			unlock()
		})
	}
	wg.Wait()
	if most != 1 {
		t.Errorf("%d holders of one key at once", most)
	}

	// Other keys do not wait; a waiter gives up with its context.
	unlockA, err := l.lock(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	unlockB, err := l.lock(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	unlockB()
	short, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	if _, err := l.lock(short, "a"); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("waiting on a held key: %v, want the context's deadline", err)
	}
	unlockA()

	// Entries go once nobody holds or waits.
	l.mu.Lock()
	n := len(l.held)
	l.mu.Unlock()
	if n != 0 {
		t.Errorf("%d entries left", n)
	}
}
