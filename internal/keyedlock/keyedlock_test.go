package keyedlock_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/internal/keyedlock"
)

func TestLock(t *testing.T) {
	var l keyedlock.Lock
	ctx := context.Background()

	// One holder per key at a time.
	var mu sync.Mutex
	inside, most := 0, 0
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			unlock, err := l.Lock(ctx, "a")
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
	unlockA, err := l.Lock(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	unlockB, err := l.Lock(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	unlockB()
	short, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	if _, err := l.Lock(short, "a"); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("waiting on a held key: %v, want the context's deadline", err)
	}
	unlockA()

	// Entries go once nobody holds or waits.
	if n := l.Len(); n != 0 {
		t.Errorf("%d entries left", n)
	}
}
