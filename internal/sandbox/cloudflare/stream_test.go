package cloudflare_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/hutchsandbox/hutch/internal/bridge/protocol"
	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/sandbox/cloudflare"
)

// ignoreDuration drops the wall time from result comparisons.
var ignoreDuration = cmpopts.IgnoreFields(sandbox.ExecResult{}, "Duration")

// allExtensions is what a full bridge advertises.
var allExtensions = []string{"stream", "cancel", "execId", "argv", "stdin"}

// fakeBridge is a bridge with extensions whose /exec answer each test
// scripts, for the behaviour a real bridge cannot be made to show on
// demand: a connection dropped mid-stream, a bridge that stops answering,
// a 409. It records what it was sent.
type fakeBridge struct {
	extensions []string
	token      string
	// exec answers POST /exec once the request is decoded and recorded.
	exec func(w http.ResponseWriter, r *http.Request, req protocol.ExecRequest)
	// health, when set, answers GET /health instead of the default.
	health http.HandlerFunc

	healthHits atomic.Int32
	mu         sync.Mutex // guards the following
	execs      []protocol.ExecRequest
	cancels    []protocol.CancelRequest
}

func (f *fakeBridge) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if f.token != "" && r.Header.Get("Authorization") != "Bearer "+f.token {
		writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "wrong token " + r.Header.Get("Authorization")})
		return
	}
	switch r.URL.Path {
	case "/health":
		f.healthHits.Add(1)
		if f.health != nil {
			f.health(w, r)
			return
		}
		writeJSON(w, http.StatusOK, protocol.Health{OK: true, Bridge: "fake", Version: "0.1", Extensions: f.extensions})
	case "/exec":
		var req protocol.ExecRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
			return
		}
		f.mu.Lock()
		f.execs = append(f.execs, req)
		f.mu.Unlock()
		f.exec(w, r, req)
	case "/cancel":
		var req protocol.CancelRequest
		_ = json.NewDecoder(r.Body).Decode(&req)
		f.mu.Lock()
		f.cancels = append(f.cancels, req)
		f.mu.Unlock()
		writeJSON(w, http.StatusOK, protocol.CancelResponse{Cancelled: true})
	default:
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "no such path"})
	}
}

func (f *fakeBridge) recorded() ([]protocol.ExecRequest, []protocol.CancelRequest) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]protocol.ExecRequest(nil), f.execs...), append([]protocol.CancelRequest(nil), f.cancels...)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// frames starts a streamed answer and returns a function writing one
// frame and flushing it.
func frames(w http.ResponseWriter) func(protocol.Frame) {
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	_ = rc.Flush()
	return func(f protocol.Frame) {
		_ = json.NewEncoder(w).Encode(f)
		_ = rc.Flush()
	}
}

// drop closes the connection under a streamed answer, as a bridge that
// dies does.
func drop(t *testing.T, w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		t.Errorf("hijack: %v", err)
		return
	}
	_ = conn.Close()
}

