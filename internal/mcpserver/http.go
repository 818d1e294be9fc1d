package mcpserver

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/office"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/service"
)

// SessionTimeout is how long an HTTP session may go without a request
// before the handler closes it; the client then starts a new one.
const SessionTimeout = 8 * time.Hour

// HTTPHandler serves the tools over streamable HTTP, in mode. Every
// request names its conversation in the URL's query:
// ?platform=<platform>&conversationId=<raw id>, and optionally
// &user=<platform user> (whose vault host mode uses). A session serves
// the conversation its first request named. A request naming no valid
// conversation gets 400 and a JSON body {"error": ..., "code": "invalid"},
// as the HTTP API's errors. A nil log discards.
func HTTPHandler(svc *service.Service, mode sandbox.Mode, log *slog.Logger) http.Handler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	mh := mcp.NewStreamableHTTPHandler(func(r *http.Request) *mcp.Server {
		addr, err := conversationOf(r)
		if err != nil {
			return nil // not reached: checked below before the SDK sees r
		}
		return New(svc, mode, addr, r.URL.Query().Get("user"), log)
	}, &mcp.StreamableHTTPOptions{Logger: log, SessionTimeout: SessionTimeout})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := conversationOf(r); err != nil {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			enc := json.NewEncoder(w)
			enc.SetEscapeHTML(false)
			_ = enc.Encode(errorBody{Error: err.Error(), Code: "invalid"})
			return
		}
		mh.ServeHTTP(w, r)
	})
}

// errorBody is the HTTP API's error body.
type errorBody struct {
	Error string `json:"error"`
	Code  string `json:"code"`
}

// conversationOf reads the conversation a request names. Errors are of
// class errdefs.ErrInvalid.
func conversationOf(r *http.Request) (office.Address, error) {
	q := r.URL.Query()
	platform, id := q.Get("platform"), q.Get("conversationId")
	if platform == "" && id == "" {
		return office.Address{}, errdefs.New(errdefs.ErrInvalid, "The request names no conversation: add ?platform=<platform>&conversationId=<conversation-id> to the URL")
	}
	return office.NewAddress(platform, id)
}
