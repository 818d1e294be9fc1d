// Command egress measures what hutch's egress proxy costs an HTTPS
// request, side by side with the same request going direct, in one run:
//
//	go run ./bench/egress [-n 2000] [-rounds 5]
//
// Everything runs in this process, without an engine: an HTTPS upstream
// (an httptest TLS server on loopback with a certificate of its own for
// api.example.test), and a Go HTTP client that sends it the same GET, an
// Authorization header holding a secret's placeholder, by five paths:
//
//   - direct: TCP to the upstream, TLS with it;
//   - proxy, tunnel: CONNECT through an egress.Proxy without secrets,
//     which splices the client's TLS to the upstream;
//   - proxy, intercepted: CONNECT through an egress.Proxy with a Secret and
//     the office's CA (egress.LoadOrCreateCA in a temp dir), which ends
//     the client's TLS with a certificate it signs, substitutes the
//     placeholder and forwards the request over TLS of its own;
//   - agent → proxy, tunnel and intercepted: the same two proxies reached
//     the way a container's request reaches them, loopback TCP to an
//     agent.Server's egress listener, an HTTP/2 stream over a unix
//     socketpair to agent.Client.RelayEgress, then the proxy.
//
// The proxies are served by egress.Relays, the daemon's set of proxies, one
// per office, as the daemon makes them (an allowlist naming the upstream,
// a placeholder journal, info lines formatted into io.Discard); the
// proxy paths without the agent offer it one unix socketpair per client
// connection, as the relay pump offers its connections. Each path runs
// twice: kept alive (the connection made before timing, so a request is
// one round trip through every hop) and with a new connection per
// request (every hop's TCP or socketpair, CONNECT and TLS handshakes
// timed). The client trusts the upstream's certificate and the proxy's CA
// on every path, and checks each answer: the upstream says whether it saw
// the placeholder or the value, which proves where interception happened.
//
// The n requests of a path are split over the rounds; in each round the
// paths of one table take turns, rotating who goes first. A row's ratio to
// direct is of the p50s over all its requests; its spread is the lowest
// and highest ratio of single rounds. These machines are noisy, so the
// claim is the ratio of paths measured side by side, never a bare time;
// nothing is asserted. Tables go to stdout, progress to stderr.
package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hutchsandbox/hutch/bench/benchkit"
	"github.com/hutchsandbox/hutch/internal/agent"
	"github.com/hutchsandbox/hutch/internal/egress"
	"github.com/hutchsandbox/hutch/internal/netpolicy"
)

// The upstream's name, and the secret the intercepting proxy holds.
const (
	upstreamName = "api.example.test"
	secretName   = "GH_TOKEN"
	placeholder  = "hutch-placeholder-0123456789abcdef0123456789abcdef"
	realValue    = "ghp_the-real-value-4f2a"
)

// The offices of egress.Relays: one proxy each.
const (
	officeTunnel    = "tunnel"
	officeIntercept = "intercept"
)

func main() {
	n := flag.Int("n", 2000, "requests per path and table, split over the rounds")
	rounds := flag.Int("rounds", 5, "rounds; each gives every path one ratio to direct, whose range is the spread")
	flag.Parse()
	if *n < 1 || *rounds < 1 || *rounds > *n {
		fmt.Fprintln(os.Stderr, "bench/egress: need 1 ≤ -rounds ≤ -n")
		os.Exit(2)
	}
	benchkit.Main("bench/egress", "interrupted: cleaning up (interrupt again to quit at once)", func(ctx context.Context) error {
		return run(ctx, *n, *rounds)
	})
}

var progress = benchkit.Progress("bench/egress")

// path is one way to the upstream.
type path struct {
	name   string
	client *http.Client
	// want is what the upstream must have seen in Authorization.
	want string
}

// table is the paths measured against each other, direct first.
type table struct {
	title string
	paths []path
	all   []*benchkit.Series // every request of each path
	round [][]float64        // per path, each round's ratio of p50s to direct
}

