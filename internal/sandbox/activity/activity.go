// Package activity keeps, for each office of a managed mode, what this
// process knows of its runtime's use: the commands running in it and
// when it was last used. Idle stop reads it, a re-create waits on it for
// the running commands to end, status reports it.
//
// An Office's lock also serialises what a mode does to that office's
// runtime (provisioning, stop, re-create), so a mode keeps its own
// per-office state in a struct that embeds *Office, under the same lock.
// A Table hands out one such struct per office key, for the life of the
// process.
package activity

import (
	"context"
	"path"
	"sync"
	"time"

	"github.com/hutchsandbox/hutch/internal/agent"
	"github.com/hutchsandbox/hutch/internal/sandbox"
)

// Office is the activity of one office's runtime. Its methods other than
// Lock and Unlock must be called with the lock held.
type Office struct {
	// Key is the office key.
	Key string

	mu     sync.Mutex
	cond   *sync.Cond // broadcast when active drops or a waiter's ctx ends
	active int
	last   time.Time
}

func newOffice(key string) *Office {
	o := &Office{Key: key}
	o.cond = sync.NewCond(&o.mu)
	return o
}

// Lock takes the office's lock.
func (o *Office) Lock() { o.mu.Lock() }

// Unlock releases it.
func (o *Office) Unlock() { o.mu.Unlock() }

// TryLock takes the office's lock if no one holds it, for callers that
// must not wait out a provisioning.
func (o *Office) TryLock() bool { return o.mu.TryLock() }

// Begin counts a command that starts.
func (o *Office) Begin() {
	o.active++
	o.last = time.Now()
}

// End counts a command that ended, and wakes WaitIdle.
func (o *Office) End() {
	o.active--
	o.last = time.Now()
	o.cond.Broadcast()
}

// Touch records a use that is not a command (a file operation).
func (o *Office) Touch() { o.last = time.Now() }

// Adopt starts the idle clock of a runtime this process found running
// but has not used yet.
func (o *Office) Adopt(now time.Time) {
	if o.last.IsZero() {
		o.last = now
	}
}

// Active is the number of commands running.
func (o *Office) Active() int { return o.active }

// LastActivity is when the last command started or ended, or the last
// use; zero when this process has not used the runtime.
func (o *Office) LastActivity() time.Time { return o.last }

// IdleFor reports whether the runtime has been used by this process, runs
// no command, and has not been used within d: an idle stop may take it.
func (o *Office) IdleFor(d time.Duration) bool {
	return o.active == 0 && !o.last.IsZero() && time.Since(o.last) >= d
}

// WaitIdle waits until no command runs, or ctx ends (its error is
// returned). The lock is released while waiting and held again after.
func (o *Office) WaitIdle(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() {
		o.mu.Lock()
		o.cond.Broadcast()
		o.mu.Unlock()
	})
	defer stop()
	for o.active > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		o.cond.Wait()
	}
	return ctx.Err()
}

// Table holds one S per office key, made on first use by its New.
type Table[S any] struct {
	// New makes the state of an office around its activity.
	New func(*Office) *S

	mu sync.Mutex
	m  map[string]*S
}

// Get returns the office's state, making it on first use.
func (t *Table[S]) Get(key string) *S {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s, ok := t.m[key]; ok {
		return s
	}
	if t.m == nil {
		t.m = map[string]*S{}
	}
	s := t.New(newOffice(key))
	t.m[key] = s
	return s
}

// Lookup returns the office's state if this process has made it.
func (t *Table[S]) Lookup(key string) (*S, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s, ok := t.m[key]
	return s, ok
}

// All returns every office's state, in no order.
func (t *Table[S]) All() []*S {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]*S, 0, len(t.m))
	for _, s := range t.m {
		out = append(out, s)
	}
	return out
}

// Exec runs one command through the agent that ensure provides: ensure
// runs with the office's lock held (it provisions the runtime), then the
// command runs counted as active, without the lock. An empty or relative
// req.Dir resolves against office, the office as the runtime sees it.
func Exec(ctx context.Context, o *Office, ensure func() (*agent.Client, error), office string, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	o.Lock()
	cl, err := ensure()
	if err != nil {
		o.Unlock()
		return sandbox.ExecResult{}, err
	}
	o.Begin()
	o.Unlock()
	defer func() {
		o.Lock()
		o.End()
		o.Unlock()
	}()
	switch {
	case req.Dir == "":
		req.Dir = office
	case !path.IsAbs(req.Dir):
		req.Dir = path.Join(office, req.Dir)
	}
	return cl.Exec(ctx, req)
}

// Client returns the agent client that ensure provides (run with the
// office's lock held), for file operations, and counts the use.
func Client(o *Office, ensure func() (*agent.Client, error)) (*agent.Client, error) {
	o.Lock()
	defer o.Unlock()
	cl, err := ensure()
	if err == nil {
		o.Touch()
	}
	return cl, err
}
