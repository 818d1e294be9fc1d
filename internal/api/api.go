package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/hutchsandbox/hutch/client"
	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/events"
	"github.com/hutchsandbox/hutch/internal/metrics"
	"github.com/hutchsandbox/hutch/internal/office"
	"github.com/hutchsandbox/hutch/internal/projection"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/service"
	"github.com/hutchsandbox/hutch/internal/settings"
	"github.com/hutchsandbox/hutch/internal/vault"
)

// DefaultMaxBody bounds a request body (exec stdin included).
const DefaultMaxBody = 8 << 20

// DefaultBodyTimeout is how long a request body may stall (no byte
// arriving) before the request is cut off.
const DefaultBodyTimeout = 30 * time.Second

// Server serves the API over one Service and the daemon's mode.
type Server struct {
	Service *service.Service
	// Mode is where this daemon runs commands.
	Mode sandbox.Mode
	// Token, when set, must arrive as "Authorization: Bearer <token>"
	// (mandatory on TCP).
	Token string
	// Version is reported by /v1/health.
	Version string
	// MaxBody bounds request bodies (default DefaultMaxBody), but for
	// /v1/files/write's: a file's bytes, streamed to the runtime as they
	// arrive, never held in memory, which MaxFileBody bounds when it is
	// above zero. By default nothing does but the runtime: its disk, or
	// its disk ceiling.
	MaxBody, MaxFileBody int64
	// BodyTimeout is how long a request body may stall, no byte arriving,
	// before the request is answered 400 and its connection closed
	// (default DefaultBodyTimeout). A body that keeps coming, however
	// slowly, is not cut off: a large file on a slow link is legitimate.
	BodyTimeout time.Duration
	// Log receives one line per request; nil discards.
	Log *slog.Logger
	// Metrics, when set, is served at GET /metrics.
	Metrics http.Handler
	// MCP, when set, is served at /mcp (streamable HTTP; the conversation
	// is named by query parameters).
	MCP http.Handler
	// AdminLink, when set, issues admin portal links (POST /v1/admin/link).
	AdminLink func(who string, ttl time.Duration) (string, time.Time, error)

	// streams are the event log's followers, made by Handler (a copy of
	// a Server made before its Handler has streams of its own).
	streams *eventStreams
}

// addressOf is the office address c names, checked; it is the target of
// ctx's call in the event log (a refusal's included).
func addressOf(ctx context.Context, c Conversation) (office.Address, error) {
	if c.Platform == "" && c.ConversationID == "" {
		return office.Address{}, errdefs.New(errdefs.ErrInvalid, "The request names no conversation: give conversation.platform and conversation.conversationId")
	}
	addr, err := office.NewAddress(c.Platform, c.ConversationID)
	if err != nil {
		return office.Address{}, err
	}
	// The user picks a vault in host mode: checked as hutch exec --user is.
	if c.User != "" {
		if err := service.ValidateUser(c.User); err != nil {
			return office.Address{}, err
		}
	}
	events.SetTarget(ctx, addr.String())
	return addr, nil
}

// Handler serves the route table (routes) behind the bearer token.
func (s *Server) Handler() http.Handler {
	s.streams = newEventStreams()
	mux := http.NewServeMux()
	for pattern, h := range s.routes() {
		mux.Handle(pattern, h)
	}
	h := s.authenticate(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, pattern := mux.Handler(r); pattern == "" {
			unrouted(w, r, mux)
			return
		}
		mux.ServeHTTP(w, r)
	}))
	// The body is guarded before the token is checked: a client without
	// the token must not hold a connection with a stalled body either.
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		guard := s.guardBody(w, r)
		defer guard.finish()
		h.ServeHTTP(w, r)
	})
}

