package egress_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/internal/egress"
	"github.com/hutchsandbox/hutch/internal/netpolicy"
)

const office = "v1-test-egress-0123456789abcdef"

// Values that must never reach the log.
const (
	secretQuery  = "sekrit-query-value"
	secretHeader = "sekrit-header-value"
	secretProxy  = "sekrit-proxy-password"
)

// lockedBuffer collects log output written from the proxy's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// harness is one proxy serving on a unix socket, as behind QEMU's guestfwd.
type harness struct {
	sock   string
	logs   *lockedBuffer
	dials  atomic.Int32
	cancel context.CancelFunc
	served chan error
}

// routes makes a Dial that maps host:port as the client named it to a
// local address, counting every call.
func (h *harness) routes(m map[string]string) func(context.Context, string, string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		h.dials.Add(1)
		to, ok := m[addr]
		if !ok {
			return nil, fmt.Errorf("test dialer: no route to %s", addr)
		}
		var d net.Dialer
		return d.DialContext(ctx, network, to)
	}
}

func mustAllow(t *testing.T, entries ...string) func() netpolicy.Policy {
	t.Helper()
	a, err := netpolicy.ParseAllowlist(entries)
	if err != nil {
		t.Fatal(err)
	}
	return func() netpolicy.Policy { return netpolicy.Policy{Mode: netpolicy.ModeAllowlist, Allow: a} }
}

// start serves p until the test ends. setup may fill p's fields using the
// harness (its Dial counter) before Serve starts.
func start(t *testing.T, setup func(h *harness, p *egress.Proxy)) *harness {
	t.Helper()
	h := &harness{logs: &lockedBuffer{}, served: make(chan error, 1)}
	p := &egress.Proxy{
		Office: office,
		Log:    slog.New(slog.NewTextHandler(h.logs, nil)),
	}
	setup(h, p)
	h.sock = filepath.Join(t.TempDir(), "egress.sock")
	l, err := net.Listen("unix", h.sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	go func() { h.served <- p.Serve(ctx, l) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-h.served:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("Serve did not return after cancel")
		}
	})
	return h
}

func (h *harness) dial(t *testing.T) net.Conn {
	t.Helper()
	c, err := net.Dial("unix", h.sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	return c
}

// client goes through the proxy like a guest with HTTP(S)_PROXY set, with
// proxy credentials so the test can check they are neither forwarded nor
// logged.
func (h *harness) client(tlsConfig *tls.Config) *http.Client {
	return &http.Client{
		Timeout: 10 * time.Second,
		Transport: &http.Transport{
			Proxy: http.ProxyURL(&url.URL{
				Scheme: "http",
				Host:   "10.0.2.100:3128",
				User:   url.UserPassword("guest", secretProxy),
			}),
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "unix", h.sock)
			},
			TLSClientConfig:   tlsConfig,
			DisableKeepAlives: true,
		},
	}
}

// roundTrip sends raw request text on a new connection and reads the reply.
func (h *harness) roundTrip(t *testing.T, raw string) (*http.Response, string, net.Conn, *bufio.Reader) {
	t.Helper()
	c := h.dial(t)
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	method, _, _ := strings.Cut(raw, " ")
	res, err := http.ReadResponse(br, &http.Request{Method: method})
	if err != nil {
		t.Fatalf("reading the reply to %q: %v", raw, err)
	}
	if res.StatusCode == http.StatusOK && method == http.MethodConnect {
		return res, "", c, br
	}
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res, string(body), c, br
}

func connectReq(target, early string) string {
	return "CONNECT " + target + " HTTP/1.1\r\nHost: " + target + "\r\n\r\n" + early
}

// logLines returns the log lines with msg.
func logLines(logs, msg string) []string {
	var out []string
	for l := range strings.Lines(logs) {
		if strings.Contains(l, `msg="`+msg+`"`) {
			out = append(out, l)
		}
	}
	return out
}

func assertNoSecrets(t *testing.T, logs string) {
	t.Helper()
	for _, s := range []string{secretQuery, secretHeader, secretProxy, "/private/path", "Authorization", "Bearer"} {
		if strings.Contains(logs, s) {
			t.Errorf("log contains %q:\n%s", s, logs)
		}
	}
}

// echoServer accepts TCP connections, echoes them, and reports each one's
// end on ended.
func echoServer(t *testing.T) (addr string, ended chan struct{}) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	ended = make(chan struct{}, 16)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				_, _ = io.Copy(c, c)
				_ = c.Close()
				ended <- struct{}{}
			}()
		}
	}()
	return l.Addr().String(), ended
}