// startFake serves f and returns a runtime of cloudflare:box talking to it
// with short failure timings (grace 200 ms, retries 10 ms apart).
func startFake(t *testing.T, f *fakeBridge) (*httptest.Server, *cloudflare.Runtime) {
	t.Helper()
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	rt, err := cloudflare.New(cloudflare.Config{SandboxID: "box", URL: srv.URL, Token: f.token, HTTPClient: srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	rt.SetTimings(200*time.Millisecond, []time.Duration{10 * time.Millisecond, 10 * time.Millisecond})
	return srv, rt
}

// signalWriter collects what is written and signals once it holds want.
type signalWriter struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	want string
	got  chan struct{}
	once sync.Once
}

func newSignalWriter(want string) *signalWriter {
	return &signalWriter{want: want, got: make(chan struct{})}
}

func (s *signalWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.buf.Write(p)
	if strings.Contains(s.buf.String(), s.want) {
		s.once.Do(func() { close(s.got) })
	}
	return len(p), nil
}

func (s *signalWriter) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

var execIDPattern = regexp.MustCompile(`^[0-9a-f]{32}$`)

func TestStream(t *testing.T) {
	t.Parallel()
	stdout := newSignalWriter("hello\n")
	f := &fakeBridge{extensions: allExtensions, token: "tok"}
	f.exec = func(w http.ResponseWriter, r *http.Request, req protocol.ExecRequest) {
		frame := frames(w)
		frame(protocol.Frame{Stdout: []byte("hello\n")})
		// The exit line waits until the client has shown the output: it
		// streams, it does not collect.
		select {
		case <-stdout.got:
		case <-time.After(10 * time.Second):
			t.Error("the client did not write the first frame before the exit line")
		}
		frame(protocol.Frame{Stderr: []byte("warn\n")})
		frame(protocol.Frame{Stdout: []byte{0, 1, 0xff}})
		frame(protocol.Frame{Exit: &protocol.Exit{Code: 3}})
	}
	_, rt := startFake(t, f)
	var stderr bytes.Buffer
	res, err := rt.Exec(t.Context(), spec, sandbox.ExecRequest{
		Argv:    []string{"printf", "%s", "a b"},
		Dir:     "src",
		Env:     map[string]string{"GH_TOKEN": "ghp_x"},
		Stdin:   strings.NewReader("in\x00put"),
		Stdout:  stdout,
		Stderr:  &stderr,
		Timeout: 90 * time.Second,
	})
	if err != nil {
		t.Fatalf("Exec: %v", err)
	}
	want := sandbox.ExecResult{ExitCode: 3, StdoutBytes: 9, StderrBytes: 5, Timeout: 90 * time.Second}
	if diff := cmp.Diff(want, res, ignoreDuration); diff != "" {
		t.Errorf("result mismatch (-want +got):\n%s", diff)
	}
	if got := stdout.String(); got != "hello\n\x00\x01\xff" || stderr.String() != "warn\n" {
		t.Errorf("stdout %q, stderr %q; want %q, %q", got, stderr.String(), "hello\n\x00\x01\xff", "warn\n")
	}
	execs, _ := f.recorded()
	if len(execs) != 1 {
		t.Fatalf("the bridge got %d exec requests, want 1", len(execs))
	}
	got := execs[0]
	if !execIDPattern.MatchString(got.ExecID) {
		t.Errorf("execId %q is not 32 hex digits", got.ExecID)
	}
	wantReq := protocol.ExecRequest{
		SandboxID:      remoteID,
		Argv:           []string{"printf", "%s", "a b"},
		Cwd:            "/workspace/src",
		TimeoutSeconds: 90,
		Env:            map[string]string{"GH_TOKEN": "ghp_x"},
		Stdin:          base64.StdEncoding.EncodeToString([]byte("in\x00put")),
		ExecID:         got.ExecID,
		Stream:         true,
	}
	if diff := cmp.Diff(wantReq, got); diff != "" {
		t.Errorf("request mismatch (-want +got):\n%s", diff)
	}
}

func TestStream_Requests(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		extensions []string
		argv       []string
		want       protocol.ExecRequest
	}{
		{"command", allExtensions, []string{"echo hi"}, protocol.ExecRequest{Command: "echo hi"}},
		{"argv", allExtensions, []string{"ls", "-la"}, protocol.ExecRequest{Argv: []string{"ls", "-la"}}},
		{
			"argv_base64", allExtensions, []string{"printf", "\xff\xfe"},
			protocol.ExecRequest{ArgvBase64: []string{base64.StdEncoding.EncodeToString([]byte("printf")), base64.StdEncoding.EncodeToString([]byte("\xff\xfe"))}},
		},
		{
			"command_not_utf8", allExtensions, []string{"echo \xff"},
			protocol.ExecRequest{ArgvBase64: []string{"c2g=", "LWM=", base64.StdEncoding.EncodeToString([]byte("echo \xff"))}},
		},
		{"argv_quoted_without_extension", []string{"stream", "execId"}, []string{"ls", "it's"}, protocol.ExecRequest{Command: `exec 'ls' 'it'\''s'`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := &fakeBridge{extensions: tt.extensions}
			f.exec = func(w http.ResponseWriter, r *http.Request, req protocol.ExecRequest) {
				frames(w)(protocol.Frame{Exit: &protocol.Exit{}})
			}
			_, rt := startFake(t, f)
			if _, _, _, err := execute(t, rt, sandbox.ExecRequest{Argv: tt.argv}); err != nil {
				t.Fatal(err)
			}
			execs, _ := f.recorded()
			got := execs[0]
			got.ExecID, got.SandboxID, got.Cwd, got.Stream = "", "", "", false
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("request mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestStream_Results(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		frames []protocol.Frame
		limit  int64
		want   sandbox.ExecResult
		stdout string
	}{
		{"signal", []protocol.Frame{{Exit: &protocol.Exit{Code: -1, Signal: "SIGSEGV", Error: "Command was killed by SIGSEGV"}}}, 0, sandbox.ExecResult{ExitCode: -1, Signal: "SIGSEGV"}, ""},
		{"timed_out", []protocol.Frame{{Stdout: []byte("x")}, {Exit: &protocol.Exit{Code: 137, TimedOut: true, Error: "Command timed out after 1 second"}}}, 0, sandbox.ExecResult{ExitCode: -1, TimedOut: true, StdoutBytes: 1}, "x"},
		{
			"output_limit",
			[]protocol.Frame{{Stdout: bytes.Repeat([]byte("a"), 700)}, {Stdout: bytes.Repeat([]byte("b"), 700)}, {Stdout: []byte("c")}, {Exit: &protocol.Exit{}}},
			1000, sandbox.ExecResult{StdoutTruncated: true, StdoutBytes: 1401}, strings.Repeat("a", 700) + strings.Repeat("b", 300),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := &fakeBridge{extensions: allExtensions}
			f.exec = func(w http.ResponseWriter, r *http.Request, req protocol.ExecRequest) {
				frame := frames(w)
				for _, fr := range tt.frames {
					frame(fr)
				}
			}
			_, rt := startFake(t, f)
			res, stdout, _, err := execute(t, rt, sandbox.ExecRequest{Argv: []string{"x"}, OutputLimit: tt.limit})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, res, ignoreDuration); diff != "" {
				t.Errorf("result mismatch (-want +got):\n%s", diff)
			}
			if stdout != tt.stdout {
				t.Errorf("stdout = %q, want %q", stdout, tt.stdout)
			}
		})
	}
}

const wentAway = "went away while the command ran; its end is unknown (it may still run there)"

// TestStream_BridgeDropsConnection: a bridge that dies mid-command ends
// that command at once with the clear error, not at its timeout, and the
// next command checks the bridge's health again before it runs.
func TestStream_BridgeDropsConnection(t *testing.T) {
	t.Parallel()
	var dropNext atomic.Bool
	dropNext.Store(true)
	f := &fakeBridge{extensions: allExtensions}
	f.exec = func(w http.ResponseWriter, r *http.Request, req protocol.ExecRequest) {
		frame := frames(w)
		frame(protocol.Frame{Stdout: []byte("partial\n")})
		if dropNext.Swap(false) {
			drop(t, w)
			return
		}
		frame(protocol.Frame{Exit: &protocol.Exit{}})
	}
	srv, rt := startFake(t, f)
	const timeout = time.Minute
	done := make(chan struct{})
	var res sandbox.ExecResult
	var stdout string
	var err error
	go func() {
		defer close(done)
		res, stdout, _, err = execute(t, rt, sandbox.ExecRequest{Argv: []string{"sleep 600"}, Timeout: timeout})
	}()
	select {
	case <-done:
	case <-time.After(timeout):
		t.Fatalf("Exec did not return within its timeout (%v) although the bridge dropped the connection", timeout)
	}
	want := "The bridge at " + srv.URL + " " + wentAway
	if !errdefs.IsUnavailable(err) || err.Error() != want {
		t.Errorf("Exec over a dropped connection: %+v, %v; want %q of class ErrUnavailable", res, err, want)
	}
	if stdout != "partial\n" {
		t.Errorf("stdout = %q, want what came before the drop, %q", stdout, "partial\n")
	}
	if execs, _ := f.recorded(); len(execs) != 1 {
		t.Errorf("the bridge got %d exec requests, want 1: a sent request is never retried", len(execs))
	}
	before := f.healthHits.Load()
	if _, _, _, err := execute(t, rt, sandbox.ExecRequest{Argv: []string{"true"}}); err != nil {
		t.Fatalf("the next command: %v", err)
	}
	if after := f.healthHits.Load(); after != before+1 {
		t.Errorf("health checks around the next command: %d before, %d after; want one more", before, after)
	}
}

// TestStream_BridgeStopsAnswering: a bridge that keeps the connection but
// never ends the command cannot hold Exec past the timeout plus the grace.
func TestStream_BridgeStopsAnswering(t *testing.T) {
	t.Parallel()
	closed := make(chan struct{})
	f := &fakeBridge{extensions: allExtensions}
	f.exec = func(w http.ResponseWriter, r *http.Request, req protocol.ExecRequest) {
		frames(w)(protocol.Frame{Stdout: []byte("started\n")})
		<-r.Context().Done()
		close(closed)
	}
	_, rt := startFake(t, f)
	res, _, _, err := execute(t, rt, sandbox.ExecRequest{Argv: []string{"sleep 600"}, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	want := sandbox.ExecResult{ExitCode: -1, TimedOut: true, StdoutBytes: 8, Timeout: time.Second}
	if diff := cmp.Diff(want, res, ignoreDuration); diff != "" {
		t.Errorf("result mismatch (-want +got):\n%s", diff)
	}
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Error("the client did not close the request")
	}
	execs, cancels := f.recorded()
	if diff := cmp.Diff([]protocol.CancelRequest{{SandboxID: remoteID, ExecID: execs[0].ExecID}}, cancels); diff != "" {
		t.Errorf("POST /cancel requests mismatch (-want +got):\n%s", diff)
	}
}

// TestStream_Abort: cancelling the context closes the request and posts
// /cancel with the command's exec id.
func TestStream_Abort(t *testing.T) {
	t.Parallel()
	closed := make(chan struct{})
	f := &fakeBridge{extensions: allExtensions}
	f.exec = func(w http.ResponseWriter, r *http.Request, req protocol.ExecRequest) {
		frames(w)(protocol.Frame{Stdout: []byte("started\n")})
		<-r.Context().Done()
		close(closed)
	}
	_, rt := startFake(t, f)
	ctx, cancel := context.WithCancel(t.Context())
	stdout := newSignalWriter("started\n")
	go func() {
		<-stdout.got
		cancel()
	}()
	res, err := rt.Exec(ctx, spec, sandbox.ExecRequest{Argv: []string{"sleep 600"}, Timeout: time.Hour, Stdout: stdout})
	if err != nil {
		t.Fatal(err)
	}
	want := sandbox.ExecResult{ExitCode: -1, Aborted: true, StdoutBytes: 8, Timeout: time.Hour}
	if diff := cmp.Diff(want, res, ignoreDuration); diff != "" {
		t.Errorf("result mismatch (-want +got):\n%s", diff)
	}
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Error("the bridge did not see the request closed")
	}
	execs, cancels := f.recorded()
	if diff := cmp.Diff([]protocol.CancelRequest{{SandboxID: remoteID, ExecID: execs[0].ExecID}}, cancels); diff != "" {
		t.Errorf("POST /cancel requests mismatch (-want +got):\n%s", diff)
	}
}

// recordingTransport notes the exec id of every /exec attempt the client
// makes, sent or not, and fails the first failDials dials.
type recordingTransport struct {
	inner     *http.Transport
	failDials atomic.Int32
	dials     atomic.Int32

	mu       sync.Mutex
	attempts []string // execId of each /exec attempt
}

func newRecordingTransport(srv *httptest.Server) *recordingTransport {
	rt := &recordingTransport{}
	addr := srv.Listener.Addr().String()
	rt.inner = &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
		rt.dials.Add(1)
		if rt.failDials.Add(-1) >= 0 {
			return nil, &net.OpError{Op: "dial", Net: network, Err: errors.New("connection refused (injected)")}
		}
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}}
	return rt
}

