package bridge

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hutchsandbox/hutch/internal/bridge/protocol"
	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/httpstatus"
	"github.com/hutchsandbox/hutch/internal/office"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/service"
	"github.com/hutchsandbox/hutch/internal/settings"
	"github.com/hutchsandbox/hutch/internal/vault"
)

// Extensions are the protocol extensions this bridge speaks, as GET
// /health lists them.
var Extensions = []string{protocol.ExtStream, protocol.ExtCancel, protocol.ExtExecID, protocol.ExtArgv, protocol.ExtStdin}

// Platform is the platform of every conversation a bridge runs: sandbox
// id X is the conversation web/X.
const Platform = office.PlatformWeb

// MaxBody bounds a request body (stdin included, in base64).
const MaxBody = 32 << 20

// OutputLimit caps each of stdout and stderr in a base (not streamed)
// answer; the error field says when output was dropped.
const OutputLimit = sandbox.DefaultOutputLimit

// commitDelay is how long a streamed exec may stay silent before its 200
// and headers are sent anyway. Until then an error that stops the command
// from starting is still answered with its own status; after it, clients
// and proxies that wait for headers are not left waiting for output.
const commitDelay = time.Second

// Options configure a bridge handler.
type Options struct {
	// Service runs the commands.
	Service *service.Service
	// Mode is where they run: every sandbox id is a conversation of this
	// machine in this mode.
	Mode sandbox.Mode
	// Token must arrive as "Authorization: Bearer <token>" on every
	// request. Required.
	Token string
	// Version is reported by GET /health.
	Version string
	// Log receives a line per request (never a token or an env value);
	// nil discards.
	Log *slog.Logger
}

// Validate checks that o can make a handler.
func (o Options) Validate() error {
	switch {
	case o.Service == nil:
		return errdefs.New(errdefs.ErrInvalid, "bridge: no service")
	case o.Token == "":
		return errdefs.New(errdefs.ErrInvalid, "bridge: a token is required")
	case o.Mode.Kind == sandbox.KindCloudflare:
		// Its commands would run on another bridge, maybe this one.
		return errdefs.New(errdefs.ErrInvalid, fmt.Sprintf(
			"A bridge runs commands on its own machine; '%s' would pass them to another bridge. Use host, container:<name>, image:<image> or gondolin:default", o.Mode))
	case !service.Runnable(o.Mode):
		return sandbox.NotImplemented(o.Mode)
	}
	return nil
}

// server is the bridge's http.Handler.
type server struct {
	o      Options
	log    *slog.Logger
	token  [sha256.Size]byte
	execs  *execs
	routes map[string]route
}

// route is the method a path answers and its handler.
type route struct {
	method string
	h      func(http.ResponseWriter, *http.Request) error
}

// New returns the bridge protocol's handler over o.Service, running
// commands in o.Mode.
func New(o Options) (http.Handler, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &server{o: o, log: log, token: sha256.Sum256([]byte(o.Token)), execs: newExecs()}
	s.routes = map[string]route{
		protocol.PathHealth: {http.MethodGet, s.health},
		protocol.PathExec:   {http.MethodPost, s.exec},
		protocol.PathCancel: {http.MethodPost, s.cancel},
	}
	return s, nil
}

// ServeHTTP authenticates, routes, and answers errors as JSON.
func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	if !s.authorized(r) {
		s.log.Warn("bridge: refused a request without the right token", "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr)
		writeJSON(w, http.StatusUnauthorized, protocol.ErrorBody{Error: "Missing or wrong bearer token"})
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, MaxBody)
	rw := &httpstatus.Recorder{ResponseWriter: w}
	var err error
	func() {
		defer func() {
			if p := recover(); p != nil {
				s.log.Error("bridge: handler panic", "path", r.URL.Path, "panic", fmt.Sprint(p))
				err = errors.New("internal error")
			}
		}()
		err = s.route(rw, r)
	}()
	status := rw.Status
	if err != nil && !rw.Wrote() {
		status = writeError(rw, err)
	}
	lvl := slog.LevelDebug
	if status >= 500 {
		lvl = slog.LevelWarn
	}
	s.log.Log(r.Context(), lvl, "bridge request", "method", r.Method, "path", r.URL.Path, "status", status, "duration", time.Since(start), "error", err)
}

func (s *server) route(w http.ResponseWriter, r *http.Request) error {
	rt, ok := s.routes[r.URL.Path]
	switch {
	case !ok:
		return errdefs.New(errdefs.ErrNotFound, fmt.Sprintf("No such endpoint: %s %s", r.Method, r.URL.Path))
	case r.Method != rt.method && !(rt.method == http.MethodGet && r.Method == http.MethodHead):
		w.Header().Set("Allow", rt.method)
		writeJSON(w, http.StatusMethodNotAllowed, protocol.ErrorBody{Error: fmt.Sprintf("Use %s %s", rt.method, r.URL.Path)})
		return nil
	}
	return rt.h(w, r)
}

