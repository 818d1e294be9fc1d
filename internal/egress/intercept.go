package egress

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"slices"
	"strings"
	"sync"
	"time"
)

// otherPortWait is how long a tunnel on a port no secret names waits for
// the guest's first byte before taking the protocol for one whose server
// speaks first (SSH, SMTP) and splicing.
const otherPortWait = time.Second

// tlsHandshakeRecord is the first byte of every TLS ClientHello.
const tlsHandshakeRecord = 0x16

// intercept decides whether a tunnel's guest side is TLS the proxy should
// terminate, and if so serves it until it ends and reports done. early
// holds the bytes the guest sent already; when the tunnel is not
// intercepted, rest is what the guest sent so far, for the caller to
// pass upstream before it splices.
func (s *server) intercept(ctx context.Context, guest net.Conn, early []byte, up net.Conn, host string, port int) (rest []byte, done bool) {
	if s.ca == nil {
		return early, false
	}
	secs := s.secrets()
	if len(secs) == 0 {
		return early, false
	}
	if len(early) == 0 {
		wait := otherPortWait
		if port == 443 || anyListed(secs, host, port) {
			wait = s.headerTimeout
		}
		b := make([]byte, 1)
		_ = guest.SetReadDeadline(time.Now().Add(wait))
		n, _ := guest.Read(b)
		_ = guest.SetReadDeadline(time.Time{})
		// Nothing in time (the server speaks first), or the guest closed:
		// splice, which passes on whatever comes next.
		if n == 0 {
			return nil, false
		}
		early = b
	}
	if early[0] != tlsHandshakeRecord {
		return early, false
	}
	_ = guest.SetReadDeadline(time.Now().Add(s.headerTimeout))
	protos, hello, ok := readClientHello(guest, early)
	_ = guest.SetReadDeadline(time.Time{})
	// Not a ClientHello after all, or one for a protocol other than
	// HTTP/1.1 (an h2-only gRPC client, a TLS-wrapped mail protocol that
	// names itself): a client that would fail the handshake here is
	// spliced instead, and no value could have gone its way anyway.
	if !ok || (len(protos) > 0 && !slices.Contains(protos, "http/1.1")) {
		return hello, false
	}
	s.serveTLS(ctx, &prefixConn{Conn: guest, prefix: hello}, up, host, port)
	_ = guest.Close()
	_ = up.Close()
	return nil, true
}

// errHelloRead ends the handshake readClientHello starts.
var errHelloRead = errors.New("client hello read")

// readClientHello reads the guest's TLS ClientHello (after early, the
// bytes read already) and returns the application protocols it offers
// (ALPN), every byte read, for the caller to replay, and whether a
// ClientHello was read. It runs a TLS server only as far as the hello,
// on a connection that records what it reads and discards what the
// server writes (the alert that ends the attempt).
func readClientHello(guest net.Conn, early []byte) (protos []string, read []byte, ok bool) {
	rc := &recordingConn{Conn: guest, prefix: early}
	_ = tls.Server(rc, &tls.Config{
		GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) {
			protos, ok = slices.Clone(h.SupportedProtos), true
			return nil, errHelloRead
		},
	}).Handshake()
	return protos, rc.read, ok
}

// recordingConn keeps every byte read through it and writes nothing.
type recordingConn struct {
	net.Conn
	prefix []byte
	read   []byte
}

func (c *recordingConn) Read(p []byte) (int, error) {
	var n int
	var err error
	if len(c.prefix) > 0 {
		n = copy(p, c.prefix)
		c.prefix = c.prefix[n:]
	} else {
		n, err = c.Conn.Read(p)
	}
	c.read = append(c.read, p[:n]...)
	return n, err
}

func (c *recordingConn) Write(p []byte) (int, error) { return len(p), nil }

// Close leaves the guest's connection open: the caller goes on with it.
func (c *recordingConn) Close() error { return nil }

func anyListed(secs []Secret, host string, port int) bool {
	for _, sec := range secs {
		if sec.Hosts.Allows(host, port) {
			return true
		}
	}
	return false
}