func (rt *recordingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Path == "/exec" {
		body, _ := req.GetBody()
		var er protocol.ExecRequest
		_ = json.NewDecoder(body).Decode(&er)
		rt.mu.Lock()
		rt.attempts = append(rt.attempts, er.ExecID)
		rt.mu.Unlock()
	}
	return rt.inner.RoundTrip(req)
}

// TestRetry_DialFailure: a request that could not be sent is retried,
// with the same exec id, and runs once.
func TestRetry_DialFailure(t *testing.T) {
	t.Parallel()
	f := &fakeBridge{extensions: allExtensions}
	f.exec = func(w http.ResponseWriter, r *http.Request, req protocol.ExecRequest) {
		frames(w)(protocol.Frame{Exit: &protocol.Exit{}})
	}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	tr := newRecordingTransport(srv)
	rt, err := cloudflare.New(cloudflare.Config{SandboxID: "box", URL: srv.URL, HTTPClient: &http.Client{Transport: tr}})
	if err != nil {
		t.Fatal(err)
	}
	rt.SetTimings(200*time.Millisecond, []time.Duration{10 * time.Millisecond, 10 * time.Millisecond})
	if _, err := rt.Health(t.Context()); err != nil {
		t.Fatal(err)
	}
	tr.inner.CloseIdleConnections()

	tr.failDials.Store(2)
	if _, _, _, err := execute(t, rt, sandbox.ExecRequest{Argv: []string{"true"}}); err != nil {
		t.Fatalf("Exec after two failed dials: %v", err)
	}
	tr.mu.Lock()
	attempts := append([]string(nil), tr.attempts...)
	tr.mu.Unlock()
	execs, _ := f.recorded()
	if len(attempts) != 3 || attempts[0] != attempts[1] || attempts[1] != attempts[2] || !execIDPattern.MatchString(attempts[0]) {
		t.Errorf("exec attempts carried exec ids %q; want 3 attempts with one id", attempts)
	}
	if len(execs) != 1 || execs[0].ExecID != attempts[0] {
		t.Errorf("the bridge got %d exec requests (%+v); want 1, with exec id %q", len(execs), execs, attempts[0])
	}

	// A bridge that cannot be reached at all: the command is not run and
	// the error says so, naming the URL.
	tr.inner.CloseIdleConnections()
	tr.failDials.Store(100)
	_, _, _, err = execute(t, rt, sandbox.ExecRequest{Argv: []string{"true"}})
	want := "The bridge at " + srv.URL + " is not reachable: "
	if !errdefs.IsUnavailable(err) || !strings.HasPrefix(err.Error(), want) || !strings.HasSuffix(err.Error(), "; the command was not run") {
		t.Errorf("Exec with every dial failing: %v; want ErrUnavailable starting %q", err, want)
	}
}