// authorized compares the bearer token in constant time (over digests,
// so not even its length shows).
func (s *server) authorized(r *http.Request) bool {
	h := r.Header.Get("Authorization")
	scheme, got, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(got)))
	return subtle.ConstantTimeCompare(sum[:], s.token[:]) == 1
}

func (s *server) health(w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, http.StatusOK, protocol.Health{OK: true, Bridge: protocol.BridgeName, Version: s.o.Version, Extensions: slices.Clone(Extensions)})
	return nil
}

// job is a validated POST /exec.
type job struct {
	addr    office.Address
	argv    []string
	dir     string
	timeout time.Duration
	env     map[string]string
	// timeZone is the caller's sandbox.timezone ("" = the bridge's own).
	timeZone string
	stdin    io.Reader
	execID   *execID
	stream   bool
}

// parseExec validates a request and turns it into a job. Errors are of
// class ErrInvalid and name the field.
func parseExec(req protocol.ExecRequest) (job, error) {
	var j job
	if req.SandboxID == "" {
		return j, errdefs.New(errdefs.ErrInvalid, "sandboxId is required")
	}
	if err := office.ValidateConversationID(req.SandboxID); err != nil {
		return j, errdefs.New(errdefs.ErrInvalid, "sandboxId: "+err.Error())
	}
	j.addr = office.Address{Platform: Platform, ConversationID: req.SandboxID}
	given := 0
	for _, set := range []bool{req.Command != "", len(req.Argv) > 0, len(req.ArgvBase64) > 0} {
		if set {
			given++
		}
	}
	switch {
	case given == 0:
		return j, errdefs.New(errdefs.ErrInvalid, "command is required (or argv, or argvBase64)")
	case given > 1:
		return j, errdefs.New(errdefs.ErrInvalid, "Give one of command, argv and argvBase64")
	case req.Command != "":
		j.argv = []string{req.Command}
	case len(req.Argv) > 0:
		j.argv = direct(req.Argv)
	default:
		argv := make([]string, len(req.ArgvBase64))
		for i, a := range req.ArgvBase64 {
			b, err := base64.StdEncoding.DecodeString(a)
			if err != nil {
				return j, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("argvBase64[%d] is not standard base64", i))
			}
			argv[i] = string(b)
		}
		j.argv = direct(argv)
	}
	j.dir = workDir(req.Cwd, j.addr.Key())
	switch t := req.TimeoutSeconds; {
	case t < 0 || math.IsNaN(t):
		return j, errdefs.New(errdefs.ErrInvalid, "timeoutSeconds must be positive")
	case t > float64(math.MaxInt64/int64(time.Second)):
		return j, errdefs.New(errdefs.ErrInvalid, "timeoutSeconds is too large")
	default:
		j.timeout = time.Duration(t * float64(time.Second))
		if t > 0 && j.timeout <= 0 {
			j.timeout = 1 // a positive timeout never becomes none
		}
	}
	for name, value := range req.Env {
		if err := vault.ValidateEnvName(name); err != nil {
			return j, errdefs.New(errdefs.ErrInvalid, "env: "+err.Error())
		}
		if strings.ContainsRune(value, 0) {
			return j, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("env: the value of %s contains a NUL byte", name))
		}
	}
	j.env = req.Env
	if req.TimeZone != "" {
		tz, err := settings.ParseTimeZone(req.TimeZone)
		if err != nil {
			return j, err
		}
		j.timeZone = tz
	}
	if req.Stdin != "" {
		b, err := base64.StdEncoding.DecodeString(req.Stdin)
		if err != nil {
			return j, errdefs.New(errdefs.ErrInvalid, "stdin is not standard base64")
		}
		j.stdin = bytes.NewReader(b)
	}
	if req.ExecID != "" {
		id, err := parseExecID(req.ExecID)
		if err != nil {
			return j, err
		}
		j.execID = &id
	}
	j.stream = req.Stream
	return j, nil
}

// direct returns argv as an ExecRequest.Argv that runs it without a
// shell. The exec contract reads a single element as a shell string, so a
// lone program is handed to sh as $0 and exec'd as is, never parsed.
func direct(argv []string) []string {
	if len(argv) == 1 {
		return []string{"sh", "-c", `exec "$0"`, argv[0]}
	}
	return argv
}