// routes is the route table: pattern to handler, each but /metrics and
// /mcp wrapped with its body limit. Handler serves it, and the OpenAPI
// test checks openapi.json against its patterns.
func (s *Server) routes() map[string]http.Handler {
	api := map[string]func(http.ResponseWriter, *http.Request) error{
		"GET /v1/health":           s.health,
		"GET /v1/version":          s.version,
		"GET /v1/openapi.json":     s.openapi,
		"GET /v1/events":           s.events,
		"POST /v1/admin/link":      s.adminLink,
		"GET /v1/offices":          s.offices,
		"POST /v1/exec":            s.exec,
		"POST /v1/sandbox/status":  s.sandboxStatus,
		"POST /v1/sandbox/boost":   s.sandboxBoost,
		"POST /v1/sandbox/limits":  s.sandboxLimits,
		"POST /v1/sandbox/stop":    s.sandboxStop,
		"POST /v1/sandbox/remove":  s.sandboxRemove,
		"POST /v1/door":            s.door,
		"POST /v1/policy":          s.policy,
		"POST /v1/vault/list":      s.vaultList,
		"POST /v1/vault/set":       s.vaultSet,
		"POST /v1/vault/remove":    s.vaultRemove,
		"POST /v1/channel-kind":    s.channelKind,
		"GET /v1/sandbox/runtimes": s.runtimes,
		"POST /v1/tools/{name}":    s.tool,
		"POST /v1/chat":            s.chat,
		"POST /v1/files/list":      s.listFiles,
		"POST /v1/files/stat":      s.statFile,
		"POST /v1/files/read":      s.readFile,
	}
	out := make(map[string]http.Handler, len(api)+3)
	for pattern, h := range api {
		out[pattern] = s.wrap(s.maxBody(), h)
	}
	// A file's bytes are the body: a limit of their own.
	out["POST /v1/files/write"] = s.wrap(s.maxFileBody(), s.writeFile)
	if s.Metrics != nil {
		out["GET /metrics"] = s.Metrics
	}
	if s.MCP != nil {
		out["/mcp"] = s.MCP
	}
	return out
}

// CodeMethodNotAllowed is the code of a request whose path is a route
// served under other methods.
const CodeMethodNotAllowed = client.CodeMethodNotAllowed

// unrouted answers a request no route takes, in the API's error shape:
// 405 with the mux's Allow header when the path is served under other
// methods, else 404.
func unrouted(w http.ResponseWriter, r *http.Request, mux *http.ServeMux) {
	// The mux's own answer (text) says which of the two it is, and its
	// Allow header lists the methods.
	h, _ := mux.Handler(r)
	probe := &probeWriter{header: http.Header{}}
	h.ServeHTTP(probe, r)
	if allow := probe.header.Get("Allow"); probe.status == http.StatusMethodNotAllowed && allow != "" {
		w.Header().Set("Allow", allow)
		use, _, _ := strings.Cut(allow, ",")
		writeJSON(w, http.StatusMethodNotAllowed, ErrorBody{Error: fmt.Sprintf("Method %s is not allowed on %s; use %s", r.Method, r.URL.Path, use), Code: CodeMethodNotAllowed})
		return
	}
	writeJSON(w, http.StatusNotFound, ErrorBody{Error: fmt.Sprintf("No such endpoint: %s %s", r.Method, r.URL.Path), Code: "not_found"})
}

// probeWriter keeps a handler's status and headers and drops its body.
type probeWriter struct {
	header http.Header
	status int
}

func (p *probeWriter) Header() http.Header         { return p.header }
func (p *probeWriter) Write(b []byte) (int, error) { return len(b), nil }
func (p *probeWriter) WriteHeader(status int)      { p.status = status }

func (s *Server) bodyTimeout() time.Duration {
	if s.BodyTimeout <= 0 {
		return DefaultBodyTimeout
	}
	return s.BodyTimeout
}

