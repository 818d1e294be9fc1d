package service

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

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

// refusalLimiter admits refusal events at a bounded rate and counts
// those it turned away.
type refusalLimiter struct {
	limit   *rate.Limiter
	dropped atomic.Int64
}

// recordRefusal writes a refusal event when the rate allows, saying how
// many were left out since the last one written.
func (s *Service) recordRefusal(ctx context.Context, surface, detail string) {
	if l := s.refusalLog.limit; l != nil && !l.Allow() {
		s.refusalLog.dropped.Add(1)
		return
	}
	if n := s.refusalLog.dropped.Swap(0); n > 0 {
		// First: a long detail is cut at the log's bound.
		detail = fmt.Sprintf("(%d refusals before this one not logged: more than %d a second) %s", n, refusalEventsPerSecond, detail)
	}
	s.Record(refusalActor(ctx, surface), events.Refused, events.TargetFrom(ctx), detail)
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