// workDir maps a request's cwd onto the conversation: /workspace (or
// nothing) is its office, /workspace/<rest> and a relative <rest> are
// <rest> in the office, any other absolute path is taken as it is. A
// path already in the office as a managed runtime sees it
// (/workspace/<office-key>/...), as `pwd` there prints it, is taken as it
// is too, not nested once more.
func workDir(cwd string, key office.Key) string {
	if cwd == "" {
		return ""
	}
	if !path.IsAbs(cwd) {
		return cwd
	}
	c := path.Clean(cwd)
	if c == protocol.DefaultCwd {
		return ""
	}
	if own := protocol.DefaultCwd + "/" + string(key); c == own || strings.HasPrefix(c, own+"/") {
		return c
	}
	if rest, ok := strings.CutPrefix(c, protocol.DefaultCwd+"/"); ok {
		return rest
	}
	return cwd
}

func (s *server) exec(w http.ResponseWriter, r *http.Request) error {
	var req protocol.ExecRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	j, err := parseExec(req)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	var rn *run
	if j.execID != nil {
		if rn, err = s.execs.begin(*j.execID, req.SandboxID, cancel); err != nil {
			return err
		}
	}
	start := time.Now()
	opts := service.ExecOptions{
		Address:  j.addr,
		Mode:     s.o.Mode,
		Argv:     j.argv,
		Dir:      j.dir,
		Env:      j.env,
		TimeZone: j.timeZone,
		Timeout:  j.timeout,
		Stdin:    j.stdin,
	}
	// The id's command has ended once the service returns, before the
	// answer is written: POST /cancel never waits on a slow reader. (The
	// deferred call covers a panic; only the first call counts.)
	ended := func(res sandbox.ExecResult) {
		if rn != nil {
			s.execs.end(*j.execID, rn, res.Aborted)
		}
	}
	defer ended(sandbox.ExecResult{})
	var res sandbox.ExecResult
	if j.stream {
		res, err = s.streamExec(ctx, w, opts, ended)
	} else {
		res, err = s.baseExec(ctx, w, opts, ended)
	}
	envKeys := make([]string, 0, len(j.env))
	for k := range j.env {
		envKeys = append(envKeys, k)
	}
	slices.Sort(envKeys)
	log := s.log.With("sandbox_id", req.SandboxID, "office_key", string(j.addr.Key()), "exec_id", req.ExecID, "stream", j.stream, "env_keys", envKeys)
	if err != nil {
		log.Info("bridge exec failed", "error", err)
		return err
	}
	log.Info("bridge exec", "exit_code", res.ExitCode, "signal", res.Signal, "timed_out", res.TimedOut, "aborted", res.Aborted,
		"stdout_bytes", res.StdoutBytes, "stderr_bytes", res.StderrBytes, "duration", time.Since(start))
	return nil
}

// baseExec runs the command, keeping at most OutputLimit of each stream,
// and answers one JSON object.
func (s *server) baseExec(ctx context.Context, w http.ResponseWriter, o service.ExecOptions, ended func(sandbox.ExecResult)) (sandbox.ExecResult, error) {
	var stdout, stderr bytes.Buffer
	o.Stdout, o.Stderr, o.OutputLimit = &stdout, &stderr, OutputLimit
	res, err := s.o.Service.Exec(ctx, o)
	ended(res)
	if err != nil {
		return res, err
	}
	msg := res.Message()
	if n := res.TruncationNotice(OutputLimit); n != "" {
		msg = strings.TrimSpace(msg + " " + n)
	}
	writeJSON(w, http.StatusOK, protocol.ExecResponse{Stdout: stdout.String(), Stderr: stderr.String(), Code: res.ExitCode, Error: msg})
	return res, nil
}

// streamExec runs the command and answers NDJSON frames, flushed as
// output comes, then the exit line.
func (s *server) streamExec(ctx context.Context, w http.ResponseWriter, o service.ExecOptions, ended func(sandbox.ExecResult)) (sandbox.ExecResult, error) {
	sw := newStreamWriter(w)
	t := time.AfterFunc(commitDelay, func() { sw.commit() })
	o.Stdout, o.Stderr = frameWriter{sw, true}, frameWriter{sw, false}
	res, err := s.o.Service.Exec(ctx, o)
	ended(res)
	t.Stop()
	if err != nil {
		// Before anything was sent the error keeps its status; after, it
		// is the exit line's error.
		if sw.close() {
			sw.exit(protocol.Exit{Code: -1, Error: err.Error()})
		}
		return res, err
	}
	sw.exit(protocol.Exit{Code: res.ExitCode, Signal: res.Signal, TimedOut: res.TimedOut, OOMKilled: res.OOMKilled, Error: res.Message()})
	return res, nil
}

// streamWriter writes the frames of one streamed exec. Its first write
// (or commit) sends the 200 and the NDJSON content type.
type streamWriter struct {
	w  http.ResponseWriter
	rc *http.ResponseController

	mu        sync.Mutex // guards the following
	enc       *json.Encoder
	committed bool
	closed    bool
}