func TestProxy_ConnectAllowed(t *testing.T) {
	origin := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+secretHeader || r.URL.Query().Get("token") != secretQuery {
			http.Error(w, "lost the request's credentials", http.StatusBadRequest)
			return
		}
		_, _ = io.WriteString(w, "hello through the tunnel")
	}))
	defer origin.Close()
	h := start(t, func(h *harness, p *egress.Proxy) {
		p.Policy = mustAllow(t, "origin.test")
		p.Dial = h.routes(map[string]string{"origin.test:443": origin.Listener.Addr().String()})
	})

	pool := x509.NewCertPool()
	pool.AddCert(origin.Certificate())
	// httptest's certificate names example.com; the TLS handshake runs
	// end to end between the client and the origin, through the tunnel.
	c := h.client(&tls.Config{RootCAs: pool, ServerName: "example.com"})
	req, _ := http.NewRequest("GET", "https://origin.test/private/path?token="+secretQuery, nil)
	req.Header.Set("Authorization", "Bearer "+secretHeader)
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	_ = res.Body.Close()
	if res.StatusCode != http.StatusOK || string(body) != "hello through the tunnel" {
		t.Fatalf("GET through CONNECT: %s %q", res.Status, body)
	}

	logs := h.logs.String()
	allowed := logLines(logs, "egress allowed")
	if len(allowed) != 1 {
		t.Fatalf("want one allowed line, got:\n%s", logs)
	}
	for _, want := range []string{"office=" + office, "method=CONNECT", "host=origin.test", "port=443"} {
		if !strings.Contains(allowed[0], want) {
			t.Errorf("allowed line %q lacks %q", allowed[0], want)
		}
	}
	assertNoSecrets(t, logs)
}

// TestProxy_ConnectEarlyDataAndHalfClose sends the first tunnel bytes in
// the same write as the CONNECT (they sit in the server's read buffer) and
// then half-closes: the reply must still arrive.
func TestProxy_ConnectEarlyDataAndHalfClose(t *testing.T) {
	echo, ended := echoServer(t)
	h := start(t, func(h *harness, p *egress.Proxy) {
		p.Policy = mustAllow(t, "echo.test:7")
		p.Dial = h.routes(map[string]string{"echo.test:7": echo})
	})
	res, _, c, br := h.roundTrip(t, connectReq("echo.test:7", "ping"))
	if res.StatusCode != http.StatusOK {
		t.Fatalf("CONNECT: %s", res.Status)
	}
	if err := c.(*net.UnixConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(br)
	if err != nil {
		t.Fatalf("reading the tunnel: %v", err)
	}
	if string(got) != "ping" {
		t.Errorf("tunnel echoed %q, want %q", got, "ping")
	}
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Error("the upstream connection was not closed")
	}
}

func TestProxy_ConnectDenied(t *testing.T) {
	var deniedCalls atomic.Int32
	h := start(t, func(h *harness, p *egress.Proxy) {
		p.Policy = mustAllow(t, "origin.test", "*.npmjs.org")
		p.Dial = h.routes(nil)
		p.Denied = func(egress.Denial) { deniedCalls.Add(1) }
	})
	testCases := []struct{ name, target string }{
		{"unlisted", "evil.test:443"},
		{"lookalike", "evilorigin.test:443"},
		{"listed_as_prefix", "origin.test.evil.net:443"},
		{"wrong_port", "origin.test:22"},
		{"wildcard_apex", "npmjs.org:443"},
		{"ip_literal", "127.0.0.1:443"},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			res, body, _, _ := h.roundTrip(t, connectReq(tc.target, ""))
			if res.StatusCode != http.StatusForbidden {
				t.Fatalf("CONNECT %s: %s, want 403", tc.target, res.Status)
			}
			if want := tc.target + " is not in sandbox.network.allow"; !strings.Contains(body, want) {
				t.Errorf("body %q, want it to contain %q", body, want)
			}
		})
	}
	if n := h.dials.Load(); n != 0 {
		t.Errorf("Dial called %d times for denied hosts, want 0", n)
	}
	denied := logLines(h.logs.String(), "egress denied")
	if len(denied) != len(testCases) {
		t.Fatalf("want %d denied lines, got:\n%s", len(testCases), h.logs.String())
	}
	if n := deniedCalls.Load(); int(n) != len(testCases) {
		t.Errorf("Denied called %d times, want %d (once per refusal)", n, len(testCases))
	}
	if !strings.Contains(denied[0], "host=evil.test") || !strings.Contains(denied[0], "port=443") ||
		!strings.Contains(denied[0], "method=CONNECT") || !strings.Contains(denied[0], "office="+office) {
		t.Errorf("denied line %q lacks a field", denied[0])
	}
}