// TestNoRetry_AfterSend: a request the bridge received is never sent
// again, whatever happens to its answer: a 409 or a connection closed
// before any answer.
func TestNoRetry_AfterSend(t *testing.T) {
	t.Parallel()
	t.Run("conflict", func(t *testing.T) {
		t.Parallel()
		f := &fakeBridge{extensions: allExtensions}
		f.exec = func(w http.ResponseWriter, r *http.Request, req protocol.ExecRequest) {
			writeJSON(w, http.StatusConflict, map[string]string{"error": "execId " + req.ExecID + " has already run"})
		}
		srv, rt := startFake(t, f)
		_, _, _, err := execute(t, rt, sandbox.ExecRequest{Argv: []string{"true"}})
		execs, _ := f.recorded()
		if len(execs) != 1 {
			t.Fatalf("the bridge got %d exec requests, want 1", len(execs))
		}
		want := "The bridge at " + srv.URL + " has already run exec id " + execs[0].ExecID + ", so it did not run it again (execId " + execs[0].ExecID + " has already run)"
		if !errdefs.IsConflict(err) || err.Error() != want {
			t.Errorf("Exec answered 409: %v; want %q of class ErrConflict", err, want)
		}
	})
	t.Run("closed_before_answer", func(t *testing.T) {
		t.Parallel()
		f := &fakeBridge{extensions: allExtensions}
		f.exec = func(w http.ResponseWriter, r *http.Request, req protocol.ExecRequest) { drop(t, w) }
		srv, rt := startFake(t, f)
		_, _, _, err := execute(t, rt, sandbox.ExecRequest{Argv: []string{"true"}})
		if want := "The bridge at " + srv.URL + " " + wentAway; !errdefs.IsUnavailable(err) || err.Error() != want {
			t.Errorf("Exec whose connection closed before an answer: %v; want %q", err, want)
		}
		if execs, _ := f.recorded(); len(execs) != 1 {
			t.Errorf("the bridge got %d exec requests, want 1", len(execs))
		}
	})
}

