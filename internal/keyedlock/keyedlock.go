// Package keyedlock is a mutex per key whose waiters can give up with
// their context: the MCP servers serialise the file-changing tools of one
// conversation, or one team member, with it.
package keyedlock

import (
	"context"
	"sync"
)

// Lock holds one mutex per key. A key's entry lives while someone holds
// or waits for it. The zero Lock is ready to use.
type Lock struct {
	mu   sync.Mutex // guards held
	held map[string]*turn
}

type turn struct {
	ch    chan struct{} // one token: whoever takes it holds the key
	users int           // holders and waiters
}

// Lock waits until key is free or ctx is done, and returns the unlock.
func (l *Lock) Lock(ctx context.Context, key string) (func(), error) {
	l.mu.Lock()
	if l.held == nil {
		l.held = map[string]*turn{}
	}
	t := l.held[key]
	if t == nil {
		t = &turn{ch: make(chan struct{}, 1)}
		l.held[key] = t
	}
	t.users++
	l.mu.Unlock()

	select {
	case t.ch <- struct{}{}:
		return func() {
			<-t.ch
			l.release(key, t)
		}, nil
	case <-ctx.Done():
		l.release(key, t)
		return nil, ctx.Err()
	}
}

func (l *Lock) release(key string, t *turn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if t.users--; t.users == 0 {
		delete(l.held, key)
	}
}

// Len is how many keys are held or waited for.
func (l *Lock) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.held)
}
