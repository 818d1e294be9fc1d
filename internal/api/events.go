package api

import (
	"context"
	"net/http"
	"strconv"
	"sync"

	"github.com/hutchsandbox/hutch/client"
	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/events"
)

// MaxEventFollowers bounds the GET /v1/events?follow=1 streams one server
// serves at once: each holds a goroutine and a read buffer, and polls the
// log.
const MaxEventFollowers = 32

// DefaultEvents is how many past events GET /v1/events answers without n.
const DefaultEvents = 100

// withActor names the request's surface (API, chat, MCP) in its context,
// for the event log, with room for the target its handler names. On the
// daemon's unix socket (local: no token, only the state dir's owner
// reaches it), a call that says it comes from hutch's own commands
// (client.HeaderSurface "cli", and client.HeaderWho the user who ran
// them) is the surface cli. A caller over TCP holds a token that may be
// a bot's or an agent's, so there the claim is not taken: it would let
// the caller's changes pass for the operator's.
func withActor(r *http.Request, local bool) *http.Request {
	a := events.Actor{Surface: surfaceOf(r)}
	if local && a.Surface == events.SurfaceAPI && r.Header.Get(client.HeaderSurface) == events.SurfaceCLI {
		a = events.Actor{Surface: events.SurfaceCLI, Who: r.Header.Get(client.HeaderWho)}
	}
	return r.WithContext(events.WithTargetSlot(events.WithActor(r.Context(), a)))
}

// chatActor is the context of a chat request from who.
func chatActor(r *http.Request, who string) context.Context {
	return events.WithActor(r.Context(), events.Actor{Surface: events.SurfaceChat, Who: who})
}

// eventStreams are the GET /v1/events?follow=1 streams of one Server.
type eventStreams struct {
	mu     sync.Mutex // guards the following
	n      int        // streams now served
	ending chan struct{}
	ended  bool // ending is closed
}

func newEventStreams() *eventStreams { return &eventStreams{ending: make(chan struct{})} }

// EndStreams ends the GET /v1/events?follow=1 streams, now and from now
// on: a daemon that shuts down calls it (http.Server.RegisterOnShutdown),
// so that its shutdown does not wait for clients that follow.
func (s *Server) EndStreams() {
	es := s.streams
	if es == nil {
		return
	}
	es.mu.Lock()
	defer es.mu.Unlock()
	if !es.ended {
		close(es.ending)
		es.ended = true
	}
}

// events answers the event log as newline-delimited JSON: the last n
// events (?n=, default DefaultEvents, at most events.MaxLast), then,
// with ?follow=1, each new one as it is written, flushed, until the
// client goes.
func (s *Server) events(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	n := DefaultEvents
	if v := q.Get("n"); v != "" {
		k, err := strconv.Atoi(v)
		if err != nil || k < 0 {
			return errdefs.New(errdefs.ErrInvalid, "n must be a number of events, 0 or more")
		}
		n = min(k, events.MaxLast)
	}
	follow := false
	switch q.Get("follow") {
	case "", "0", "false":
	case "1", "true":
		follow = true
	default:
		return errdefs.New(errdefs.ErrInvalid, "follow must be 1 or 0")
	}
	log := s.Service.Events()
	if !follow {
		evs, err := log.Last(n)
		if err != nil {
			return err
		}
		w.Header().Set("Content-Type", "application/x-ndjson")
		w.WriteHeader(http.StatusOK)
		for _, e := range evs {
			if _, err := w.Write(e.Line()); err != nil {
				return nil // the client went
			}
		}
		return nil
	}
	es := s.streams
	es.mu.Lock()
	if es.n >= MaxEventFollowers || es.ended {
		es.mu.Unlock()
		return errdefs.New(errdefs.ErrUnavailable, "Too many clients follow the event log, or the daemon is shutting down; retry later")
	}
	es.n++
	es.mu.Unlock()
	defer func() {
		es.mu.Lock()
		es.n--
		es.mu.Unlock()
	}()
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	_ = rc.Flush()
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	go func() {
		select {
		case <-es.ending:
			cancel()
		case <-ctx.Done():
		}
	}()
	err := log.Follow(ctx, n, func(e events.Event) error {
		if _, err := w.Write(e.Line()); err != nil {
			return err
		}
		return rc.Flush()
	})
	if err != nil && ctx.Err() == nil {
		s.log().Debug("events stream ended", "error", err)
	}
	return nil
}