// guardBody cuts off a request body that stalls. The server's
// ReadHeaderTimeout covers the headers only, and a whole-request
// deadline would cut off a large file on a slow link, or a command whose
// request was read long ago: instead each read of the body must bring a
// byte within BodyTimeout, counted from when the handler asks for it (so
// provisioning before a file's bytes are read does not count). Once the
// body has ended, the deadline is lifted: the connection then only
// watches for the client going away, which cancels a running command.
func (s *Server) guardBody(w http.ResponseWriter, r *http.Request) *bodyGuard {
	g := &bodyGuard{rc: http.NewResponseController(w), d: s.bodyTimeout(), done: r.ContentLength == 0}
	if !g.done {
		g.body = r.Body
		r.Body = g
	}
	return g
}

// bodyGuard is a request body whose reads must not stall.
type bodyGuard struct {
	body io.ReadCloser
	rc   *http.ResponseController
	d    time.Duration
	// done: the body ended (or there is none); nothing is left to guard.
	done bool
}

func (g *bodyGuard) Read(p []byte) (int, error) {
	if g.done {
		return g.body.Read(p)
	}
	_ = g.rc.SetReadDeadline(time.Now().Add(g.d))
	n, err := g.body.Read(p)
	switch {
	case err == io.EOF:
		g.done = true
		_ = g.rc.SetReadDeadline(time.Time{})
	case errors.Is(err, os.ErrDeadlineExceeded):
		// The deadline stays, expired: what the server would read of the
		// rest after the handler fails at once instead of waiting on the
		// stalled client.
		g.done = true
		return n, &bodyStalledError{after: g.d}
	}
	return n, err
}

func (g *bodyGuard) Close() error { return g.body.Close() }

// finish bounds what the server reads of a body the handler left unread
// (it reads some of it to reuse the connection).
func (g *bodyGuard) finish() {
	if !g.done {
		_ = g.rc.SetReadDeadline(time.Now().Add(g.d))
	}
}

// bodyStalledError is a request body that stopped arriving.
type bodyStalledError struct{ after time.Duration }

func (e *bodyStalledError) Error() string {
	return fmt.Sprintf("The request body stalled: no byte came for %v", e.after)
}

func (e *bodyStalledError) Unwrap() error { return errdefs.ErrInvalid }

func (s *Server) log() *slog.Logger {
	if s.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return s.Log
}

// authenticate requires the bearer token when one is set.
func (s *Server) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.Token != "" {
			got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			if !ok || !constantTimeEqual(got, s.Token) {
				writeJSON(w, http.StatusUnauthorized, ErrorBody{Error: "Missing or wrong bearer token", Code: client.CodeUnauthorized})
				s.Service.CountRefused(r.Context(), surfaceOf(r), metrics.ReasonUnauthorized)
				return
			}
		}
		next.ServeHTTP(w, withActor(r, s.Token == ""))
	})
}

func constantTimeEqual(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	var v byte
	for i := 0; i < len(a); i++ {
		v |= a[i] ^ b[i]
	}
	return v == 0
}

func (s *Server) maxBody() int64 {
	if s.MaxBody <= 0 {
		return DefaultMaxBody
	}
	return s.MaxBody
}

// maxFileBody is MaxFileBody, or 0 for no bound.
func (s *Server) maxFileBody() int64 { return max(s.MaxFileBody, 0) }

// wrap limits the body to limit bytes (0: no limit), recovers from panics
// and maps errors.
func (s *Server) wrap(limit int64, h func(http.ResponseWriter, *http.Request) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if limit > 0 {
			r.Body = http.MaxBytesReader(w, r.Body, limit)
		}
		start := time.Now()
		var err error
		func() {
			defer func() {
				if p := recover(); p != nil {
					s.log().Error("handler panic", "path", r.URL.Path, "panic", fmt.Sprint(p))
					err = fmt.Errorf("internal error")
				}
			}()
			err = h(w, r)
		}()
		if err != nil {
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				err = errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("Request body is larger than %d bytes", mbe.Limit))
			}
			var stalled *bodyStalledError
			if errors.As(err, &stalled) {
				// The rest of the body may still come: the connection
				// cannot carry another request.
				w.Header().Set("Connection", "close")
				err = stalled
			}
			if !errors.Is(err, errAlreadyWritten) {
				writeError(w, err)
			}
			s.Service.CountRefusal(r.Context(), surfaceOf(r), err)
		}
		s.log().Debug("api", "method", r.Method, "path", r.URL.Path, "duration", time.Since(start), "error", err)
	}
}