func run(ctx context.Context, n, rounds int) error {
	tmp, err := os.MkdirTemp("", "hutch-bench-egress-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(tmp) }()

	upCert, upPool, err := selfSigned(upstreamName)
	if err != nil {
		return err
	}
	up := httptest.NewUnstartedServer(http.HandlerFunc(answer))
	up.TLS = &tls.Config{Certificates: []tls.Certificate{upCert}}
	up.StartTLS()
	defer up.Close()
	upAddr := up.Listener.Addr().String()
	dialUpstream := func(ctx context.Context, _, addr string) (net.Conn, error) {
		if addr != upstreamName+":443" {
			return nil, fmt.Errorf("bench: no upstream %s", addr)
		}
		var d net.Dialer
		return d.DialContext(ctx, "tcp", upAddr)
	}

	ca, err := egress.LoadOrCreateCA(tmp)
	if err != nil {
		return err
	}
	trusted := upPool.Clone()
	if !trusted.AppendCertsFromPEM(ca.CertPEM()) {
		return errors.New("the proxy's CA certificate does not parse")
	}
	allow, err := netpolicy.ParseAllowlist([]string{upstreamName})
	if err != nil {
		return err
	}
	policy := netpolicy.Policy{Mode: netpolicy.ModeAllowlist, Allow: allow}
	secrets := []egress.Secret{{Name: secretName, Placeholder: placeholder, Value: realValue, Hosts: allow}}
	proxyLog := slog.New(slog.NewTextHandler(io.Discard, nil))
	relays := &egress.Relays{New: func(office string) (*egress.Proxy, error) {
		p := &egress.Proxy{
			Office:        office,
			Log:           proxyLog,
			Policy:        func() netpolicy.Policy { return policy },
			Dial:          dialUpstream,
			UpstreamRoots: upPool,
			Record:        egress.OpenJournal(filepath.Join(tmp, office+"-events.jsonl")).Record,
		}
		if office == officeIntercept {
			p.CA = ca
			p.Secrets = func() []egress.Secret { return secrets }
		}
		return p, nil
	}}
	defer relays.Close()

	agents := map[string]string{}
	for _, office := range []string{officeTunnel, officeIntercept} {
		addr, stop, err := startAgent(ctx, relays.Handler(office))
		if err != nil {
			return err
		}
		defer stop()
		agents[office] = addr
	}

	// paths are the five ways to the upstream, over clients that keep
	// their connections alive or not.
	var transports []*http.Transport
	paths := func(keepAlive bool) []path {
		client := func(proxy string, dial func(context.Context, string, string) (net.Conn, error)) *http.Client {
			t := &http.Transport{
				DialContext:         dial,
				TLSClientConfig:     &tls.Config{RootCAs: trusted},
				DisableKeepAlives:   !keepAlive,
				MaxIdleConnsPerHost: 1,
			}
			if proxy != "" {
				u := &url.URL{Scheme: "http", Host: proxy}
				t.Proxy = http.ProxyURL(u)
			}
			transports = append(transports, t)
			return &http.Client{Transport: t}
		}
		viaRelays := func(office string) func(context.Context, string, string) (net.Conn, error) {
			return func(context.Context, string, string) (net.Conn, error) {
				c, offered, err := socketpair()
				if err != nil {
					return nil, err
				}
				go relays.Offer(office, offered)
				return c, nil
			}
		}
		var d net.Dialer
		return []path{
			{name: "direct", client: client("", dialUpstream), want: "placeholder"},
			{name: "proxy: CONNECT tunnel, spliced", client: client("hutch-egress", viaRelays(officeTunnel)), want: "placeholder"},
			{name: "proxy: TLS intercepted, placeholder substituted", client: client("hutch-egress", viaRelays(officeIntercept)), want: "value"},
			{name: "agent → proxy: tunnel", client: client(agents[officeTunnel], d.DialContext), want: "placeholder"},
			{name: "agent → proxy: intercepted", client: client(agents[officeIntercept], d.DialContext), want: "value"},
		}
	}
	defer func() {
		for _, t := range transports {
			t.CloseIdleConnections()
		}
	}()
	tables := []*table{
		{title: "Kept alive: one connection per path, made before timing; a request is one round trip through every hop", paths: paths(true)},
		{title: "New connection per request (no keep-alive): every hop's connect, CONNECT and TLS handshakes timed", paths: paths(false)},
	}
	for _, t := range tables {
		for _, p := range t.paths {
			t.all = append(t.all, &benchkit.Series{Name: p.name})
		}
		t.round = make([][]float64, len(t.paths))
	}

	progress("warm-up: 20 requests per path")
	for _, t := range tables {
		if err := benchkit.WarmUp(ctx, benchkit.Rounds{N: 20}, t.series(ctx)); err != nil {
			return fmt.Errorf("warm-up: %w", err)
		}
	}
	for r := range rounds {
		per := n / rounds
		if r < n%rounds {
			per++
		}
		for _, t := range tables {
			s := t.series(ctx)
			if err := benchkit.Interleave(ctx, benchkit.Rounds{N: per}, s); err != nil {
				return err
			}
			for i, p := range s {
				t.all[i].Times = append(t.all[i].Times, p.Times...)
				t.round[i] = append(t.round[i], benchkit.Ratio(p.P50(), s[0].P50()))
			}
		}
		progress("round %d/%d done", r+1, rounds)
	}
	report(n, rounds, tables)
	return nil
}

// series are fresh Series of the table's paths, for one round.
func (t *table) series(ctx context.Context) []*benchkit.Series {
	out := make([]*benchkit.Series, len(t.paths))
	for i, p := range t.paths {
		out[i] = &benchkit.Series{Name: p.name, Run: func() error { return get(ctx, p.client, p.want) }}
	}
	return out
}

// get sends the request every path sends and checks the answer.
func get(ctx context.Context, c *http.Client, want string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+upstreamName+"/user", nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+placeholder)
	res, err := c.Do(req)
	if err != nil {
		return err
	}
	_, err = io.Copy(io.Discard, res.Body)
	_ = res.Body.Close()
	if err != nil {
		return err
	}
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("upstream answered %s", res.Status)
	}
	if saw := res.Header.Get("X-Bench-Saw"); saw != want {
		return fmt.Errorf("the upstream saw the %s in Authorization, want the %s", saw, want)
	}
	return nil
}

