package egress

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hutchsandbox/hutch/internal/netpolicy"
)

// Defaults for the Proxy fields left zero.
const (
	DefaultMaxTunnels        = 64
	DefaultTunnelIdleTimeout = 10 * time.Minute
	DefaultHeaderTimeout     = 10 * time.Second
)

// dialTimeout bounds resolving and connecting to one upstream host.
const dialTimeout = 30 * time.Second

// Proxy is the egress proxy of one microVM. Its fields are configuration,
// read when Serve starts; one Proxy may serve several listeners.
type Proxy struct {
	// Policy is read for every decision, so a changed
	// sandbox.network.allow takes effect on the next connection without
	// re-creating the sandbox. Nil refuses every host.
	Policy func() netpolicy.Policy
	// Log receives one info line per decision. Nil discards.
	Log *slog.Logger
	// Dial opens an upstream connection to addr ("host:port" with the host
	// as the client wrote it). Nil uses a net.Dialer with the host's
	// resolver that refuses internal addresses unless they are listed (see
	// the package comment). A non-nil Dial takes over resolution and with
	// it that guard: tests use it to map names to local servers.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Office names the conversation in log lines.
	Office string
	// MaxTunnels caps the upstream connections held for the guest at once:
	// open CONNECT tunnels plus plain HTTP requests in flight. Past it the
	// guest gets 503. Zero means DefaultMaxTunnels.
	MaxTunnels int
	// TunnelIdleTimeout closes a tunnel after this long without a byte in
	// either direction, and an idle keep-alive connection from the guest.
	// Zero means DefaultTunnelIdleTimeout.
	TunnelIdleTimeout time.Duration
	// HeaderTimeout is how long the guest has to send a request's headers.
	// Zero means DefaultHeaderTimeout.
	HeaderTimeout time.Duration

	// Secrets are the placeholder secrets of the sandbox, read for every
	// request, so a rotated value takes effect on the next one. Nil or
	// empty: no placeholder is scanned for and no TLS is intercepted.
	Secrets func() []Secret
	// CA signs the certificates of intercepted TLS connections. Nil: TLS
	// is never intercepted, so placeholders are substituted nowhere (and
	// still refused in plain HTTP).
	CA *CA
	// UpstreamRoots verifies the servers of intercepted connections. Nil
	// uses the host's system roots.
	UpstreamRoots *x509.CertPool
	// Record receives every substitution and refusal of a placeholder,
	// from the proxy's goroutines. Nil discards; OpenJournal(...).Record
	// appends them to a file.
	Record func(Event)
	// Denied, when set, is called once for each connection or request
	// the network policy refuses (a host not listed, network none, a name
	// that resolves to an internal address), from the proxy's goroutines,
	// with what was refused and why.
	Denied func(Denial)
}

// Denial is a connection or request the network policy refused: where it
// went and why ("not in allowlist", "network is none", "resolves to
// internal address 10.0.0.1").
type Denial struct {
	Host   string
	Port   int
	Reason string
}

