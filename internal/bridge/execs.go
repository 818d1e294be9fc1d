package bridge

import (
	"context"
	"encoding/hex"
	"fmt"
	"sync"
	"time"

	"github.com/hutchsandbox/hutch/internal/errdefs"
)

// The execId memory: every id is remembered for at least RememberFor, and
// at most maxRemembered ids are held at once (about 20 MiB).
const (
	RememberFor   = time.Hour
	maxRemembered = 1 << 18
)

// execID is a parsed execId: 32 hex digits, any case.
type execID [16]byte

func parseExecID(s string) (execID, error) {
	var id execID
	if len(s) != 2*len(id) {
		return id, errdefs.New(errdefs.ErrInvalid, "execId must be 32 hex digits")
	}
	if _, err := hex.Decode(id[:], []byte(s)); err != nil {
		return id, errdefs.New(errdefs.ErrInvalid, "execId must be 32 hex digits")
	}
	return id, nil
}

// execs remembers the execIds this bridge has run (so a repeat runs
// nothing) and which of them still run (so POST /cancel can kill them).
type execs struct {
	ttl time.Duration
	max int
	now func() time.Time

	mu      sync.Mutex // guards the following
	seen    map[execID]time.Time
	order   []seenID // seen, oldest first
	running map[execID]*run
}

type seenID struct {
	id execID
	at time.Time
}

// run is one command started with an execId.
type run struct {
	sandboxID string
	cancel    context.CancelFunc
	done      chan struct{} // closed when the command has ended
	aborted   bool          // set before done is closed
	once      sync.Once
}

func newExecs() *execs {
	return &execs{
		ttl:     RememberFor,
		max:     maxRemembered,
		now:     time.Now,
		seen:    map[execID]time.Time{},
		running: map[execID]*run{},
	}
}

// begin records id as run, before the command starts: a repeat, even
// while the first still runs, is a conflict. cancel aborts the command.
func (e *execs) begin(id execID, sandboxID string, cancel context.CancelFunc) (*run, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.now()
	e.forgetLocked(now)
	_, running := e.running[id]
	if _, ok := e.seen[id]; ok || running {
		return nil, errdefs.New(errdefs.ErrConflict, fmt.Sprintf("execId %x already ran on this bridge; it was not run again", id[:]))
	}
	if len(e.seen) >= e.max {
		return nil, errdefs.New(errdefs.ErrUnavailable, fmt.Sprintf(
			"The command did not run: this bridge already remembers %d execIds from the last %s, as many as it holds; try again later", e.max, e.ttl))
	}
	e.seen[id] = now
	e.order = append(e.order, seenID{id: id, at: now})
	r := &run{sandboxID: sandboxID, cancel: cancel, done: make(chan struct{})}
	e.running[id] = r
	return r, nil
}

// end marks r, begun as id, as ended; only its first call counts. The id
// stays remembered.
func (e *execs) end(id execID, r *run, aborted bool) {
	r.once.Do(func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		if e.running[id] == r {
			delete(e.running, id)
		}
		r.aborted = aborted
		close(r.done)
	})
}

// cancel kills the command begun as id for sandboxID, if it still runs,
// and waits for it to end (or for ctx). It reports whether the command
// was running and was killed.
func (e *execs) cancel(ctx context.Context, id execID, sandboxID string) (bool, error) {
	e.mu.Lock()
	r, ok := e.running[id]
	e.mu.Unlock()
	if !ok || r.sandboxID != sandboxID {
		return false, nil
	}
	r.cancel()
	select {
	case <-r.done:
	case <-ctx.Done():
		return false, ctx.Err()
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return r.aborted, nil
}

// forgetLocked drops the ids older than the ttl.
func (e *execs) forgetLocked(now time.Time) {
	n := 0
	for n < len(e.order) && now.Sub(e.order[n].at) >= e.ttl {
		s := e.order[n]
		if at, ok := e.seen[s.id]; ok && at.Equal(s.at) {
			delete(e.seen, s.id)
		}
		n++
	}
	if n > 0 {
		// Appending to the resliced tail reallocates once its capacity
		// is used up, so the memory follows what is remembered.
		e.order = e.order[n:]
	}
}