func bytesReader(b []byte) io.Reader { return strings.NewReader(string(b)) }

// surfaceOf is the surface a request's refusals are counted under: chat
// for /sandbox commands, mcp for the MCP endpoint, api for the rest.
func surfaceOf(r *http.Request) string {
	switch {
	case r.URL.Path == "/v1/chat":
		return metrics.SurfaceChat
	case r.URL.Path == "/mcp":
		return metrics.SurfaceMCP
	}
	return metrics.SurfaceAPI
}

// errAlreadyWritten marks an error reported inside a started response.
var errAlreadyWritten = errors.New("response already written")

// decode reads a JSON body strictly. The body must be valid UTF-8, as
// JSON text must be: encoding/json would put U+FFFD in place of invalid
// bytes, and two conversation ids differing only there would decode
// alike.
func decode(r *http.Request, v any) error {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		var mbe *http.MaxBytesError
		var stalled *bodyStalledError
		if errors.As(err, &mbe) || errors.As(err, &stalled) {
			return err
		}
		return errdefs.New(errdefs.ErrInvalid, "Malformed JSON body: "+err.Error())
	}
	if !utf8.Valid(body) {
		return errdefs.New(errdefs.ErrInvalid, "Malformed JSON body: not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return errdefs.New(errdefs.ErrInvalid, "Malformed JSON body: "+err.Error())
	}
	if dec.More() {
		return errdefs.New(errdefs.ErrInvalid, "Malformed JSON body: more than one value")
	}
	return nil
}

func (s *Server) health(w http.ResponseWriter, r *http.Request) error {
	l := s.Service.Layout()
	writeJSON(w, http.StatusOK, Health{Status: "ok", Version: s.Version, Mode: s.Mode.String(), StateDir: l.StateDir, Workspace: l.Workspace,
		ManagedProjection: sandbox.CapabilitiesOf(s.Mode.Kind).ManagedProjection()})
	return nil
}

func (s *Server) offices(w http.ResponseWriter, r *http.Request) error {
	body, err := OfficeList(s.Service)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
	return nil
}

// officeListing is GET /v1/offices's answer, encoded once per version of
// the registry: with 10,000 offices the encoding alone took 10 ms a
// request, and the answer changes only when an office is added.
var officeListing = office.NewView(func(recs []office.KeyedRecord) ([]byte, error) {
	out := make([]OfficeEntry, 0, len(recs))
	for _, rec := range recs {
		out = append(out, OfficeEntry{Platform: string(rec.Platform), ConversationID: rec.ConversationID, OfficeKey: string(rec.Key), RecordedAt: rec.RecordedAt})
	}
	var buf bytes.Buffer
	err := EncodeJSON(&buf, out)
	return buf.Bytes(), err
})

// recordKind records a channel kind given with a request.
func (s *Server) recordKind(addr office.Address, c Conversation) error {
	if c.ChannelKind == "" {
		return nil
	}
	return s.Service.SetChannelKind(addr, c.ChannelKind)
}

// execStream writes /v1/exec's answer. Its status line waits for the
// first frame, so that whatever fails before any output (a refusal,
// provisioning, a runtime that does not answer) is still an error
// response with its status; after that, an error can only be a frame.
type execStream struct {
	mu      sync.Mutex // guards the following, and the response
	w       http.ResponseWriter
	enc     *json.Encoder
	started bool
}

// send writes one frame, starting the answer if it is the first.
func (e *execStream) send(f Frame) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.sendLocked(f)
}

