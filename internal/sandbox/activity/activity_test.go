package activity

import (
	"context"
	"testing"
	"time"
)

type state struct {
	*Office
}

func TestTable(t *testing.T) {
	tb := &Table[state]{New: func(o *Office) *state { return &state{Office: o} }}
	a := tb.Get("a")
	if a.Key != "a" || tb.Get("a") != a {
		t.Fatalf("Get made %v, then %v", a, tb.Get("a"))
	}
	if _, ok := tb.Lookup("b"); ok {
		t.Error("Lookup found an office never made")
	}
	tb.Get("b")
	if len(tb.All()) != 2 {
		t.Errorf("All = %d offices", len(tb.All()))
	}
}

func TestIdleAndWait(t *testing.T) {
	o := newOffice("k")
	o.Lock()
	if o.IdleFor(0) {
		t.Error("an office never used is idle")
	}
	o.Begin()
	if o.IdleFor(0) || o.Active() != 1 {
		t.Errorf("a running command: idle %v, active %d", o.IdleFor(0), o.Active())
	}
	o.Unlock()

	ended := make(chan struct{})
	go func() {
		time.Sleep(20 * time.Millisecond)
		o.Lock()
		o.End()
		o.Unlock()
		close(ended)
	}()
	o.Lock()
	if err := o.WaitIdle(context.Background()); err != nil || o.Active() != 0 {
		t.Errorf("WaitIdle: %v, active %d", err, o.Active())
	}
	if !o.IdleFor(0) || o.IdleFor(time.Hour) {
		t.Errorf("after the command: IdleFor(0) %v, IdleFor(1h) %v", o.IdleFor(0), o.IdleFor(time.Hour))
	}
	o.Begin()
	o.Unlock()
	<-ended

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	o.Lock()
	if err := o.WaitIdle(ctx); err != context.DeadlineExceeded {
		t.Errorf("WaitIdle with a command that never ends: %v", err)
	}
	o.Adopt(time.Now().Add(-time.Hour))
	o.End()
	o.Unlock()
}
