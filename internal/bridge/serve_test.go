package bridge_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/internal/bridge"
	"github.com/hutchsandbox/hutch/internal/bridge/protocol"
	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/testenv"
)

// served is a bridge run by Serve on loopback.
type served struct {
	fixture
	out    *logBuffer
	stop   context.CancelFunc
	result chan error
}

// serve runs Serve in host mode (shared door) with o's listen, TLS and
// grace, and waits until it answers.
func serve(t *testing.T, o bridge.ServeOptions) *served {
	t.Helper()
	f := hostFixture(t) // for its service; its httptest server goes unused
	s := &served{fixture: *f, out: &logBuffer{}, result: make(chan error, 1)}
	o.Options = bridge.Options{Service: f.svc, Mode: f.mode, Token: testToken, Version: "test", Log: debugLogger(f.logs)}
	o.Listen = "127.0.0.1:0"
	o.TokenFrom = "$HUTCH_BRIDGE_TOKEN"
	o.Out = s.out
	ready := make(chan string, 1)
	o.Ready = func(url string) { ready <- url }
	ctx, stop := context.WithCancel(context.Background())
	s.stop = stop
	go func() { s.result <- bridge.Serve(ctx, o) }()
	t.Cleanup(func() {
		stop()
		select {
		case err := <-s.result:
			if err != nil {
				t.Logf("Serve returned %v", err)
			}
		case <-time.After(hangGuard):
			t.Error("Serve did not return")
		}
	})
	select {
	case s.url = <-ready:
	case err := <-s.result:
		t.Fatalf("Serve: %v", err)
	case <-time.After(hangGuard):
		t.Fatal("Serve never became ready")
	}
	// Requests of the fixture's helpers go to Serve's listener.
	s.client = &http.Client{Transport: &http.Transport{}}
	return s
}

// wait returns what Serve returned.
func (s *served) wait(t *testing.T) error {
	t.Helper()
	select {
	case err := <-s.result:
		s.result <- err // for the cleanup
		return err
	case <-time.After(hangGuard):
		t.Fatal("Serve did not return")
		return nil
	}
}

// TestServe_GraceLetsCommandsFinish: at shutdown, new connections are
// refused while a running command finishes and is answered in full.
func TestServe_GraceLetsCommandsFinish(t *testing.T) {
	s := serve(t, bridge.ServeOptions{Grace: hangGuard})
	if got, want := s.out.String(), "hutch bridge: serving host on "+s.url+" (token in $HUTCH_BRIDGE_TOKEN)\n"; got != want {
		t.Errorf("banner %q, want %q", got, want)
	}
	if !regexp.MustCompile(`^http://127\.0\.0\.1:\d+$`).MatchString(s.url) {
		t.Errorf("URL %q", s.url)
	}
	st := s.openStream(protocol.ExecRequest{SandboxID: "grace", Command: "echo started; while [ ! -e go ]; do sleep 0.02; done; echo finished"})
	st.untilStdout()
	s.stop()
	addr := strings.TrimPrefix(s.url, "http://")
	waitFor(t, "the listener is closed at shutdown", func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			_ = c.Close()
		}
		return err != nil
	})
	if err := os.WriteFile(filepath.Join(s.officeDir("grace"), "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	out, _, exit := st.rest()
	if string(out) != "started\nfinished\n" || exit.Code != 0 {
		t.Errorf("the command running at shutdown: %q, %+v; want it finished", out, exit)
	}
	if err := s.wait(t); err != nil {
		t.Errorf("Serve returned %v, want nil", err)
	}
}

// TestServe_GraceOverKills: what still runs when the grace period ends
// is killed, with every process it started, and Serve returns nil.
func TestServe_GraceOverKills(t *testing.T) {
	s := serve(t, bridge.ServeOptions{Grace: 50 * time.Millisecond})
	st := s.openStream(protocol.ExecRequest{SandboxID: "grace", Command: "sleep 300 & echo $!; wait"})
	child := pidOf(t, st.untilStdout())
	s.stop()
	if err := s.wait(t); err != nil {
		t.Errorf("Serve returned %v, want nil", err)
	}
	waitGone(t, child)
}

func TestServe_TLS(t *testing.T) {
	dir := t.TempDir()
	cert, key, pool := testenv.SelfSigned(t, dir)
	s := serve(t, bridge.ServeOptions{TLSCert: cert, TLSKey: key})
	if !strings.HasPrefix(s.url, "https://127.0.0.1:") || !strings.Contains(s.out.String(), " on "+s.url+" ") {
		t.Fatalf("URL %q, banner %q; want https", s.url, s.out.String())
	}
	cl := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true}}
	req, _ := http.NewRequest(http.MethodPost, s.url+"/exec", strings.NewReader(`{"sandboxId":"tls","command":"echo over tls"}`))
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := cl.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	var res protocol.ExecResponse
	if err := json.NewDecoder(resp.Body).Decode(&res); err != nil || res.Stdout != "over tls\n" {
		t.Errorf("exec over TLS: %+v, %v", res, err)
	}
	if resp.ProtoMajor != 2 {
		t.Errorf("protocol %s; want HTTP/2 over TLS", resp.Proto)
	}
}

func TestServe_Refuses(t *testing.T) {
	svc := newService(t, &logBuffer{}, nil)
	base := bridge.Options{Service: svc, Mode: sandbox.Mode{Kind: sandbox.KindHost}, Token: testToken}
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.pem")
	for _, tt := range []struct {
		name string
		o    bridge.ServeOptions
		want string
	}{
		{"no_listen", bridge.ServeOptions{Options: base}, "Give the address to listen on, e.g. --listen 127.0.0.1:7879"},
		{"cert_alone", bridge.ServeOptions{Options: base, Listen: "127.0.0.1:0", TLSCert: missing}, "Give --tls-cert and --tls-key together, or neither"},
		{"cert_missing", bridge.ServeOptions{Options: base, Listen: "127.0.0.1:0", TLSCert: missing, TLSKey: missing}, "Cannot load the TLS certificate " + missing},
		{"bad_address", bridge.ServeOptions{Options: base, Listen: "256.0.0.1:1"}, "Cannot listen on 256.0.0.1:1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := bridge.Serve(context.Background(), tt.o)
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
				t.Errorf("Serve: %v; want %q", err, tt.want)
			}
		})
	}
}

func TestLoadOrCreateToken(t *testing.T) {
	path := filepath.Join(t.TempDir(), bridge.TokenName)
	tok, err := bridge.LoadOrCreateToken(path)
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(tok) {
		t.Errorf("token %q; want 64 hex digits", tok)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("token file: %v, %v; want mode 0600", fi.Mode(), err)
	}
	if again, err := bridge.LoadOrCreateToken(path); err != nil || again != tok {
		t.Errorf("second load: %q, %v; want the same token", again, err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := bridge.LoadOrCreateToken(path); !errdefs.IsFailedPrecondition(err) || !strings.Contains(err.Error(), "chmod 600 "+path) {
		t.Errorf("a token file others can read: %v; want a refusal saying chmod 600", err)
	}
}