func TestProxy_HTTPAllowed(t *testing.T) {
	type seen struct{ host, query, auth, proxyAuth, proxyConn, xff string }
	got := make(chan seen, 1)
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- seen{r.Host, r.URL.RawQuery, r.Header.Get("Authorization"), r.Header.Get("Proxy-Authorization"),
			r.Header.Get("Proxy-Connection"), r.Header.Get("X-Forwarded-For")}
		w.Header().Set("X-Origin", "yes")
		_, _ = io.WriteString(w, "plain hello")
	}))
	defer origin.Close()
	h := start(t, func(h *harness, p *egress.Proxy) {
		p.Policy = mustAllow(t, "origin.test")
		p.Dial = h.routes(map[string]string{"origin.test:80": origin.Listener.Addr().String()})
	})

	req, _ := http.NewRequest("GET", "http://origin.test/private/path?token="+secretQuery+";x=y", nil)
	req.Header.Set("Authorization", "Bearer "+secretHeader)
	req.Header.Set("Proxy-Connection", "keep-alive")
	req.Header.Set("X-Forwarded-For", "1.2.3.4")
	res, err := h.client(nil).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	_ = res.Body.Close()
	if res.StatusCode != http.StatusOK || string(body) != "plain hello" || res.Header.Get("X-Origin") != "yes" {
		t.Fatalf("GET via proxy: %s %q %v", res.Status, body, res.Header)
	}
	s := <-got
	want := seen{host: "origin.test", query: "token=" + secretQuery + ";x=y", auth: "Bearer " + secretHeader}
	if s != want {
		t.Errorf("origin saw %+v, want %+v", s, want)
	}

	logs := h.logs.String()
	allowed := logLines(logs, "egress allowed")
	if len(allowed) != 1 {
		t.Fatalf("want one allowed line, got:\n%s", logs)
	}
	for _, want := range []string{"office=" + office, "method=GET", "host=origin.test", "port=80"} {
		if !strings.Contains(allowed[0], want) {
			t.Errorf("allowed line %q lacks %q", allowed[0], want)
		}
	}
	assertNoSecrets(t, logs)
}

func TestProxy_HTTPDenied(t *testing.T) {
	h := start(t, func(h *harness, p *egress.Proxy) {
		p.Policy = mustAllow(t, "origin.test")
		p.Dial = h.routes(nil)
	})
	req, _ := http.NewRequest("POST", "http://evil.test/private/path?token="+secretQuery, strings.NewReader("data"))
	req.Header.Set("Authorization", "Bearer "+secretHeader)
	res, err := h.client(nil).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	_ = res.Body.Close()
	if res.StatusCode != http.StatusForbidden {
		t.Fatalf("POST to an unlisted host: %s, want 403", res.Status)
	}
	if want := "evil.test:80 is not in sandbox.network.allow"; !strings.Contains(string(body), want) {
		t.Errorf("body %q, want it to contain %q", body, want)
	}
	if n := h.dials.Load(); n != 0 {
		t.Errorf("Dial called %d times, want 0", n)
	}
	logs := h.logs.String()
	denied := logLines(logs, "egress denied")
	if len(denied) != 1 || !strings.Contains(denied[0], "method=POST") || !strings.Contains(denied[0], "host=evil.test") {
		t.Errorf("want one denied line for POST evil.test, got:\n%s", logs)
	}
	assertNoSecrets(t, logs)
}