// Serve answers proxy requests on l until ctx ends, then closes l, every
// connection and every tunnel, waits for their handlers, and returns nil.
// It returns an error only when l fails on its own.
func (p *Proxy) Serve(ctx context.Context, l net.Listener) error {
	s := p.newServer()
	hs := &http.Server{
		Handler:           s,
		ReadHeaderTimeout: s.headerTimeout,
		IdleTimeout:       s.idle,
		// Request contexts end with ctx, which aborts plain HTTP requests
		// in flight and dials in progress.
		BaseContext: func(net.Listener) context.Context { return ctx },
		ErrorLog:    slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(l) }()

	var err error
	select {
	case <-ctx.Done():
	case err = <-served:
	}
	// Close does not touch hijacked connections; shutdown closes those.
	_ = hs.Close()
	if err == nil {
		// Serve returns http.ErrServerClosed once Close ended it.
		if serr := <-served; !errors.Is(serr, http.ErrServerClosed) {
			err = serr
		}
	}
	s.shutdown()
	s.transport.CloseIdleConnections()
	if err != nil {
		return fmt.Errorf("egress proxy: %w", err)
	}
	return nil
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// server is the state of one Serve call.
type server struct {
	policy    func() netpolicy.Policy
	log       *slog.Logger
	office    string
	dial      func(ctx context.Context, network, addr string) (net.Conn, error)
	idle      time.Duration
	slots     chan struct{}
	transport *http.Transport
	rp        *httputil.ReverseProxy

	headerTimeout time.Duration
	secretsFn     func() []Secret
	ca            *CA
	roots         *x509.CertPool
	recordFn      func(Event)
	deniedFn      func(Denial)

	mu     sync.Mutex
	closed bool
	conns  map[net.Conn]struct{} // both ends of every open tunnel
	active sync.WaitGroup        // handlers running
}

func (p *Proxy) newServer() *server {
	s := &server{
		policy: p.Policy,
		log:    p.Log,
		office: p.Office,
		dial:   p.Dial,
		idle:   orDefault(p.TunnelIdleTimeout, DefaultTunnelIdleTimeout),
		conns:  make(map[net.Conn]struct{}),

		headerTimeout: orDefault(p.HeaderTimeout, DefaultHeaderTimeout),
		secretsFn:     p.Secrets,
		ca:            p.CA,
		roots:         p.UpstreamRoots,
		recordFn:      p.Record,
		deniedFn:      p.Denied,
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.policy == nil {
		s.policy = func() netpolicy.Policy { return netpolicy.Policy{Mode: netpolicy.ModeNone} }
	}
	if s.dial == nil {
		s.dial = guardedDialer(s.policy, dialTimeout).DialContext
	}
	slots := p.MaxTunnels
	if slots <= 0 {
		slots = DefaultMaxTunnels
	}
	s.slots = make(chan struct{}, slots)
	s.transport = &http.Transport{
		// Never the host's HTTP_PROXY: the request goes straight out.
		Proxy:       nil,
		DialContext: s.dialHTTP,
		// Pass Accept-Encoding and bodies through untouched rather than
		// asking for gzip and unpacking it behind the client's back.
		DisableCompression:    true,
		MaxIdleConns:          16,
		IdleConnTimeout:       90 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	s.rp = &httputil.ReverseProxy{
		Rewrite:        rewrite,
		Transport:      s.transport,
		FlushInterval:  -1, // stream: event streams and long polls must not wait on a buffer
		ErrorLog:       slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
		ModifyResponse: s.forwarded,
		ErrorHandler:   s.forwardFailed,
	}
	return s
}

// rewrite keeps the absolute URL the client sent, so the Transport dials
// the host that was checked, and drops what is meant for this proxy.
// ReverseProxy has already removed hop-by-hop headers (Proxy-Authorization
// and Proxy-Connection among them) and X-Forwarded-*; any other Proxy-*
// header is addressed to a proxy too and may carry its credentials.
func rewrite(pr *httputil.ProxyRequest) {
	// The Host header is the checked name, never a different virtual host.
	pr.Out.Host = ""
	// ReverseProxy drops query parameters it cannot parse, a guard for
	// reverse proxies that route on them; a forward proxy passes the
	// query on as written.
	pr.Out.URL.RawQuery = pr.In.URL.RawQuery
	for k := range pr.Out.Header {
		if len(k) >= len("Proxy-") && strings.EqualFold(k[:len("Proxy-")], "Proxy-") {
			delete(pr.Out.Header, k)
		}
	}
}

// ServeHTTP sorts a request into CONNECT, plain HTTP or bad.
func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !s.enter() {
		http.Error(w, "hutch egress: shutting down", http.StatusServiceUnavailable)
		return
	}
	defer s.active.Done()
	if r.Method == http.MethodConnect {
		s.connect(w, r)
		return
	}
	s.forward(w, r)
}

// connect opens a tunnel for CONNECT host:port.
func (s *server) connect(w http.ResponseWriter, r *http.Request) {
	host, portText, err := net.SplitHostPort(r.URL.Host)
	port, ok := parsePort(portText)
	if err != nil || !ok || host == "" {
		s.badRequest(w, r, "CONNECT needs host:port")
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		s.badRequest(w, r, "CONNECT is served over HTTP/1.1 only")
		return
	}
	if !s.admit(w, r, host, port) {
		return
	}
	defer s.freeSlot()

	up, err := s.dialUpstream(r.Context(), host, port)
	if err != nil {
		s.dialFailed(w, r, host, port, err)
		return
	}
	s.decide(r.Context(), true, r.Method, host, port)
	guest, buf, err := hj.Hijack()
	if err != nil {
		_ = up.Close()
		return
	}
	// The server's header deadline is still set on the connection.
	_ = guest.SetDeadline(time.Time{})
	if !s.track(guest, up) {
		return
	}
	defer s.untrack(guest, up)
	if _, err := io.WriteString(guest, "HTTP/1.1 200 Connection Established\r\n\r\n"); err != nil {
		_ = guest.Close()
		_ = up.Close()
		return
	}
	// A client may send its first bytes (a TLS ClientHello) without waiting
	// for the 200; the server's reader may already hold them.
	var early []byte
	if n := buf.Reader.Buffered(); n > 0 {
		b, _ := buf.Reader.Peek(n)
		early = append(early, b...)
	}
	// With placeholder secrets, a TLS tunnel is terminated and its
	// requests guarded one by one (intercept.go); anything else is spliced.
	early, intercepted := s.intercept(r.Context(), guest, early, up, host, port)
	if intercepted {
		return
	}
	if len(early) > 0 {
		if _, err := up.Write(early); err != nil {
			_ = guest.Close()
			_ = up.Close()
			return
		}
	}
	splice(guest, up, s.idle)
}

// decision records whether a forwarded request has been logged, so that
// exactly one of ModifyResponse and ErrorHandler logs it.
type decision struct {
	method string
	host   string
	port   int
	logged bool
	// late holds placeholders refused in a body after it began to go out.
	late refusals
}

type decisionKey struct{}

// forward passes on a plain HTTP request in absolute form.
func (s *server) forward(w http.ResponseWriter, r *http.Request) {
	if r.URL.Scheme != "http" || r.URL.Host == "" {
		msg := "not a proxy request: send an absolute http:// URL, or CONNECT host:port"
		if r.URL.Scheme == "https" {
			msg = "send https:// requests through CONNECT"
		}
		s.badRequest(w, r, msg)
		return
	}
	host, port, ok := r.URL.Hostname(), 80, true
	if p := r.URL.Port(); p != "" {
		port, ok = parsePort(p)
	}
	if host == "" || !ok {
		s.badRequest(w, r, "bad host or port in the request URL")
		return
	}
	if !s.admit(w, r, host, port) {
		return
	}
	defer s.freeSlot()

	// Upgrades would turn the request into an unbounded tunnel outside
	// MaxTunnels and the idle timeout; dropping the header makes it an
	// ordinary request.
	r.Header.Del("Upgrade")
	d := &decision{method: r.Method, host: host, port: port}
	// A value never goes out in clear: any placeholder is refused here.
	if denied := s.guard(w, r, target{host: host, port: port}, &d.late); denied != "" {
		s.decide(r.Context(), false, r.Method, host, port, slog.String("reason", denied))
		return
	}
	s.rp.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), decisionKey{}, d)))
	if !d.logged {
		s.decide(r.Context(), true, d.method, host, port)
	}
}