func TestExec_Refusals(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		status  int
		body    string
		class   error
		want    string
		recheck bool
	}{
		{"bad_request", 400, `{"error":"Working directory does not exist: /workspace/nope"}`, errdefs.ErrInvalid, "Working directory does not exist: /workspace/nope", false},
		{"server_error", 503, `{"error":"the engine is down"}`, errdefs.ErrUnavailable, "The bridge at URL failed (HTTP 503): the engine is down", true},
		{"stderr_only", 500, `{"stderr":"boom"}`, errdefs.ErrUnavailable, "The bridge at URL failed (HTTP 500): boom", true},
		{"no_body", 502, ``, errdefs.ErrUnavailable, "The bridge at URL failed (HTTP 502): bridge returned HTTP 502", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := &fakeBridge{extensions: allExtensions}
			f.exec = func(w http.ResponseWriter, r *http.Request, req protocol.ExecRequest) {
				w.WriteHeader(tt.status)
				_, _ = io.WriteString(w, tt.body)
			}
			srv, rt := startFake(t, f)
			_, _, _, err := execute(t, rt, sandbox.ExecRequest{Argv: []string{"true"}})
			want := strings.ReplaceAll(tt.want, "URL", srv.URL)
			if !errors.Is(err, tt.class) || err.Error() != want {
				t.Errorf("Exec answered %d: %v; want %q of class %v", tt.status, err, want, tt.class)
			}
			hits := f.healthHits.Load()
			_, _, _, _ = execute(t, rt, sandbox.ExecRequest{Argv: []string{"true"}})
			if rechecked := f.healthHits.Load() > hits; rechecked != tt.recheck {
				t.Errorf("health checked again before the next command: %v, want %v", rechecked, tt.recheck)
			}
		})
	}
}