func (e *execStream) sendLocked(f Frame) error {
	if !e.started {
		e.started = true
		e.w.Header().Set("Content-Type", "application/x-ndjson")
		e.w.WriteHeader(http.StatusOK)
	}
	err := e.enc.Encode(f)
	// Frames go out as they come: a client shows output while the
	// command runs.
	_ = http.NewResponseController(e.w).Flush()
	return err
}

// frameWriter turns one stream's bytes into frames.
type frameWriter struct {
	out    *execStream
	stream string
}

func (f frameWriter) Write(p []byte) (int, error) {
	if err := f.out.send(Frame{Stream: f.stream, Data: p}); err != nil {
		return 0, err
	}
	return len(p), nil
}

// maxTimeoutSeconds is the longest timeout a time.Duration holds.
const maxTimeoutSeconds = float64(math.MaxInt64 / int64(time.Second))

func (s *Server) exec(w http.ResponseWriter, r *http.Request) error {
	var req ExecRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	addr, err := addressOf(r.Context(), req.Conversation)
	if err != nil {
		return err
	}
	argv := req.Argv
	// A one-element argv is a shell string to the runtimes, but whoever
	// sent argv meant a program: say so in their terms.
	if len(argv) > 0 && strings.TrimSpace(argv[0]) == "" {
		return errdefs.New(errdefs.ErrInvalid, "argv[0] is empty: name the program to run")
	}
	if req.Command != "" {
		if len(argv) > 0 {
			return errdefs.New(errdefs.ErrInvalid, "Give command or argv, not both")
		}
		argv = []string{req.Command}
	}
	if len(argv) == 0 {
		return errdefs.New(errdefs.ErrInvalid, "No command given: set command (a shell string) or argv")
	}
	if err := service.CheckArgv(argv); err != nil {
		return err
	}
	switch {
	case req.TimeoutSeconds < 0:
		return errdefs.New(errdefs.ErrInvalid, "timeoutSeconds must not be negative")
	case req.TimeoutSeconds > maxTimeoutSeconds:
		return errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("timeoutSeconds must be at most %.0f (0: no limit)", maxTimeoutSeconds))
	case req.MaxOutput < 0:
		return errdefs.New(errdefs.ErrInvalid, "maxOutput must not be negative (0: the default, 10 MiB)")
	}
	if err := s.recordKind(addr, req.Conversation); err != nil {
		return err
	}
	limit := req.MaxOutput
	if limit == 0 {
		limit = sandbox.DefaultOutputLimit
	}
	out := &execStream{w: w, enc: json.NewEncoder(w)}
	var stdin io.Reader
	if req.Stdin != "" {
		stdin = strings.NewReader(req.Stdin)
	}
	// The service admits the command (and counts a refusal, as for the
	// CLI and MCP), provisions the runtime and runs it.
	res, err := s.Service.Exec(r.Context(), service.ExecOptions{
		Address:     addr,
		Mode:        s.Mode,
		User:        req.Conversation.User,
		Argv:        argv,
		Dir:         req.Cwd,
		Timeout:     time.Duration(req.TimeoutSeconds * float64(time.Second)),
		OutputLimit: limit,
		Stdin:       stdin,
		Stdout:      frameWriter{out: out, stream: "stdout"},
		Stderr:      frameWriter{out: out, stream: "stderr"},
	})
	out.mu.Lock()
	defer out.mu.Unlock()
	if err != nil && !out.started {
		return err
	}
	// A last frame that cannot be sent (the client went away) has nowhere
	// else to go: its error is only logged, with the request.
	var sendErr error
	if err != nil {
		sendErr = out.sendLocked(Frame{Error: &ErrorBody{Error: err.Error(), Code: errdefs.Code(err)}})
	} else {
		sendErr = out.sendLocked(Frame{Result: &ExecResult{
			ExitCode: res.ExitCode, Signal: res.Signal, TimedOut: res.TimedOut, KillUnconfirmed: res.KillUnconfirmed, Aborted: res.Aborted, OOMKilled: res.OOMKilled,
			StdoutTruncated: res.StdoutTruncated, StderrTruncated: res.StderrTruncated,
			StdoutBytes: res.StdoutBytes, StderrBytes: res.StderrBytes,
			DurationSeconds: res.Duration.Seconds(), Message: res.Message(),
		}})
	}
	switch {
	case err != nil:
		return errors.Join(errAlreadyWritten, err, sendErr)
	case sendErr != nil:
		return errors.Join(errAlreadyWritten, sendErr)
	}
	return nil
}