// prefixConn reads prefix before the connection's own bytes.
type prefixConn struct {
	net.Conn
	prefix []byte
}

func (c *prefixConn) Read(p []byte) (int, error) {
	if len(c.prefix) > 0 {
		n := copy(p, c.prefix)
		c.prefix = c.prefix[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}

// serveTLS terminates the guest's TLS with a certificate for host and
// serves the HTTP/1.1 requests inside, each guarded and forwarded to
// https://host:port. up, dialled already, carries the first upstream
// connection.
func (s *server) serveTLS(ctx context.Context, guest net.Conn, up net.Conn, host string, port int) {
	fail := func(stage string, err error) {
		s.log.LogAttrs(ctx, slog.LevelInfo, "egress interception failed",
			slog.String("office", s.office), slog.String("host", host), slog.Int("port", port),
			slog.String("stage", stage), slog.String("error", err.Error()))
	}
	leaf, err := s.ca.leaf(host)
	if err != nil {
		fail("certificate", err)
		return
	}
	tc := tls.Server(guest, &tls.Config{
		Certificates: []tls.Certificate{*leaf},
		// HTTP/1.1 only: each request is one unit to scan and forward.
		NextProtos: []string{"http/1.1"},
		MinVersion: tls.VersionTLS12,
	})
	hctx, cancel := context.WithTimeout(ctx, s.headerTimeout)
	err = tc.HandshakeContext(hctx)
	cancel()
	if err != nil {
		// Most often a guest that does not trust the office's CA, or pins
		// the server's own certificate.
		fail("guest handshake", err)
		return
	}

	t := &tunnel{s: s, to: target{host: host, port: port, tls: true}, first: up}
	t.authority = host
	if strings.Contains(host, ":") {
		t.authority = "[" + host + "]"
	}
	if port != 443 {
		t.authority = hostPort(host, port)
	}
	t.transport = &http.Transport{
		Proxy:          nil,
		DialTLSContext: t.dialTLS,
		// As the plain HTTP path: bodies and encodings pass untouched.
		DisableCompression:    true,
		MaxIdleConnsPerHost:   1,
		IdleConnTimeout:       s.idle,
		ExpectContinueTimeout: time.Second,
	}
	defer t.transport.CloseIdleConnections()
	t.rp = &httputil.ReverseProxy{
		Rewrite:       t.rewrite,
		Transport:     t.transport,
		FlushInterval: -1,
		ErrorLog:      slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
		ErrorHandler:  t.failed,
		// No ModifyResponse: responses are never rewritten.
	}

	l := &oneConnListener{conn: tc, closed: make(chan struct{})}
	hs := &http.Server{
		Handler:           t,
		ReadHeaderTimeout: s.headerTimeout,
		IdleTimeout:       s.idle,
		BaseContext:       func(net.Listener) context.Context { return ctx },
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
		// A non-nil empty map: no HTTP/2 (ALPN offered http/1.1 only).
		TLSNextProto: map[string]func(*http.Server, *tls.Conn, http.Handler){},
		ConnState: func(_ net.Conn, st http.ConnState) {
			// The one connection is done, or an upgraded request's
			// handler owns it now: the server has nothing left to accept.
			if st == http.StateClosed || st == http.StateHijacked {
				_ = l.Close()
			}
		},
	}
	_ = hs.Serve(l)
	// An upgraded request is still being copied by its handler.
	t.handlers.Wait()
}

// tunnel is one intercepted CONNECT: every request in it goes to the
// host and port of the CONNECT, whatever its Host header or URL says.
type tunnel struct {
	s         *server
	to        target
	authority string // host[:port] of the upstream URL
	transport *http.Transport
	rp        *httputil.ReverseProxy
	handlers  sync.WaitGroup

	mu    sync.Mutex
	first net.Conn // the CONNECT's upstream connection until the first dial takes it
}

func (t *tunnel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	t.handlers.Add(1)
	defer t.handlers.Done()
	if r.Method == http.MethodConnect {
		http.Error(w, "hutch egress: CONNECT inside a tunnel is not supported", http.StatusBadRequest)
		return
	}
	d := &decision{method: r.Method, host: t.to.host, port: t.to.port, logged: true}
	if t.s.guard(w, r, t.to, &d.late) != "" {
		return
	}
	t.rp.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), decisionKey{}, d)))
}

