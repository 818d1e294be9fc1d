package bridge_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/internal/bridge"
	"github.com/hutchsandbox/hutch/internal/bridge/protocol"
	"github.com/hutchsandbox/hutch/internal/office"
	"github.com/hutchsandbox/hutch/internal/projection"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/service"
)

const testToken = "test-token-0123456789abcdef"

// hangGuard bounds every request of a test, so a bridge that never
// answers fails the test instead of hanging it. It is not a timing
// assertion: nothing here should take more than a few seconds.
const hangGuard = 2 * time.Minute

// logBuffer collects a test's log lines (of the service and the bridge).
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// fixture is a bridge over a service of its own, served by httptest.
type fixture struct {
	t    *testing.T
	svc  *service.Service
	mode sandbox.Mode
	logs *logBuffer
	// url and client reach the bridge.
	url    string
	client *http.Client
}

// newService returns a service over a temp state dir that logs at debug
// level into logs. getenv may be nil.
func newService(t *testing.T, logs *logBuffer, getenv func(string) string) *service.Service {
	t.Helper()
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	layout, err := service.ResolveLayout(service.LayoutOptions{StateDir: filepath.Join(t.TempDir(), "state"), Getenv: getenv})
	if err != nil {
		t.Fatal(err)
	}
	svc := service.New(layout, debugLogger(logs))
	svc.SetGetenv(getenv)
	t.Cleanup(func() { _ = svc.Close() })
	return svc
}

func debugLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// hostFixture is a bridge in host mode whose conversations may use the
// shared workspace (host mode refuses an isolated office).
func hostFixture(t *testing.T) *fixture {
	t.Helper()
	f := newFixture(t, sandbox.Mode{Kind: sandbox.KindHost}, nil)
	shared, err := projection.ParseDoorWord("shared")
	if err != nil {
		t.Fatal(err)
	}
	if err := f.svc.SetGlobalDoor(t.Context(), shared); err != nil {
		t.Fatal(err)
	}
	return f
}

// newFixture serves a bridge in mode over svc (a new one when nil).
func newFixture(t *testing.T, mode sandbox.Mode, svc *service.Service) *fixture {
	t.Helper()
	logs := &logBuffer{}
	if svc == nil {
		svc = newService(t, logs, nil)
	}
	h, err := bridge.New(bridge.Options{Service: svc, Mode: mode, Token: testToken, Version: "test", Log: debugLogger(logs)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &fixture{t: t, svc: svc, mode: mode, logs: logs, url: srv.URL, client: srv.Client()}
}

// officeDir is where sandbox id id's office is on the host.
func (f *fixture) officeDir(id string) string {
	f.t.Helper()
	addr, err := office.NewAddress("web", id)
	if err != nil {
		f.t.Fatal(err)
	}
	return office.Dir(f.svc.Layout().Workspace, addr.Key())
}

// do sends a request with the token (auth "" sends none) and returns the
// status and body.
func (f *fixture) do(method, path, body, auth string) (int, string) {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, f.url+path, strings.NewReader(body))
	if err != nil {
		f.t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := f.client.Do(req)
	if err != nil {
		f.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		f.t.Fatalf("%s %s: reading the body: %v", method, path, err)
	}
	if resp.StatusCode != http.StatusOK {
		if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
			f.t.Errorf("%s %s: status %d with Content-Type %q, want application/json", method, path, resp.StatusCode, ct)
		}
		var eb protocol.ErrorBody
		if err := json.Unmarshal(data, &eb); err != nil || eb.Error == "" {
			f.t.Errorf("%s %s: status %d with body %q; want {\"error\": ...}", method, path, resp.StatusCode, data)
		}
	}
	return resp.StatusCode, string(data)
}

// post sends v as JSON with the token.
func (f *fixture) post(path string, v any) (int, string) {
	f.t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		f.t.Fatal(err)
	}
	return f.do(http.MethodPost, path, string(b), "Bearer "+testToken)
}

// exec runs a base exec that must answer 200.
func (f *fixture) exec(req protocol.ExecRequest) protocol.ExecResponse {
	f.t.Helper()
	code, body := f.post("/exec", req)
	if code != http.StatusOK {
		f.t.Fatalf("exec %+v: status %d, body %s", req, code, body)
	}
	var res protocol.ExecResponse
	if err := json.Unmarshal([]byte(body), &res); err != nil {
		f.t.Fatalf("exec answer %q: %v", body, err)
	}
	return res
}