// limitsOf is the limits l asks for, parsed.
func limitsOf(l LimitsRequest) (sandbox.Limits, error) {
	var out sandbox.Limits
	var err error
	if l.CPUs != "" {
		if out.CPUs, err = settings.ParseCPUs(l.CPUs); err != nil {
			return out, err
		}
	}
	if l.Memory != "" {
		if out.MemoryBytes, err = settings.ParseMemory(l.Memory); err != nil {
			return out, err
		}
	}
	if l.Pids != "" {
		if out.Pids, err = settings.ParsePids(l.Pids); err != nil {
			return out, err
		}
	}
	return out, nil
}

// StatusOf is st as the API reports it.
func StatusOf(st sandbox.Status) Status {
	return Status{
		OfficeKey: st.OfficeKey, Platform: st.Platform, ConversationID: st.ConversationID, Name: st.Name, ID: st.ID, State: string(st.State),
		Image: st.Image, ImageID: st.ImageID, CPUs: st.Limits.CPUs, MemoryBytes: st.Limits.MemoryBytes, Pids: st.Limits.Pids,
		Boosted: st.Boosted, TempLimits: st.TempLimits, LimitsApplied: st.LimitsApplied, StartedAt: st.StartedAt, Fingerprint: st.Fingerprint,
		ActiveCommands: st.ActiveCommands, LastActivity: st.LastActivity, Recreated: st.Recreated, RecreatedBecause: st.RecreatedBecause,
	}
}

// SandboxStatus is the status the API reported, as the daemon had it.
func SandboxStatus(st Status) sandbox.Status {
	return sandbox.Status{
		OfficeKey: st.OfficeKey, Platform: st.Platform, ConversationID: st.ConversationID, Name: st.Name, ID: st.ID,
		State: sandbox.RuntimeState(st.State), Image: st.Image, ImageID: st.ImageID,
		Limits:  sandbox.Limits{CPUs: st.CPUs, MemoryBytes: st.MemoryBytes, Pids: st.Pids},
		Boosted: st.Boosted, TempLimits: st.TempLimits, LimitsApplied: st.LimitsApplied, StartedAt: st.StartedAt, Fingerprint: st.Fingerprint,
		ActiveCommands: st.ActiveCommands, LastActivity: st.LastActivity, Recreated: st.Recreated, RecreatedBecause: st.RecreatedBecause,
	}
}

// managed returns the lifecycle of the daemon's mode, or a refusal for
// modes whose runtimes hutch does not manage.
func (s *Server) managed(ctx context.Context) (sandbox.Lifecycle, error) {
	if !sandbox.CapabilitiesOf(s.Mode.Kind).ManagedLifecycle {
		return nil, errdefs.New(errdefs.ErrNotSupported, fmt.Sprintf("Sandbox '%s' has no runtimes managed by hutch; status, boost, limits, stop and remove need image:*, gondolin:default or kube:*", s.Mode.Kind))
	}
	return s.Service.ManagedFor(ctx, s.Mode)
}