// TestToken: the token goes with every request, and no error text shows
// it, even when the bridge echoes it back.
func TestToken(t *testing.T) {
	t.Parallel()
	const token = "s3cr3t-bridge-token"
	f := &fakeBridge{extensions: allExtensions, token: token}
	f.exec = func(w http.ResponseWriter, r *http.Request, req protocol.ExecRequest) {
		frames(w)(protocol.Frame{Exit: &protocol.Exit{}})
	}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	good, err := cloudflare.New(cloudflare.Config{SandboxID: "box", URL: srv.URL, Token: token})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := execute(t, good, sandbox.ExecRequest{Argv: []string{"true"}}); err != nil {
		t.Fatalf("Exec with the right token: %v", err)
	}
	for _, tt := range []struct {
		name, token, want string
	}{
		// The fake bridge echoes the Authorization header it got.
		{"wrong", token + "-old", "The bridge at URL refused the token (wrong token Bearer [token]): check HUTCH_BRIDGE_TOKEN (or CLOUDFLARE_SANDBOX_TOKEN)"},
		{"missing", "", "The bridge at URL requires a token (wrong token): set HUTCH_BRIDGE_TOKEN (or CLOUDFLARE_SANDBOX_TOKEN)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rt, err := cloudflare.New(cloudflare.Config{SandboxID: "box", URL: srv.URL, Token: tt.token})
			if err != nil {
				t.Fatal(err)
			}
			want := strings.ReplaceAll(tt.want, "URL", srv.URL)
			_, err = rt.Health(t.Context())
			if !errdefs.IsUnavailable(err) || err.Error() != want {
				t.Errorf("Health with a %s token: %v; want %q of class ErrUnavailable", tt.name, err, want)
			}
			_, _, _, err = execute(t, rt, sandbox.ExecRequest{Argv: []string{"true"}})
			if err == nil || err.Error() != want {
				t.Errorf("Exec with a %s token: %v; want %q", tt.name, err, want)
			}
			if strings.Contains(fmtErr(err), token) {
				t.Errorf("the error shows the token: %v", err)
			}
		})
	}
}