// errorOf returns the error text of an error body.
func errorOf(t *testing.T, body string) string {
	t.Helper()
	var eb protocol.ErrorBody
	if err := json.Unmarshal([]byte(body), &eb); err != nil {
		t.Fatalf("error body %q: %v", body, err)
	}
	return eb.Error
}

// stream is a streamed exec being read frame by frame.
type stream struct {
	t      *testing.T
	resp   *http.Response
	sc     *bufio.Scanner
	cancel context.CancelFunc
	frames []protocol.Frame
}

// openStream starts a streamed exec and checks its 200 and content type.
func (f *fixture) openStream(req protocol.ExecRequest) *stream {
	f.t.Helper()
	req.Stream = true
	b, err := json.Marshal(req)
	if err != nil {
		f.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, f.url+"/exec", bytes.NewReader(b))
	if err != nil {
		cancel()
		f.t.Fatal(err)
	}
	hr.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := f.client.Do(hr)
	if err != nil {
		cancel()
		f.t.Fatalf("streamed exec: %v", err)
	}
	s := &stream{t: f.t, resp: resp, cancel: cancel, sc: bufio.NewScanner(resp.Body)}
	s.sc.Buffer(make([]byte, 64<<10), 16<<20)
	f.t.Cleanup(s.close)
	if resp.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(resp.Body)
		f.t.Fatalf("streamed exec: status %d, body %s", resp.StatusCode, data)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/x-ndjson" {
		f.t.Errorf("streamed exec: Content-Type %q, want application/x-ndjson", ct)
	}
	return s
}

// close closes the connection (which cancels a running command).
func (s *stream) close() {
	s.cancel()
	_ = s.resp.Body.Close()
}

// next reads one frame; ok is false at the end of the stream. Every line
// must be one JSON object with exactly one field.
func (s *stream) next() (protocol.Frame, bool) {
	s.t.Helper()
	if !s.sc.Scan() {
		if err := s.sc.Err(); err != nil {
			s.t.Fatalf("reading the stream: %v", err)
		}
		return protocol.Frame{}, false
	}
	line := s.sc.Bytes()
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(line, &raw); err != nil || len(raw) != 1 {
		s.t.Fatalf("frame %q: want one JSON object with one field (%v)", line, err)
	}
	var fr protocol.Frame
	if err := json.Unmarshal(line, &fr); err != nil {
		s.t.Fatalf("frame %q: %v", line, err)
	}
	s.frames = append(s.frames, fr)
	return fr, true
}

// rest reads the stream to its end and returns stdout, stderr and the
// exit line, checking that the exit line is last.
func (s *stream) rest() (stdout, stderr []byte, exit protocol.Exit) {
	s.t.Helper()
	for {
		if _, ok := s.next(); !ok {
			break
		}
	}
	var got *protocol.Exit
	for i, fr := range s.frames {
		stdout = append(stdout, fr.Stdout...)
		stderr = append(stderr, fr.Stderr...)
		if fr.Exit != nil {
			if i != len(s.frames)-1 {
				s.t.Errorf("exit line is frame %d of %d; it must be last", i+1, len(s.frames))
			}
			got = fr.Exit
		}
	}
	if got == nil {
		s.t.Fatalf("the stream ended without an exit line (frames %+v)", s.frames)
	}
	return stdout, stderr, *got
}

// untilStdout reads frames until stdout holds a complete line, and
// returns the stdout read so far.
func (s *stream) untilStdout() string {
	s.t.Helper()
	var out []byte
	for !bytes.Contains(out, []byte("\n")) {
		fr, ok := s.next()
		if !ok {
			s.t.Fatalf("the stream ended before a line of stdout (frames %+v)", s.frames)
		}
		if fr.Exit != nil {
			s.t.Fatalf("the command ended before a line of stdout: %+v", *fr.Exit)
		}
		out = append(out, fr.Stdout...)
	}
	return string(out)
}

// waitGone waits until process pid has ended (gone, or a zombie nobody
// reaped yet), failing the test when it still runs after the guard.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(hangGuard)
	for {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return
		}
		// The state follows the ") " that ends the command name.
		if i := bytes.LastIndex(data, []byte(") ")); i >= 0 && i+2 < len(data) && data[i+2] == 'Z' {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d still runs: %s", pid, data)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// pidOf parses the first line of out as a process id.
func pidOf(t *testing.T, out string) int {
	t.Helper()
	line, _, _ := strings.Cut(out, "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil || pid <= 1 {
		t.Fatalf("no pid in %q", out)
	}
	return pid
}

// waitFor polls cond until it holds, failing after the guard.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(hangGuard)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: still not the case after %s", what, hangGuard)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// newExecID returns a fresh execId.
func newExecID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