// forwarded logs a forwarded request once the upstream has answered.
func (s *server) forwarded(res *http.Response) error {
	if d, ok := res.Request.Context().Value(decisionKey{}).(*decision); ok && !d.logged {
		d.logged = true
		s.decide(res.Request.Context(), true, d.method, d.host, d.port)
	}
	return nil
}

// forwardFailed answers a forwarded request the upstream never answered.
func (s *server) forwardFailed(w http.ResponseWriter, r *http.Request, err error) {
	d, ok := r.Context().Value(decisionKey{}).(*decision)
	if ok {
		if late := d.late.get(); len(late) > 0 {
			if !d.logged {
				d.logged = true
				s.decide(r.Context(), false, d.method, d.host, d.port, slog.String("reason", "carries a secret placeholder"))
			}
			http.Error(w, refusalText(target{host: d.host, port: d.port}, late), http.StatusForbidden)
			return
		}
	}
	if !ok || d.logged {
		// The upstream answered and the decision is logged; what failed
		// is the exchange after it (a refused protocol switch).
		s.log.LogAttrs(r.Context(), slog.LevelDebug, "egress upstream failed",
			slog.String("office", s.office), slog.String("error", upstreamError(err)))
		w.WriteHeader(http.StatusBadGateway)
		return
	}
	d.logged = true
	s.dialFailed(w, r, d.host, d.port, err)
}

// upstreamError is err's text without a URL: a *url.Error would carry the
// path and query, which may hold tokens.
func upstreamError(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return err.Error()
}

// dialFailed answers a request whose upstream could not be reached: 403
// when the guard refused its address, 502 otherwise.
func (s *server) dialFailed(w http.ResponseWriter, r *http.Request, host string, port int, err error) {
	target := net.JoinHostPort(host, strconv.Itoa(port))
	var refused *refusedAddr
	if errors.As(err, &refused) {
		reason := "resolves to internal address " + refused.addr.Addr().String()
		s.denied(host, port, reason)
		s.decide(r.Context(), false, r.Method, host, port, slog.String("reason", reason))
		http.Error(w, fmt.Sprintf("hutch egress: %s resolves to %s, an internal address; "+
			"to reach it, add %s to sandbox.network.allow", target, refused.addr.Addr(), refused.addr),
			http.StatusForbidden)
		return
	}
	msg := upstreamError(err)
	s.decide(r.Context(), true, r.Method, host, port, slog.String("error", msg))
	http.Error(w, fmt.Sprintf("hutch egress: cannot reach %s: %s", target, msg), http.StatusBadGateway)
}