func fmtErr(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestHealth(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		handler http.HandlerFunc
		want    cloudflare.Health
		err     string
	}{
		{
			name: "extensions",
			handler: func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.WriteString(w, `{"ok":true,"bridge":"hutch","version":"1.2.3","extensions":["stream","cancel","execId","argv","stdin","future"]}`)
			},
			want: cloudflare.Health{Bridge: "hutch", Version: "1.2.3", Extensions: []string{"stream", "cancel", "execId", "argv", "stdin", "future"}},
		},
		{name: "plain_text", handler: func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "OK") }},
		{name: "empty_204", handler: func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }},
		{name: "other_json", handler: func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, `{"status":"up"}`) }},
		{
			name: "unhealthy",
			handler: func(w http.ResponseWriter, r *http.Request) {
				writeJSON(w, 503, map[string]string{"error": "no sandboxes left"})
			},
			err: "The bridge at URL is not healthy: no sandboxes left",
		},
		{
			name:    "not_ok",
			handler: func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, `{"ok":false}`) },
			err:     `The bridge at URL is not healthy: it answered "ok": false`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := &fakeBridge{health: tt.handler}
			srv, rt := startFake(t, f)
			h, err := rt.Health(t.Context())
			if tt.err != "" {
				want := strings.ReplaceAll(tt.err, "URL", srv.URL)
				if !errdefs.IsUnavailable(err) || err.Error() != want {
					t.Errorf("Health: %+v, %v; want %q of class ErrUnavailable", h, err, want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, h); diff != "" {
				t.Errorf("Health mismatch (-want +got):\n%s", diff)
			}
		})
	}
	t.Run("unreachable", func(t *testing.T) {
		t.Parallel()
		url := closedURL(t)
		rt, err := cloudflare.New(cloudflare.Config{SandboxID: "box", URL: url})
		if err != nil {
			t.Fatal(err)
		}
		rt.SetTimings(time.Second, []time.Duration{time.Millisecond})
		_, err = rt.Health(t.Context())
		if want := "The bridge at " + url + " is not reachable: "; !errdefs.IsUnavailable(err) || !strings.HasPrefix(fmtErr(err), want) {
			t.Errorf("Health of a closed port: %v; want ErrUnavailable starting %q", err, want)
		}
	})
}

// TestHealth_Cached: the health answer serves every command until a
// connection fails.
func TestHealth_Cached(t *testing.T) {
	t.Parallel()
	f := &fakeBridge{extensions: allExtensions}
	f.exec = func(w http.ResponseWriter, r *http.Request, req protocol.ExecRequest) {
		frames(w)(protocol.Frame{Exit: &protocol.Exit{}})
	}
	_, rt := startFake(t, f)
	for range 3 {
		if _, _, _, err := execute(t, rt, sandbox.ExecRequest{Argv: []string{"true"}}); err != nil {
			t.Fatal(err)
		}
	}
	if n := f.healthHits.Load(); n != 1 {
		t.Errorf("three commands made %d health checks, want 1", n)
	}
}

func TestExec_StdinTooLarge(t *testing.T) {
	t.Parallel()
	f := &fakeBridge{extensions: allExtensions}
	f.exec = func(w http.ResponseWriter, r *http.Request, req protocol.ExecRequest) {
		frames(w)(protocol.Frame{Exit: &protocol.Exit{}})
	}
	_, rt := startFake(t, f)
	_, _, _, err := execute(t, rt, sandbox.ExecRequest{Argv: []string{"cat"}, Stdin: io.LimitReader(zeros{}, cloudflare.MaxStdin+1)})
	if want := "Standard input is larger than 16 MiB, the most a command takes through a bridge"; !errdefs.IsInvalid(err) || fmtErr(err) != want {
		t.Errorf("Exec with 16 MiB + 1 of stdin: %v; want %q of class ErrInvalid", err, want)
	}
	if execs, _ := f.recorded(); len(execs) != 0 {
		t.Errorf("the bridge got %d exec requests, want none", len(execs))
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// TestStream_ReusesConnection: warm commands do not dial each time; the
// end of a streamed answer is read so its connection goes back to the pool.
func TestStream_ReusesConnection(t *testing.T) {
	t.Parallel()
	f := &fakeBridge{extensions: allExtensions}
	f.exec = func(w http.ResponseWriter, r *http.Request, req protocol.ExecRequest) {
		frame := frames(w)
		frame(protocol.Frame{Stdout: []byte("x")})
		frame(protocol.Frame{Exit: &protocol.Exit{}})
	}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	tr := newRecordingTransport(srv)
	rt, err := cloudflare.New(cloudflare.Config{SandboxID: "box", URL: srv.URL, HTTPClient: &http.Client{Transport: tr}})
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		if _, _, _, err := execute(t, rt, sandbox.ExecRequest{Argv: []string{"true"}}); err != nil {
			t.Fatal(err)
		}
	}
	if n := tr.dials.Load(); n != 1 {
		t.Errorf("a health check and five commands dialled %d times, want 1", n)
	}
}