// answer is the upstream: a small JSON answer, and a header saying what
// it found in Authorization.
func answer(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	saw := "other"
	switch r.Header.Get("Authorization") {
	case "Bearer " + placeholder:
		saw = "placeholder"
	case "Bearer " + realValue:
		saw = "value"
	}
	w.Header().Set("X-Bench-Saw", saw)
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, `{"login":"bench","id":1}`)
}

// startAgent serves an agent whose egress listener is on a free loopback
// port, with a client over a unix socketpair relaying that listener's
// connections to offer, and returns the listener's address and what
// stops it all.
func startAgent(ctx context.Context, offer func(net.Conn)) (string, func(), error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &agent.Server{Egress: l}
	ctx, cancel := context.WithCancel(ctx)
	var served sync.WaitGroup
	cl := agent.NewClient(func(context.Context) (net.Conn, error) {
		c, agentSide, err := socketpair()
		if err != nil {
			return nil, err
		}
		served.Go(func() { srv.ServeConn(ctx, agentSide) })
		return c, nil
	}, nil)
	relayed := make(chan error, 1)
	go func() { relayed <- cl.RelayEgress(ctx, offer) }()
	stop := func() {
		cancel()
		if err := <-relayed; err != nil {
			fmt.Fprintln(os.Stderr, "egress relay:", err)
		}
		_ = cl.Close()
		_ = l.Close()
		served.Wait()
	}
	if _, err := cl.Ping(ctx); err != nil {
		stop()
		return "", nil, fmt.Errorf("agent: %w", err)
	}
	return l.Addr().String(), stop, nil
}

// socketpair is a connected pair of unix stream sockets.
func socketpair() (net.Conn, net.Conn, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("socketpair: %w", err)
	}
	a, errA := fileConn(fds[0])
	b, errB := fileConn(fds[1])
	if err := errors.Join(errA, errB); err != nil {
		for _, c := range []net.Conn{a, b} {
			if c != nil {
				_ = c.Close()
			}
		}
		return nil, nil, err
	}
	return a, b, nil
}