func (s *Server) lifecycleCall(w http.ResponseWriter, r *http.Request, call func(ctx context.Context, lc sandbox.Lifecycle, key string, l sandbox.Limits) (sandbox.Status, error)) error {
	var req LimitsRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	addr, err := addressOf(r.Context(), req.Conversation)
	if err != nil {
		return err
	}
	l, err := limitsOf(req)
	if err != nil {
		return err
	}
	lc, err := s.managed(r.Context())
	if err != nil {
		return err
	}
	st, err := call(r.Context(), lc, string(addr.Key()), l)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, StatusOf(st))
	return nil
}

func (s *Server) sandboxStatus(w http.ResponseWriter, r *http.Request) error {
	return s.lifecycleCall(w, r, func(ctx context.Context, lc sandbox.Lifecycle, key string, _ sandbox.Limits) (sandbox.Status, error) {
		return lc.Status(ctx, key)
	})
}

func (s *Server) sandboxBoost(w http.ResponseWriter, r *http.Request) error {
	return s.lifecycleCall(w, r, func(ctx context.Context, lc sandbox.Lifecycle, key string, l sandbox.Limits) (sandbox.Status, error) {
		// What the request leaves out is the boost size set now.
		size, err := s.Service.BoostSize()
		if err != nil {
			return sandbox.Status{}, err
		}
		return lc.Boost(ctx, key, l.Over(size))
	})
}

func (s *Server) sandboxLimits(w http.ResponseWriter, r *http.Request) error {
	return s.lifecycleCall(w, r, func(ctx context.Context, lc sandbox.Lifecycle, key string, l sandbox.Limits) (sandbox.Status, error) {
		if l == (sandbox.Limits{}) {
			return sandbox.Status{}, errdefs.New(errdefs.ErrInvalid, "Give at least one of cpus, memory, pids")
		}
		return lc.SetLimits(ctx, key, l)
	})
}

func (s *Server) sandboxStop(w http.ResponseWriter, r *http.Request) error {
	return s.lifecycleCall(w, r, func(ctx context.Context, lc sandbox.Lifecycle, key string, _ sandbox.Limits) (sandbox.Status, error) {
		if err := lc.Stop(ctx, key); err != nil {
			return sandbox.Status{}, err
		}
		return lc.Status(ctx, key)
	})
}

func (s *Server) sandboxRemove(w http.ResponseWriter, r *http.Request) error {
	return s.lifecycleCall(w, r, func(ctx context.Context, lc sandbox.Lifecycle, key string, _ sandbox.Limits) (sandbox.Status, error) {
		if err := lc.Remove(ctx, key); err != nil {
			return sandbox.Status{}, err
		}
		return lc.Status(ctx, key)
	})
}

func (s *Server) runtimes(w http.ResponseWriter, r *http.Request) error {
	lc, err := s.managed(r.Context())
	if err != nil {
		return err
	}
	list, err := lc.List(r.Context())
	if err != nil {
		return err
	}
	out := []Status{}
	for _, st := range list {
		a := StatusOf(st)
		a.Mode = string(s.Mode.Kind)
		out = append(out, a)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) door(w http.ResponseWriter, r *http.Request) error {
	var req DoorRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	setting, err := projection.ParseDoorWord(req.Policy)
	if err != nil {
		return err
	}
	if req.Global {
		if req.Conversation != nil {
			return errdefs.New(errdefs.ErrInvalid, "Give a conversation or global, not both")
		}
		if err := s.Service.SetGlobalDoor(r.Context(), setting); err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, map[string]string{"global": req.Policy})
		return nil
	}
	if req.Conversation == nil {
		return errdefs.New(errdefs.ErrInvalid, "Give a conversation, or global: true")
	}
	addr, err := addressOf(r.Context(), *req.Conversation)
	if err != nil {
		return err
	}
	if err := s.Service.SetDoor(r.Context(), addr, setting); err != nil {
		return err
	}
	return s.writePolicy(w, addr, req.Conversation.User)
}

func (s *Server) policy(w http.ResponseWriter, r *http.Request) error {
	var req ConversationRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	addr, err := addressOf(r.Context(), req.Conversation)
	if err != nil {
		return err
	}
	return s.writePolicy(w, addr, req.Conversation.User)
}

