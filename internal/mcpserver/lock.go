package mcpserver

import (
	"context"
	"sync"
)

// conversations serialises the file-changing tools of each conversation
// across every server of this process (the HTTP handler makes one per
// session, and two sessions may share a conversation).
var conversations = &keyedLock{held: map[string]*turn{}}

// keyedLock is a mutex per key whose waiters can give up with their
// context. A key's entry lives while someone holds or waits for it.
type keyedLock struct {
	mu   sync.Mutex // guards held
	held map[string]*turn
}

type turn struct {
	ch    chan struct{} // one token: whoever takes it holds the key
	users int           // holders and waiters
}

// lock waits until key is free or ctx is done, and returns the unlock.
func (l *keyedLock) lock(ctx context.Context, key string) (func(), error) {
	l.mu.Lock()
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

func (l *keyedLock) release(key string, t *turn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if t.users--; t.users == 0 {
		delete(l.held, key)
	}
}