func TestProxy_BadRequest(t *testing.T) {
	h := start(t, func(h *harness, p *egress.Proxy) {
		p.Policy = mustAllow(t, "origin.test")
		p.Dial = h.routes(nil)
	})
	testCases := []struct{ name, raw string }{
		{"origin_form", "GET /private/path?token=" + secretQuery + " HTTP/1.1\r\nHost: 10.0.2.100:3128\r\n\r\n"},
		{"connect_without_port", "CONNECT origin.test HTTP/1.1\r\nHost: origin.test\r\n\r\n"},
		{"connect_port_zero", "CONNECT origin.test:0 HTTP/1.1\r\nHost: origin.test:0\r\n\r\n"},
		{"connect_path", "CONNECT /x HTTP/1.1\r\nHost: origin.test\r\n\r\n"},
		{"https_absolute", "GET https://origin.test/ HTTP/1.1\r\nHost: origin.test\r\n\r\n"},
		{"other_scheme", "GET ftp://origin.test/ HTTP/1.1\r\nHost: origin.test\r\n\r\n"},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			res, body, _, _ := h.roundTrip(t, tc.raw)
			if res.StatusCode != http.StatusBadRequest {
				t.Fatalf("%q: %s %q, want 400", tc.raw, res.Status, body)
			}
			if !strings.HasPrefix(body, "hutch egress: ") {
				t.Errorf("body %q does not say who refused", body)
			}
		})
	}
	if n := h.dials.Load(); n != 0 {
		t.Errorf("Dial called %d times, want 0", n)
	}
	logs := h.logs.String()
	if got := len(logLines(logs, "egress denied")); got != len(testCases) {
		t.Errorf("want %d denied lines, got:\n%s", len(testCases), logs)
	}
	assertNoSecrets(t, logs)
}

// TestProxy_InternalAddressGuard uses the real resolver: "localhost" is
// allowed by name, but it resolves to loopback, which stays unreachable
// until the address itself is listed.
func TestProxy_InternalAddressGuard(t *testing.T) {
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "host service")
	}))
	defer origin.Close()
	_, port, _ := net.SplitHostPort(origin.Listener.Addr().String())
	name := "localhost:" + port

	t.Run("name_only", func(t *testing.T) {
		var deniedCalls atomic.Int32
		h := start(t, func(h *harness, p *egress.Proxy) {
			p.Policy = mustAllow(t, name)
			p.Denied = func(egress.Denial) { deniedCalls.Add(1) }
		})
		res, body, _, _ := h.roundTrip(t, connectReq(name, ""))
		if res.StatusCode != http.StatusForbidden || !strings.Contains(body, "internal address") {
			t.Errorf("CONNECT %s: %s %q, want 403 naming an internal address", name, res.Status, body)
		}
		if !strings.Contains(body, "add 127.0.0.1:"+port+" to sandbox.network.allow") {
			t.Errorf("body %q does not say what to list", body)
		}
		res, err := h.client(nil).Get("http://" + name + "/")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		_ = res.Body.Close()
		if res.StatusCode != http.StatusForbidden || !strings.Contains(string(b), "internal address") {
			t.Errorf("GET http://%s/: %s %q, want 403 naming an internal address", name, res.Status, b)
		}
		logs := h.logs.String()
		if denied := logLines(logs, "egress denied"); len(denied) != 2 || !strings.Contains(denied[0], "resolves to internal address") {
			t.Errorf("want two denied lines naming the internal address, got:\n%s", logs)
		}
		if n := deniedCalls.Load(); n != 2 {
			t.Errorf("Denied called %d times, want 2", n)
		}
		if allowed := logLines(logs, "egress allowed"); len(allowed) != 0 {
			t.Errorf("want no allowed line, got:\n%s", logs)
		}
	})

	t.Run("address_listed", func(t *testing.T) {
		h := start(t, func(h *harness, p *egress.Proxy) { p.Policy = mustAllow(t, name, "127.0.0.1:"+port) })
		res, _, _, _ := h.roundTrip(t, connectReq(name, ""))
		if res.StatusCode != http.StatusOK {
			t.Errorf("CONNECT %s with 127.0.0.1:%s listed: %s, want 200", name, port, res.Status)
		}
		res, err := h.client(nil).Get("http://" + name + "/")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		_ = res.Body.Close()
		if res.StatusCode != http.StatusOK || string(b) != "host service" {
			t.Errorf("GET http://%s/: %s %q, want 200", name, res.Status, b)
		}
	})
}