// fileConn makes a net.Conn of fd, which it closes (net.FileConn dups it).
func fileConn(fd int) (net.Conn, error) {
	f := os.NewFile(uintptr(fd), "socketpair")
	defer func() { _ = f.Close() }()
	return net.FileConn(f)
}

// selfSigned is a certificate for name, ECDSA P-256 as the proxy's own
// leaves are, and a pool that trusts it.
func selfSigned(name string) (tls.Certificate, *x509.CertPool, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		DNSNames:              []string{name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: cert}, pool, nil
}

func report(n, rounds int, tables []*table) {
	out := os.Stdout
	benchkit.Header{Bench: "bench/egress", Detail: true}.Print(out)
	benchkit.Println(out, "upstream: httptest TLS server on loopback, its own ECDSA P-256 certificate; GET with a placeholder in Authorization, 24-byte JSON answer; HTTP/1.1, TLS 1.3, no session resumption")
	benchkit.Println(out, "proxy: egress.Proxy as the daemon makes it (allowlist, journal, info log into io.Discard), served by egress.Relays; the proxy rows offer it a unix socketpair per client connection")
	benchkit.Println(out, "agent rows: loopback TCP to an agent.Server's egress listener → HTTP/2 stream over a unix socketpair → agent.Client.RelayEgress → the same egress.Relays; all in this process")
	benchkit.Printf(out, "%d requests per path and table in %d rounds, the paths of a table interleaved round-robin; percentiles nearest-rank; ÷direct is of the p50s over all requests, rounds the lowest–highest of single rounds\n", n, rounds)
	for _, t := range tables {
		benchkit.Printf(out, "\n%s\n", t.title)
		tw := benchkit.Table(out)
		benchkit.Println(tw, "path\tok\tp50\tp90\t÷direct p50\trounds\t÷direct p90\t+p50")
		direct := t.all[0]
		for i, s := range t.all {
			lo, hi := slices.Min(t.round[i]), slices.Max(t.round[i])
			benchkit.Printf(tw, "%s\t%d\t%s\t%s\t%.2f\t%.2f–%.2f\t%.2f\t%s\n", s.Name, len(s.Times),
				dur(s.P50()), dur(s.Pct(90)), benchkit.Ratio(s.P50(), direct.P50()), lo, hi,
				benchkit.Ratio(s.Pct(90), direct.Pct(90)), plus(s.P50()-direct.P50()))
		}
		_ = tw.Flush()
		benchkit.Println(out, t.verdict())
	}
}

// verdict says what the tunnel and interception cost against direct,
// and what the agent's relay adds on top of each; a path whose rounds
// straddle direct's is said not to differ from it.
func (t *table) verdict() string {
	p50 := func(i int) time.Duration { return t.all[i].P50() }
	cost := func(i int) string {
		lo, hi := slices.Min(t.round[i]), slices.Max(t.round[i])
		if lo <= 1 && hi >= 1 {
			return fmt.Sprintf("not told from direct (rounds %.2f–%.2f)", lo, hi)
		}
		return fmt.Sprintf("%.2f× direct (rounds %.2f–%.2f, %s a request)", benchkit.Ratio(p50(i), p50(0)), lo, hi, plus(p50(i)-p50(0)))
	}
	return fmt.Sprintf("verdict: the tunnel %s; interception %s; the agent's relay brings them to %.2f× and %.2f× direct (%s and %s over the proxy alone)",
		cost(1), cost(2), benchkit.Ratio(p50(3), p50(0)), benchkit.Ratio(p50(4), p50(0)), plus(p50(3)-p50(1)), plus(p50(4)-p50(2)))
}

// dur is a time for the tables: microseconds under a millisecond, where
// warm requests through loopback live, benchkit.Ms above.
func dur(d time.Duration) string {
	if d > 0 && d < time.Millisecond {
		return fmt.Sprintf("%d µs", d.Microseconds())
	}
	return benchkit.Ms(d)
}

// plus is a difference of p50s, signed.
func plus(d time.Duration) string {
	if d < 0 {
		return "−" + dur(-d)
	}
	if d == 0 {
		return "0"
	}
	return "+" + dur(d)
}
