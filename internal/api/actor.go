package api

import (
	"context"
	"net/http"

	"github.com/hutchsandbox/hutch/internal/events"
)

// withActor names the request's surface (API, chat, MCP) in its context,
// for the event log.
func withActor(r *http.Request) *http.Request {
	return r.WithContext(events.WithActor(r.Context(), events.Actor{Surface: surfaceOf(r)}))
}

// chatActor is the context of a chat request from who.
func chatActor(r *http.Request, who string) context.Context {
	return events.WithActor(r.Context(), events.Actor{Surface: events.SurfaceChat, Who: who})
}