// rewrite aims the request at the CONNECT's host: a Host header or an
// absolute URL naming another (a virtual host behind the same front, say)
// would otherwise carry a value to a server the secret does not name.
func (t *tunnel) rewrite(pr *httputil.ProxyRequest) {
	pr.Out.URL.Scheme = "https"
	pr.Out.URL.Host = t.authority
	pr.Out.URL.User = nil
	pr.Out.URL.RawQuery = pr.In.URL.RawQuery
	pr.Out.Host = ""
	for k := range pr.Out.Header {
		if len(k) >= len("Proxy-") && strings.EqualFold(k[:len("Proxy-")], "Proxy-") {
			delete(pr.Out.Header, k)
		}
	}
}

// failed answers a request the upstream never answered: 403 when its
// body turned out to carry a refused placeholder, otherwise as the plain
// HTTP path does (403 for an internal address, 502).
func (t *tunnel) failed(w http.ResponseWriter, r *http.Request, err error) {
	if d, ok := r.Context().Value(decisionKey{}).(*decision); ok {
		if late := d.late.get(); len(late) > 0 {
			http.Error(w, refusalText(t.to, late), http.StatusForbidden)
			return
		}
	}
	t.s.dialFailed(w, r, t.to.host, t.to.port, err)
}

// dialTLS opens an upstream connection for the tunnel's transport: the
// CONNECT's own the first time, then new ones (checked against the
// policy again), each verified against the CONNECT's host name.
func (t *tunnel) dialTLS(ctx context.Context, _, _ string) (net.Conn, error) {
	t.mu.Lock()
	raw := t.first
	t.first = nil
	t.mu.Unlock()
	if raw == nil {
		if !t.s.policy().Allows(t.to.host, t.to.port) {
			return nil, fmt.Errorf("%s is no longer allowed by sandbox.network", hostPort(t.to.host, t.to.port))
		}
		var err error
		if raw, err = t.s.dialUpstream(ctx, t.to.host, t.to.port); err != nil {
			return nil, err
		}
		if !t.s.track(raw) {
			return nil, errors.New("shutting down")
		}
		raw = &trackedConn{Conn: raw, s: t.s}
	}
	tc := tls.Client(raw, &tls.Config{
		ServerName: normHost(t.to.host),
		RootCAs:    t.s.roots,
		NextProtos: []string{"http/1.1"},
		MinVersion: tls.VersionTLS12,
	})
	if err := tc.HandshakeContext(ctx); err != nil {
		_ = raw.Close()
		return nil, err
	}
	return tc, nil
}

// trackedConn leaves the server's set of open connections when closed.
type trackedConn struct {
	net.Conn
	s    *server
	once sync.Once
}

func (c *trackedConn) Close() error {
	c.once.Do(func() { c.s.untrack(c.Conn) })
	return c.Conn.Close()
}

// oneConnListener hands an http.Server one connection, then blocks
// until closed.
type oneConnListener struct {
	mu     sync.Mutex
	conn   net.Conn
	closed chan struct{}
	once   sync.Once
}

func (l *oneConnListener) Accept() (net.Conn, error) {
	l.mu.Lock()
	c := l.conn
	l.conn = nil
	l.mu.Unlock()
	if c != nil {
		return c, nil
	}
	<-l.closed
	return nil, net.ErrClosed
}

func (l *oneConnListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

func (l *oneConnListener) Addr() net.Addr { return oneConnAddr{} }

type oneConnAddr struct{}

func (oneConnAddr) Network() string { return "tunnel" }
func (oneConnAddr) String() string  { return "tunnel" }