func newStreamWriter(w http.ResponseWriter) *streamWriter {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return &streamWriter{w: w, rc: http.NewResponseController(w), enc: enc}
}

func (sw *streamWriter) commitLocked() {
	if sw.committed {
		return
	}
	sw.committed = true
	sw.w.Header().Set("Content-Type", protocol.ContentTypeNDJSON)
	sw.w.Header().Set("X-Content-Type-Options", "nosniff")
	sw.w.WriteHeader(http.StatusOK)
	_ = sw.rc.Flush()
}

// commit sends the 200 now, unless the exec has already finished.
func (sw *streamWriter) commit() {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	if !sw.closed {
		sw.commitLocked()
	}
}

func (sw *streamWriter) frame(f protocol.Frame) error {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	if sw.closed {
		return errors.New("the stream has ended")
	}
	sw.commitLocked()
	if err := sw.enc.Encode(f); err != nil {
		return err
	}
	return sw.rc.Flush()
}

// close ends the output (and the commit timer's say) and reports whether
// the 200 was already sent.
func (sw *streamWriter) close() bool {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	sw.closed = true
	return sw.committed
}

// exit writes the exit line, last.
func (sw *streamWriter) exit(e protocol.Exit) {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	sw.closed = true
	sw.commitLocked()
	_ = sw.enc.Encode(protocol.Frame{Exit: &e})
	_ = sw.rc.Flush()
}

// frameWriter is one output stream of a streamWriter.
type frameWriter struct {
	sw     *streamWriter
	stdout bool
}

func (f frameWriter) Write(p []byte) (int, error) {
	// The runtime reuses p: the frame is encoded before Write returns.
	fr := protocol.Frame{Stderr: p}
	if f.stdout {
		fr = protocol.Frame{Stdout: p}
	}
	if err := f.sw.frame(fr); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (s *server) cancel(w http.ResponseWriter, r *http.Request) error {
	var req protocol.CancelRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	if req.SandboxID == "" {
		return errdefs.New(errdefs.ErrInvalid, "sandboxId is required")
	}
	if req.ExecID == "" {
		return errdefs.New(errdefs.ErrInvalid, "execId is required")
	}
	id, err := parseExecID(req.ExecID)
	if err != nil {
		return err
	}
	cancelled, err := s.execs.cancel(r.Context(), id, req.SandboxID)
	if err != nil {
		return err
	}
	s.log.Info("bridge cancel", "sandbox_id", req.SandboxID, "exec_id", req.ExecID, "cancelled", cancelled)
	writeJSON(w, http.StatusOK, protocol.CancelResponse{Cancelled: cancelled})
	return nil
}

// decode reads one JSON object; unknown fields are ignored.
func decode(r *http.Request, v any) error {
	dec := json.NewDecoder(r.Body)
	err := dec.Decode(v)
	if err == nil && dec.More() {
		err = errors.New("more than one JSON value")
	}
	var mbe *http.MaxBytesError
	var ute *json.UnmarshalTypeError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &mbe):
		return errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("Request body is larger than %d bytes", mbe.Limit))
	case errors.Is(err, io.EOF):
		return errdefs.New(errdefs.ErrInvalid, "Request body is empty; send a JSON object")
	case errors.As(err, &ute) && ute.Field != "":
		return errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("%s must be a JSON %s, not %s", ute.Field, jsonKind(ute.Type.String()), ute.Value))
	}
	return errdefs.New(errdefs.ErrInvalid, "Malformed JSON body: "+err.Error())
}

// jsonKind names a Go type of the protocol as JSON does.
func jsonKind(goType string) string {
	switch {
	case goType == "string":
		return "string"
	case goType == "bool":
		return "boolean"
	case goType == "float64" || strings.HasPrefix(goType, "int"):
		return "number"
	case strings.HasPrefix(goType, "[]"):
		return "array"
	case strings.HasPrefix(goType, "map["):
		return "object"
	}
	return goType
}

// statusOf maps an error class to the protocol's status codes.
func statusOf(err error) int {
	switch {
	case errors.Is(err, errdefs.ErrInvalid), errors.Is(err, errdefs.ErrFailedPrecondition), errors.Is(err, errdefs.ErrNotSupported):
		return http.StatusBadRequest
	case errors.Is(err, errdefs.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, errdefs.ErrConflict):
		return http.StatusConflict
	case errors.Is(err, errdefs.ErrUnavailable):
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// writeError answers err with its status; hutch's error texts never carry
// secrets.
func writeError(w http.ResponseWriter, err error) int {
	status := statusOf(err)
	writeJSON(w, status, protocol.ErrorBody{Error: err.Error()})
	return status
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", protocol.ContentTypeJSON)
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}