func (s *Server) writePolicy(w http.ResponseWriter, addr office.Address, user string) error {
	pol, err := s.Service.Resolve(addr, s.Mode, user)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, PolicyAnswerOf(pol))
	return nil
}

func (s *Server) channelKind(w http.ResponseWriter, r *http.Request) error {
	var req ConversationRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	addr, err := addressOf(r.Context(), req.Conversation)
	if err != nil {
		return err
	}
	if req.Conversation.ChannelKind == "" {
		return errdefs.New(errdefs.ErrInvalid, "Give conversation.channelKind: public_channel, private_channel, im or external")
	}
	if err := s.recordKind(addr, req.Conversation); err != nil {
		return err
	}
	return s.writePolicy(w, addr, req.Conversation.User)
}

func (s *Server) vaultKey(ctx context.Context, req VaultRequest) (string, error) {
	t := service.VaultTarget{User: req.User, Container: req.Container}
	if req.Conversation != nil {
		addr, err := addressOf(ctx, *req.Conversation)
		if err != nil {
			return "", err
		}
		t.Conversation = &addr
	}
	return t.VaultKey()
}

func (s *Server) vaultList(w http.ResponseWriter, r *http.Request) error {
	var req VaultRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	key, err := s.vaultKey(r.Context(), req)
	if err != nil {
		return err
	}
	return s.writeVault(w, key)
}

func (s *Server) writeVault(w http.ResponseWriter, key string) error {
	entries, err := s.Service.Vaults().List(key)
	if err != nil {
		return err
	}
	marks, err := s.Service.Vaults().Placeholders(key)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, VaultEntries(entries, marks, time.Now()))
	return nil
}

func (s *Server) vaultSet(w http.ResponseWriter, r *http.Request) error {
	var req VaultRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	key, err := s.vaultKey(r.Context(), req)
	if err != nil {
		return err
	}
	if len(req.Vars) == 0 {
		return errdefs.New(errdefs.ErrInvalid, "Give vars: {\"NAME\": \"value\"}")
	}
	for n := range req.Vars {
		if err := vault.ValidateEnvName(n); err != nil {
			return err
		}
	}
	if err := s.Service.VaultSetEnv(r.Context(), key, req.Vars); err != nil {
		return err
	}
	return s.writeVault(w, key)
}

func (s *Server) vaultRemove(w http.ResponseWriter, r *http.Request) error {
	var req VaultRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	key, err := s.vaultKey(r.Context(), req)
	if err != nil {
		return err
	}
	if req.Name == "" {
		return errdefs.New(errdefs.ErrInvalid, "Give the name of the entry to remove")
	}
	if err := s.Service.VaultRemove(r.Context(), key, req.Name); err != nil {
		return err
	}
	return s.writeVault(w, key)
}

func (s *Server) adminLink(w http.ResponseWriter, r *http.Request) error {
	if s.AdminLink == nil {
		return errdefs.New(errdefs.ErrNotSupported, "This daemon serves no admin portal: start hutch serve without --admin-listen off")
	}
	var req AdminLinkRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	var ttl time.Duration
	if req.TTL != "" {
		d, err := time.ParseDuration(req.TTL)
		if err != nil {
			return errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("ttl %q is not a duration such as 30m", req.TTL))
		}
		ttl = d
	}
	if strings.TrimSpace(req.Who) == "" {
		return errdefs.New(errdefs.ErrInvalid, "Say who the link is for (who): it is recorded with everything its session does")
	}
	url, exp, err := s.AdminLink(req.Who, ttl)
	if err != nil {
		return errdefs.New(errdefs.ErrInvalid, "Admin link: "+err.Error())
	}
	writeJSON(w, http.StatusOK, AdminLinkResponse{URL: url, Expires: exp})
	return nil
}
