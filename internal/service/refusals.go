package service

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/events"
	"github.com/hutchsandbox/hutch/internal/metrics"
)

// reasoned is a refusal whose metrics reason is known where it is made:
// its text and class are its cause's.
type reasoned struct {
	err    error
	reason string
}

func (e *reasoned) Error() string { return e.err.Error() }
func (e *reasoned) Unwrap() error { return e.err }

// withReason tags err (nil stays nil) with a reason of package metrics.
func withReason(reason string, err error) error {
	if err == nil {
		return nil
	}
	return &reasoned{err: err, reason: reason}
}

// RefusalReason is the metrics reason of a refusal (metrics.Reason*), or
// "" for an error that is no refusal: bad input, a thing not found, an
// engine that did not answer, a failure hutch did not foresee.
func RefusalReason(err error) string {
	if err == nil {
		return ""
	}
	var r *reasoned
	if errors.As(err, &r) {
		return r.reason
	}
	switch {
	case errdefs.IsFailedPrecondition(err):
		return metrics.ReasonFailedPrecondition
	case errdefs.IsNotSupported(err):
		return metrics.ReasonNotSupported
	}
	return ""
}

// CountRefusal counts err in hutch_refusals_total when it is a refusal
// (RefusalReason), under surface (metrics.Surface*). The surfaces that
// answer callers call it where they turn an error into their answer, so
// that each refusal is counted once, where it is told. Without metrics
// (one-shot CLI commands) it counts nothing. Each is also an event of the
// log, with who from ctx's actor when it names one.
func (s *Service) CountRefusal(ctx context.Context, surface string, err error) {
	if s == nil {
		return
	}
	if reason := RefusalReason(err); reason != "" {
		s.metrics.Refusal(surface, reason)
		s.recordRefusal(ctx, surface, reason+": "+err.Error())
	}
}

// refusalEventsPerSecond is how many refusals a second the event log
// takes (twice as many in a burst). Whoever is refused chooses how often
// to try again: an agent retrying in a loop, or anyone sending a bad
// token to the API's TCP listener, which answers before it knows who
// asks. Each event is a write and an fsync in the request's path; past
// the rate the refusals are counted, in the metrics and in the next
// event, not written one by one.
const refusalEventsPerSecond = 20

// One source of refusals (a surface and the target it names, such as an
// agent's office behind its egress proxy) gets refusalSourceBurst events
// at once, then one each refusalSourceEvery: an agent that keeps being
// refused cannot fill the log, rotate the operator's changes out of it
// or crowd them off the portal's page, however many hosts it tries.
// What it left out is said in the source's next event.
const (
	refusalSourceBurst = 5
	refusalSourceEvery = 10 * time.Second
	// maxRefusalSources bounds the sources tracked at once; past it, the
	// idle ones are forgotten, and while none is, a new source shares
	// its surface's one.
	maxRefusalSources = 1024
)

// refusalLimiter admits refusal events at a bounded rate, overall and
// per source, and counts those it turned away.
type refusalLimiter struct {
	limit   *rate.Limiter
	dropped atomic.Int64
	// every is a source's interval (refusalSourceEvery; tests shorten it).
	every time.Duration

	mu      sync.Mutex // guards sources
	sources map[string]*refusalSource
}

// refusalSource is one source's rate and what it left out.
type refusalSource struct {
	limit   *rate.Limiter
	dropped int64
}

// admitSource reports whether source's next refusal may be written, and
// how many of its own were left out since its last.
func (l *refusalLimiter) admitSource(surface, target string) (bool, int64) {
	if l.limit != nil && l.limit.Limit() == rate.Inf {
		return true, 0 // UnlimitRefusalEvents
	}
	key := surface + "\x00" + target
	l.mu.Lock()
	defer l.mu.Unlock()
	src, ok := l.sources[key]
	if !ok {
		if len(l.sources) >= maxRefusalSources {
			l.forgetIdle()
		}
		if len(l.sources) >= maxRefusalSources {
			key = surface + "\x00\x00" // the overflow source of the surface
			src = l.sources[key]
		}
		if src == nil {
			if l.sources == nil {
				l.sources = map[string]*refusalSource{}
			}
			src = &refusalSource{limit: rate.NewLimiter(rate.Every(l.every), refusalSourceBurst)}
			l.sources[key] = src
		}
	}
	if !src.limit.Allow() {
		src.dropped++
		return false, 0
	}
	n := src.dropped
	src.dropped = 0
	return true, n
}

// forgetIdle forgets the sources back at their full burst with nothing
// left out: they are as a new source would be. l.mu is held.
func (l *refusalLimiter) forgetIdle() {
	for key, src := range l.sources {
		if src.dropped == 0 && src.limit.Tokens() >= refusalSourceBurst {
			delete(l.sources, key)
		}
	}
}

// recordRefusal writes a refusal event when the rates allow, saying how
// many were left out since the last one written.
func (s *Service) recordRefusal(ctx context.Context, surface, detail string) {
	target := events.TargetFrom(ctx)
	l := &s.refusalLog
	ok, fromSource := l.admitSource(surface, target)
	if !ok {
		return
	}
	if l.limit != nil && !l.limit.Allow() {
		l.dropped.Add(1 + fromSource)
		return
	}
	// First: a long detail is cut at the log's bound.
	if n := l.dropped.Swap(0); n > 0 {
		detail = fmt.Sprintf("(%d refusals before this one not logged: more than %d a second) %s", n, refusalEventsPerSecond, detail)
	}
	if fromSource > 0 {
		detail = fmt.Sprintf("(%d more like it not logged: more than one each %s) %s", fromSource, l.every, detail)
	}
	s.Record(refusalActor(ctx, surface), events.Refused, target, detail)
}

// refusalActor is ctx's actor, under surface when it names none. (The
// actor may name a narrower one than the metrics' surface: hutch's own
// commands through the API are the surface cli in the log.)
func refusalActor(ctx context.Context, surface string) context.Context {
	a, _ := events.ActorFrom(ctx)
	if a.Surface == "" {
		a.Surface = surface
	}
	return events.WithActor(ctx, a)
}

// CountRefused counts a refusal that is no error (a bad token, a stale
// form): reason is one of metrics.Reason*.
func (s *Service) CountRefused(ctx context.Context, surface, reason string) {
	if s != nil {
		s.metrics.Refusal(surface, reason)
		s.recordRefusal(ctx, surface, reason)
	}
}