func TestProxy_UpstreamUnreachable(t *testing.T) {
	h := start(t, func(h *harness, p *egress.Proxy) {
		p.Policy = mustAllow(t, "down.test")
		p.Dial = h.routes(nil)
	})
	res, body, _, _ := h.roundTrip(t, connectReq("down.test:443", ""))
	if res.StatusCode != http.StatusBadGateway || !strings.Contains(body, "cannot reach down.test:443") {
		t.Errorf("CONNECT to a host that does not answer: %s %q, want 502", res.Status, body)
	}
	res, err := h.client(nil).Get("http://down.test/private/path?token=" + secretQuery)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	_ = res.Body.Close()
	if res.StatusCode != http.StatusBadGateway || !strings.Contains(string(b), "cannot reach down.test:80") {
		t.Errorf("GET a host that does not answer: %s %q, want 502", res.Status, b)
	}
	logs := h.logs.String()
	if n := len(logLines(logs, "egress allowed")); n != 2 {
		t.Errorf("want two allowed lines (the list allowed, the dial failed), got:\n%s", logs)
	}
	assertNoSecrets(t, logs)
}

func TestProxy_TunnelLimit(t *testing.T) {
	echo, _ := echoServer(t)
	h := start(t, func(h *harness, p *egress.Proxy) {
		p.Policy = mustAllow(t, "echo.test:7")
		p.Dial = h.routes(map[string]string{"echo.test:7": echo})
		p.MaxTunnels = 1
	})
	res, _, first, _ := h.roundTrip(t, connectReq("echo.test:7", ""))
	if res.StatusCode != http.StatusOK {
		t.Fatalf("first CONNECT: %s", res.Status)
	}
	res, body, _, _ := h.roundTrip(t, connectReq("echo.test:7", ""))
	if res.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("second CONNECT over the limit: %s %q, want 503", res.Status, body)
	}
	if denied := logLines(h.logs.String(), "egress denied"); len(denied) != 1 || !strings.Contains(denied[0], "too many open connections") {
		t.Errorf("want one denied line for the limit, got:\n%s", h.logs.String())
	}

	// Closing the first tunnel frees its slot.
	_ = first.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		res, _, _, _ := h.roundTrip(t, connectReq("echo.test:7", ""))
		if res.StatusCode == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("slot not freed after the first tunnel closed: %s", res.Status)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestProxy_TunnelIdleTimeout(t *testing.T) {
	echo, ended := echoServer(t)
	h := start(t, func(h *harness, p *egress.Proxy) {
		p.Policy = mustAllow(t, "echo.test:7")
		p.Dial = h.routes(map[string]string{"echo.test:7": echo})
		p.TunnelIdleTimeout = 50 * time.Millisecond
	})
	res, _, _, br := h.roundTrip(t, connectReq("echo.test:7", ""))
	if res.StatusCode != http.StatusOK {
		t.Fatalf("CONNECT: %s", res.Status)
	}
	// Nothing is sent: the proxy must close the tunnel (the read gets EOF
	// well before the harness's 10 s deadline would end it).
	if _, err := br.ReadByte(); !errors.Is(err, io.EOF) {
		t.Fatalf("read on an idle tunnel: %v, want EOF", err)
	}
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Error("the upstream side of the idle tunnel was not closed")
	}
}

func TestProxy_CancelClosesEverything(t *testing.T) {
	echo, ended := echoServer(t)
	h := start(t, func(h *harness, p *egress.Proxy) {
		p.Policy = mustAllow(t, "echo.test:7")
		p.Dial = h.routes(map[string]string{"echo.test:7": echo})
	})
	res, _, _, br := h.roundTrip(t, connectReq("echo.test:7", "ping"))
	if res.StatusCode != http.StatusOK {
		t.Fatalf("CONNECT: %s", res.Status)
	}
	buf := make([]byte, 4)
	if _, err := io.ReadFull(br, buf); err != nil || string(buf) != "ping" {
		t.Fatalf("tunnel echo: %q, %v", buf, err)
	}
	// An idle keep-alive connection that has sent nothing.
	idle := h.dial(t)

	h.cancel()
	select {
	case err := <-h.served:
		if err != nil {
			t.Errorf("Serve after cancel: %v, want nil", err)
		}
		h.served <- nil // for the harness's cleanup
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after cancel")
	}

	if _, err := br.ReadByte(); !errors.Is(err, io.EOF) {
		t.Errorf("read on the tunnel after cancel: %v, want EOF", err)
	}
	// EOF if the server had accepted it, a reset if it was still queued.
	if _, err := idle.Read(buf); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("read on an idle connection after cancel: %v, want it closed", err)
	}
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Error("the upstream side of the tunnel was not closed")
	}
	if c, err := net.Dial("unix", h.sock); err == nil {
		_ = c.Close()
		t.Error("the listener still accepts after cancel")
	}
}