func (s *server) notListed(w http.ResponseWriter, r *http.Request, pol netpolicy.Policy, host string, port int) {
	reason := "not in allowlist"
	if pol.Mode == netpolicy.ModeNone {
		reason = "network is none"
	}
	s.denied(host, port, reason)
	s.decide(r.Context(), false, r.Method, host, port, slog.String("reason", reason))
	http.Error(w, pol.Refusal(host, port), http.StatusForbidden)
}

// denied tells Proxy.Denied of a refusal by the network policy.
func (s *server) denied(host string, port int, reason string) {
	if s.deniedFn != nil {
		s.deniedFn(Denial{Host: host, Port: port, Reason: reason})
	}
}

func (s *server) tooMany(w http.ResponseWriter, r *http.Request, host string, port int) {
	s.decide(r.Context(), false, r.Method, host, port, slog.String("reason", "too many open connections"))
	http.Error(w, "hutch egress: too many open connections", http.StatusServiceUnavailable)
}

// badRequest logs without host or port: there is no valid target to name.
func (s *server) badRequest(w http.ResponseWriter, r *http.Request, msg string) {
	s.log.LogAttrs(r.Context(), slog.LevelInfo, "egress denied",
		slog.String("office", s.office), slog.String("method", r.Method),
		slog.String("reason", "bad request"))
	http.Error(w, "hutch egress: "+msg, http.StatusBadRequest)
}

// decide logs one decision. It never takes a URL or a header: those are
// where tokens live.
func (s *server) decide(ctx context.Context, allowed bool, method, host string, port int, extra ...slog.Attr) {
	msg := "egress denied"
	if allowed {
		msg = "egress allowed"
	}
	attrs := append([]slog.Attr{
		slog.String("office", s.office),
		slog.String("method", method),
		slog.String("host", host),
		slog.Int("port", port),
	}, extra...)
	s.log.LogAttrs(ctx, slog.LevelInfo, msg, attrs...)
}

// dialHTTP is the Transport's dialer. forward has checked the name already;
// checking again here means no path through the Transport can dial a
// host the list does not allow.
func (s *server) dialHTTP(ctx context.Context, _, addr string) (net.Conn, error) {
	host, portText, err := net.SplitHostPort(addr)
	port, ok := parsePort(portText)
	if err != nil || !ok || !s.policy().Allows(host, port) {
		return nil, fmt.Errorf("%s is not allowed by sandbox.network", addr)
	}
	return s.dialUpstream(ctx, host, port)
}

// hostPort is host:port as a client writes it, brackets around an IPv6
// address.
func hostPort(host string, port int) string {
	return net.JoinHostPort(host, strconv.Itoa(port))
}

func (s *server) dialUpstream(ctx context.Context, host string, port int) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	return s.dial(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(port)))
}

func parsePort(s string) (int, bool) {
	if s == "" || strings.Trim(s, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	return n, err == nil && n >= 1 && n <= 65535
}

func (s *server) takeSlot() bool {
	select {
	case s.slots <- struct{}{}:
		return true
	default:
		return false
	}
}

func (s *server) freeSlot() { <-s.slots }

// enter registers a handler, unless shutdown has begun. The mutex orders
// every Add before shutdown's Wait.
func (s *server) enter() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.active.Add(1)
	return true
}

// track registers a tunnel's connections so shutdown can close them; after
// shutdown it closes them at once and reports false.
func (s *server) track(cs ...net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range cs {
		if s.closed {
			_ = c.Close()
			continue
		}
		s.conns[c] = struct{}{}
	}
	return !s.closed
}

func (s *server) untrack(cs ...net.Conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range cs {
		delete(s.conns, c)
	}
}

// shutdown closes every tunnel and waits for every handler to return.
func (s *server) shutdown() {
	s.mu.Lock()
	s.closed = true
	for c := range s.conns {
		_ = c.Close()
	}
	s.mu.Unlock()
	s.active.Wait()
}

// admit decides one request: refused (and answered) when the policy
// refuses host:port or every slot is taken; otherwise it holds a slot, which the
// caller frees when done.
func (s *server) admit(w http.ResponseWriter, r *http.Request, host string, port int) bool {
	if pol := s.policy(); !pol.Allows(host, port) {
		s.notListed(w, r, pol, host, port)
		return false
	}
	if !s.takeSlot() {
		s.tooMany(w, r, host, port)
		return false
	}
	return true
}
