package agent

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/sandbox"
)

// newEgressFixture serves srv (nil: a default Server) with an egress
// listener on a free loopback port and returns the fixture and that
// address. Once the test and its other cleanups are done, the listener is
// closed and no goroutine of the relay, on either side, may remain.
func newEgressFixture(t *testing.T, srv *Server) (*fixture, string) {
	t.Helper()
	if srv == nil {
		srv = &Server{}
	}
	l, err := listenEgress("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = l.Close()
		if srv.egress != nil {
			<-srv.egress.done
		}
		if n, stacks := egressGoroutines(); n > 0 {
			t.Errorf("%d egress goroutines left after the test:\n%s", n, stacks)
		}
	})
	srv.Egress = l
	return newFixture(t, srv), l.Addr().String()
}

// startRelay runs c.RelayEgress(offer) until the test ends (before the
// fixture is torn down) and checks that it then returns nil.
func startRelay(t *testing.T, c *Client, offer func(net.Conn)) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.RelayEgress(ctx, offer) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("RelayEgress after its ctx ended: %v, want nil", err)
		}
	})
}

// egressGoroutines counts the goroutines in the relay's code, waiting
// up to waitFor for them to end, and returns their stacks.
func egressGoroutines() (int, string) {
	markers := []string{"agent.(*egressRelay)", "agent.(*egressConn)", "agent.egressBody", "agent.(*Client).pumpEgress", "agent.(*Server).handleEgress"}
	var n int
	var found []string
	for end := time.Now().Add(waitFor); ; {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		n, found = 0, nil
		for g := range strings.SplitSeq(string(buf), "\n\n") {
			for _, m := range markers {
				if strings.Contains(g, m) {
					n++
					found = append(found, g)
					break
				}
			}
		}
		if n == 0 || time.Now().After(end) {
			return n, strings.Join(found, "\n\n")
		}
		time.Sleep(10 * time.Millisecond) // goroutines say nothing when they end: poll
	}
}

func dialEgress(t *testing.T, addr string) *net.TCPConn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	_ = c.SetDeadline(time.Now().Add(waitFor)) // a bound against hangs
	return c.(*net.TCPConn)
}

// echo copies what c reads back to it, then half-closes and closes it.
func echo(c net.Conn) {
	go func() {
		defer func() { _ = c.Close() }()
		if _, err := io.Copy(c, c); err == nil {
			_ = c.(interface{ CloseWrite() error }).CloseWrite()
		}
	}()
}

func TestEgress_RelaysBothWays(t *testing.T) {
	f, addr := newEgressFixture(t, nil)
	peers := make(chan string, 1)
	startRelay(t, f.client, func(c net.Conn) {
		peers <- c.RemoteAddr().String()
		echo(c)
	})
	local := dialEgress(t, addr)
	sent := make([]byte, 3<<20+17) // many frames, and more than the stream windows
	_, _ = rand.Read(sent)
	wrote := make(chan error, 1)
	go func() {
		_, err := local.Write(sent)
		if err == nil {
			err = local.CloseWrite()
		}
		wrote <- err
	}()
	got, err := io.ReadAll(local)
	if err != nil {
		t.Fatalf("reading the echo: %v", err)
	}
	if err := <-wrote; err != nil {
		t.Fatalf("writing: %v", err)
	}
	if !bytes.Equal(got, sent) {
		t.Errorf("echo of %d bytes came back as %d bytes, not the same", len(sent), len(got))
	}
	if p := <-peers; p != local.LocalAddr().String() {
		t.Errorf("the relayed conn's RemoteAddr is %q, want the command's address %q", p, local.LocalAddr())
	}
}

// TestEgress_HalfClose_CommandFirst: the command finishes sending; the
// host reads EOF, and its answer still arrives, then EOF.
func TestEgress_HalfClose_CommandFirst(t *testing.T) {
	f, addr := newEgressFixture(t, nil)
	hostRead := make(chan error, 1)
	startRelay(t, f.client, func(c net.Conn) {
		go func() {
			got, err := io.ReadAll(c) // until the command's half-close
			if err == nil {
				_, err = c.Write([]byte("pong:" + string(got)))
			}
			_ = c.Close() // at once: what was written must still arrive
			hostRead <- err
		}()
	})
	local := dialEgress(t, addr)
	if _, err := local.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	if err := local.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(local)
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	if err := <-hostRead; err != nil {
		t.Errorf("host side: %v", err)
	}
	if string(got) != "pong:ping" {
		t.Errorf("answer %q, want %q", got, "pong:ping")
	}
}

// TestEgress_HalfClose_HostFirst: the host finishes sending; the command
// reads EOF, and what it sends after still reaches the host.
func TestEgress_HalfClose_HostFirst(t *testing.T) {
	f, addr := newEgressFixture(t, nil)
	hostGot := make(chan string, 1)
	startRelay(t, f.client, func(c net.Conn) {
		go func() {
			defer func() { _ = c.Close() }()
			_, _ = c.Write([]byte("hello"))
			_ = c.(interface{ CloseWrite() error }).CloseWrite()
			b, err := io.ReadAll(c)
			if err != nil {
				b = []byte("error: " + err.Error())
			}
			hostGot <- string(b)
		}()
	})
	local := dialEgress(t, addr)
	got, err := io.ReadAll(local)
	if err != nil || string(got) != "hello" {
		t.Fatalf("command read %q, %v; want %q then EOF", got, err, "hello")
	}
	if _, err := local.Write([]byte("bye")); err != nil {
		t.Fatal(err)
	}
	if err := local.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	if got := <-hostGot; got != "bye" {
		t.Errorf("host read %q, want %q", got, "bye")
	}
}

// TestEgress_CommandResetIsNotEOF: a connection that breaks off is an
// error on the host side, not a clean end.
func TestEgress_CommandResetIsNotEOF(t *testing.T) {
	f, addr := newEgressFixture(t, nil)
	hostErr := make(chan error, 1)
	startRelay(t, f.client, func(c net.Conn) {
		go func() {
			defer func() { _ = c.Close() }()
			_, err := io.ReadAll(c)
			hostErr <- err
		}()
	})
	local := dialEgress(t, addr)
	if _, err := local.Write([]byte("partial")); err != nil {
		t.Fatal(err)
	}
	_ = local.SetLinger(0) // close sends RST
	_ = local.Close()
	if err := <-hostErr; !errors.Is(err, errEgressBroken) {
		t.Errorf("host read after a reset: %v, want %v", err, errEgressBroken)
	}
}

// connListener is a net.Listener of the conns offered to it.
type connListener struct {
	conns  chan net.Conn
	closed chan struct{}
	once   sync.Once
}

func newConnListener() *connListener {
	return &connListener{conns: make(chan net.Conn), closed: make(chan struct{})}
}

func (l *connListener) offer(c net.Conn) {
	select {
	case l.conns <- c:
	case <-l.closed:
		_ = c.Close()
	}
}

func (l *connListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *connListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

func (l *connListener) Addr() net.Addr { return egressAddr("test") }

// TestEgress_HTTPServerKeepAlive: net/http's server serves a relayed
// conn, deadlines included: it aborts its background read after every
// request with a read deadline in the past, which must leave the conn
// usable for the next request.
func TestEgress_HTTPServerKeepAlive(t *testing.T) {
	f, addr := newEgressFixture(t, nil)
	cl := newConnListener()
	var offered atomic.Int32
	startRelay(t, f.client, func(c net.Conn) {
		offered.Add(1)
		cl.offer(c)
	})
	hs := &http.Server{
		ReadHeaderTimeout: waitFor,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			_, _ = fmt.Fprintf(w, "hi %s", r.URL.Path)
		}),
	}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(cl) }()
	defer func() {
		_ = hs.Close()
		if err := <-served; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("http.Server.Serve: %v", err)
		}
	}()
	tr := &http.Transport{Proxy: nil, DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", addr)
	}}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: waitFor}
	for i, path := range []string{"/one", "/two", "/three"} {
		var reused bool
		ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
			GotConn: func(info httptrace.GotConnInfo) { reused = info.Reused },
		})
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://example.test"+path, strings.NewReader("body"))
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("request %s: %v", path, err)
		}
		b, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if err != nil || string(b) != "hi "+path {
			t.Errorf("request %s: %q, %v", path, b, err)
		}
		if i > 0 && !reused {
			t.Errorf("request %s did not reuse the connection", path)
		}
	}
	if n := offered.Load(); n != 1 {
		t.Errorf("%d conns offered for one keep-alive connection", n)
	}
}

func TestEgressConn_Deadlines(t *testing.T) {
	f, addr := newEgressFixture(t, nil)
	conns := make(chan net.Conn, 1)
	startRelay(t, f.client, func(c net.Conn) { conns <- c })
	local := dialEgress(t, addr)
	c := <-conns
	defer func() { _ = c.Close() }()

	var ne net.Error
	_ = c.SetReadDeadline(time.Now().Add(-time.Second))
	if _, err := local.Write([]byte("kept")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Read(make([]byte, 8)); !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("Read past its deadline: %v, want a timeout", err)
	}
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	buf := make([]byte, 8)
	n, err := c.Read(buf) // "kept" may be there already, or not yet
	if err == nil && string(buf[:n]) != "kept" {
		t.Fatalf("Read got %q, want %q", buf[:n], "kept")
	}
	if err != nil && !(errors.As(err, &ne) && ne.Timeout()) {
		t.Fatalf("Read with a deadline: %v", err)
	}
	_ = c.SetReadDeadline(time.Time{})
	if err != nil {
		if n, err = c.Read(buf); err != nil || string(buf[:n]) != "kept" {
			t.Fatalf("Read after the deadline was lifted: %q, %v; want %q: a deadline must lose nothing", buf[:n], err, "kept")
		}
	}

	_ = c.SetWriteDeadline(time.Now().Add(-time.Second))
	if _, err := c.Write([]byte("x")); !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("Write past its deadline: %v, want a timeout", err)
	}
	_ = c.SetDeadline(time.Time{})
	if _, err := c.Write([]byte("back")); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 4)
	if _, err := io.ReadFull(local, got); err != nil || string(got) != "back" {
		t.Fatalf("command read %q, %v; want %q", got, err, "back")
	}
	if c.LocalAddr() == nil || c.RemoteAddr() == nil {
		t.Errorf("nil address: local %v, remote %v", c.LocalAddr(), c.RemoteAddr())
	}
}

// TestEgress_WaitingCap: past maxEgressWaiting connections waiting for
// the host, a new one is closed at once; those waiting are relayed once
// the host relays.
func TestEgress_WaitingCap(t *testing.T) {
	f, addr := newEgressFixture(t, &Server{egressWait: time.Hour})
	var waiting []*net.TCPConn
	for range maxEgressWaiting {
		waiting = append(waiting, dialEgress(t, addr))
	}
	// Accepted in the order they connected, so after every one above.
	extra := dialEgress(t, addr)
	_ = extra.SetReadDeadline(time.Now().Add(waitFor / 2))
	if _, err := io.ReadAll(extra); err != nil {
		t.Fatalf("connection %d: %v; want it closed at once", maxEgressWaiting+1, err)
	}

	startRelay(t, f.client, echo)
	for i, c := range waiting {
		msg := fmt.Sprintf("conn %d", i)
		if _, err := c.Write([]byte(msg)); err != nil {
			t.Fatal(err)
		}
		_ = c.CloseWrite()
		if got, err := io.ReadAll(c); err != nil || string(got) != msg {
			t.Fatalf("waiting connection %d: echo %q, %v", i, got, err)
		}
	}
}

func TestEgress_WaitLimit(t *testing.T) {
	_, addr := newEgressFixture(t, &Server{egressWait: 50 * time.Millisecond})
	c := dialEgress(t, addr)
	if _, err := io.ReadAll(c); err != nil {
		t.Fatalf("a connection no stream takes: %v; want it closed after the wait limit", err)
	}
}

// TestEgress_StreamCap: at most maxEgressStreams streams are open; once
// one ends, the next waiting connection is relayed.
func TestEgress_StreamCap(t *testing.T) {
	f, addr := newEgressFixture(t, nil)
	conns := make(chan net.Conn, maxEgressStreams+2)
	startRelay(t, f.client, func(c net.Conn) { conns <- c })
	// One at a time: more at once than maxEgressWaiting would be closed.
	locals := map[string]*net.TCPConn{}
	var held []net.Conn
	defer func() {
		for _, c := range held {
			_ = c.Close()
		}
	}()
	for range maxEgressStreams {
		c := dialEgress(t, addr)
		locals[c.LocalAddr().String()] = c
		held = append(held, <-conns)
	}
	for range 2 {
		c := dialEgress(t, addr)
		locals[c.LocalAddr().String()] = c
	}
	select {
	case c := <-conns:
		_ = c.Close()
		t.Fatalf("conn %d offered while %d streams were open", maxEgressStreams+1, maxEgressStreams)
	case <-time.After(200 * time.Millisecond): // a bound to catch a broken cap, not a synchronisation
	}
	// End one stream, both sides: the next connection takes its slot.
	first := held[0]
	_ = locals[first.RemoteAddr().String()].Close()
	if _, err := io.ReadAll(first); err != nil {
		t.Fatalf("host read after the command closed: %v", err)
	}
	_ = first.Close()
	select {
	case c := <-conns:
		held = append(held, c)
	case <-time.After(waitFor):
		t.Fatal("no conn offered after a stream ended")
	}
}

func TestRelayEgress_AgentWithoutEgress(t *testing.T) {
	f := newFixture(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	err := f.client.RelayEgress(ctx, func(c net.Conn) {
		_ = c.Close()
		t.Error("a conn was offered by an agent without --egress")
	})
	if !errdefs.IsNotFound(err) || !strings.Contains(err.Error(), "--egress") {
		t.Errorf("RelayEgress with an agent without --egress: %v; want a not-found error naming --egress", err)
	}
	if ctx.Err() != nil {
		t.Errorf("RelayEgress returned only when its ctx ended")
	}
	if err := rawPost(t, f.client, pathEgress, nil); !errdefs.IsNotFound(err) {
		t.Errorf("POST %s without --egress: %v, want not found", pathEgress, err)
	}
}

func TestRelayEgress_NeedsTheProof(t *testing.T) {
	key := bytes.Repeat([]byte{1}, channelKeyBytes)
	f, _ := newEgressFixture(t, &Server{Key: bytes.Repeat([]byte{2}, channelKeyBytes)})
	f.client.RequireProof(key, "not its agent")
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	err := f.client.RelayEgress(ctx, func(c net.Conn) { _ = c.Close() })
	if !errdefs.IsFailedPrecondition(err) {
		t.Errorf("RelayEgress to an agent that fails the proof: %v, want the refusal", err)
	}
}

func TestExec_EgressEnv(t *testing.T) {
	for _, k := range []string{"HTTPS_PROXY", "http_proxy", "https_proxy", "NO_PROXY", "no_proxy",
		"SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "GIT_SSL_CAINFO", "NODE_EXTRA_CA_CERTS"} {
		t.Setenv(k, "")
	}
	t.Setenv("HTTP_PROXY", "http://from-the-agent-env")
	const show = `printf '%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s' "$HTTP_PROXY" "$HTTPS_PROXY" "$http_proxy" "$https_proxy" "$NO_PROXY" "$no_proxy" ` +
		`"$SSL_CERT_FILE" "$REQUESTS_CA_BUNDLE" "$CURL_CA_BUNDLE" "$GIT_SSL_CAINFO" "$NODE_EXTRA_CA_CERTS"`
	run := func(c *Client, env map[string]string) string {
		var out bytes.Buffer
		mustExec(t, c, sandbox.ExecRequest{Argv: []string{show}, Env: env, Stdout: &out})
		return out.String()
	}
	t.Run("none", func(t *testing.T) {
		f := newFixture(t, nil)
		if got, want := run(f.client, nil), "http://from-the-agent-env"+strings.Repeat("|", 10); got != want {
			t.Errorf("env without egress flags: %q, want %q", got, want)
		}
	})
	t.Run("egress_and_ca", func(t *testing.T) {
		f, addr := newEgressFixture(t, &Server{EgressCA: "/run/ca.pem", EgressCABundle: "/etc/b.pem"})
		p, no := "http://"+addr, "localhost,127.0.0.1,::1"
		want := strings.Join([]string{p, p, p, p, no, no, "/etc/b.pem", "/etc/b.pem", "/etc/b.pem", "/etc/b.pem", "/run/ca.pem"}, "|")
		if got := run(f.client, nil); got != want {
			t.Errorf("env:\n got %q\nwant %q", got, want)
		}
		override := map[string]string{"HTTPS_PROXY": "http://mine", "no_proxy": "", "SSL_CERT_FILE": "/my.pem", "NODE_EXTRA_CA_CERTS": "/n.pem"}
		want = strings.Join([]string{p, "http://mine", p, p, no, "", "/my.pem", "/etc/b.pem", "/etc/b.pem", "/etc/b.pem", "/n.pem"}, "|")
		if got := run(f.client, override); got != want {
			t.Errorf("env with the request's own:\n got %q\nwant %q", got, want)
		}
	})
}

// testCA returns a self-signed CA certificate as PEM, and its private key
// as PEM.
func testCA(t *testing.T) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "hutch test egress CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

func TestWriteEgressCABundle(t *testing.T) {
	ca, key := testCA(t)
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	caFile := write("ca.pem", append([]byte("a comment line\n"), ca...))
	system := write("system.pem", []byte("SYSTEM ROOTS, no final newline"))
	other := write("other.pem", []byte("not the first that exists\n"))
	missing := filepath.Join(dir, "missing.pem")

	tests := []struct {
		name    string
		ca      string
		systems []string
		want    string
		errText string
	}{
		{name: "system_then_ca", ca: caFile, systems: []string{missing, system, other}, want: "SYSTEM ROOTS, no final newline\n" + string(ca)},
		{name: "no_system_bundle", ca: caFile, systems: []string{missing}, want: string(ca)},
		{name: "not_pem", ca: write("junk.pem", []byte("junk")), errText: "holds no PEM certificate"},
		{name: "private_key", ca: write("both.pem", append(append([]byte{}, ca...), key...)), errText: `"EC PRIVATE KEY" block`},
		{name: "bad_certificate", ca: write("bad.pem", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte("nope")})), errText: "does not parse"},
		{name: "missing_ca", ca: missing, errText: "no such file"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "bundle.pem")
			err := writeEgressCABundle(out, tc.ca, tc.systems)
			if tc.errText != "" {
				if err == nil || !strings.Contains(err.Error(), tc.errText) {
					t.Errorf("error %v, want one containing %q", err, tc.errText)
				}
				if _, serr := os.Stat(out); serr == nil {
					t.Errorf("a bundle was written despite the error")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != tc.want {
				t.Errorf("bundle:\n%s\nwant:\n%s", b, tc.want)
			}
			if fi, _ := os.Stat(out); fi.Mode().Perm() != 0o644 {
				t.Errorf("bundle mode %v, want 0644", fi.Mode().Perm())
			}
		})
	}
}

func TestRun_EgressOptionsRefused(t *testing.T) {
	ca, _ := testCA(t)
	dir := t.TempDir()
	tests := []struct {
		name string
		opts Options
		want string
	}{
		{"hostname", Options{Egress: "localhost:3128"}, "loopback IP and port"},
		{"not_loopback", Options{Egress: "10.0.0.1:3128"}, "loopback IP and port"},
		{"any_address", Options{Egress: "0.0.0.0:3128"}, "loopback IP and port"},
		{"no_port", Options{Egress: "127.0.0.1"}, "loopback IP and port"},
		{"pem_without_file", Options{EgressCAPEM: base64.StdEncoding.EncodeToString(ca)}, "needs --egress-ca"},
		{"relative_ca", Options{EgressCA: "ca.pem"}, "absolute path"},
		{"pem_not_base64", Options{EgressCA: filepath.Join(dir, "a.pem"), EgressCAPEM: "%%%"}, "not valid base64"},
		{"pem_not_a_certificate", Options{EgressCA: filepath.Join(dir, "b.pem"), EgressCAPEM: base64.StdEncoding.EncodeToString([]byte("junk"))}, "holds no PEM certificate"},
		{"ca_missing", Options{EgressCA: filepath.Join(dir, "missing.pem"), EgressCABundle: filepath.Join(dir, "bundle.pem")}, "no such file"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// Were the options taken, Run would serve this stdio connection,
			// which ends at once, and return nil.
			tc.opts.Stdio, tc.opts.Stdin, tc.opts.Stdout = true, strings.NewReader(""), io.Discard
			tc.opts.Log = testLogger(t)
			err := Run(context.Background(), tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Run: %v, want an error containing %q", err, tc.want)
			}
		})
	}
	for _, name := range []string{"a.pem", "b.pem"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			t.Errorf("%s was written from a refused PEM", name)
		}
	}
}

func TestRun_EgressListenFails(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	err = Run(context.Background(), Options{Stdio: true, Stdin: strings.NewReader(""), Stdout: io.Discard, Egress: l.Addr().String()})
	if err == nil || !strings.Contains(err.Error(), "listen for egress") {
		t.Errorf("Run on a taken egress port: %v, want a listen error", err)
	}
}

// TestRun_Egress: Run with the egress flags writes the CA and the bundle,
// gives commands the env, and relays.
func TestRun_Egress(t *testing.T) {
	ca, _ := testCA(t)
	dir := t.TempDir()
	caFile, bundle := filepath.Join(dir, "sub", "ca.pem"), filepath.Join(dir, "bundle.pem")
	agentEnd, hostEnd := net.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() {
		ran <- Run(ctx, Options{
			Stdio: true, Stdin: agentEnd, Stdout: agentEnd, Log: testLogger(t),
			Egress: "127.0.0.1:0", EgressCA: caFile, EgressCAPEM: base64.StdEncoding.EncodeToString(ca), EgressCABundle: bundle,
		})
	}()
	var once sync.Once
	c := NewClient(func(context.Context) (net.Conn, error) {
		conn, err := net.Conn(nil), errors.New("the pipe was already used")
		once.Do(func() { conn, err = hostEnd, nil })
		return conn, err
	}, testLogger(t))
	defer func() {
		_ = c.Close()
		cancel()
		if err := <-ran; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()

	var out bytes.Buffer
	mustExec(t, c, sandbox.ExecRequest{Argv: []string{`printf '%s %s %s' "$HTTP_PROXY" "$SSL_CERT_FILE" "$NODE_EXTRA_CA_CERTS"`}, Stdout: &out})
	proxy, rest, _ := strings.Cut(out.String(), " ")
	if want := bundle + " " + caFile; rest != want || !strings.HasPrefix(proxy, "http://127.0.0.1:") {
		t.Fatalf("env %q, want http://127.0.0.1:PORT %s", out.String(), want)
	}
	// Run is serving, so it has written both files.
	if b, err := os.ReadFile(caFile); err != nil || !bytes.Equal(b, ca) {
		t.Errorf("CA file: %v, content equal: %v", err, bytes.Equal(b, ca))
	}
	if fi, err := os.Stat(caFile); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("CA file mode: %v, %v; want 0644", fi, err)
	}
	if b, err := os.ReadFile(bundle); err != nil || !bytes.HasSuffix(b, ca) {
		t.Errorf("bundle: %v; ends with the CA: %v", err, bytes.HasSuffix(b, ca))
	}

	relayCtx, stopRelay := context.WithCancel(context.Background())
	relayed := make(chan error, 1)
	go func() { relayed <- c.RelayEgress(relayCtx, echo) }()
	defer func() {
		stopRelay()
		if err := <-relayed; err != nil {
			t.Errorf("RelayEgress: %v", err)
		}
	}()
	local := dialEgress(t, strings.TrimPrefix(proxy, "http://"))
	_, _ = local.Write([]byte("through Run"))
	_ = local.CloseWrite()
	if got, err := io.ReadAll(local); err != nil || string(got) != "through Run" {
		t.Errorf("echo through Run's relay: %q, %v", got, err)
	}
}

// TestEgress_StalledStreamStallsNothingElse: a command that stops reading
// what the host sends it fills its own stream's buffer only; commands'
// stdin and other streams still flow.
func TestEgress_StalledStreamStallsNothingElse(t *testing.T) {
	f, addr := newEgressFixture(t, nil)
	conns := make(chan net.Conn, 1)
	startRelay(t, f.client, func(c net.Conn) { conns <- c })
	dialEgress(t, addr) // never read
	c := <-conns
	defer func() { _ = c.Close() }()
	// Write until the stream takes nothing for a while: every buffer on
	// the way is full.
	chunk := make([]byte, 64<<10)
	for sent := 0; ; sent += len(chunk) {
		_ = c.SetWriteDeadline(time.Now().Add(300 * time.Millisecond))
		if _, err := c.Write(chunk); err != nil {
			if ne := net.Error(nil); !errors.As(err, &ne) || !ne.Timeout() {
				t.Fatal(err)
			}
			break
		}
		if sent > 256<<20 {
			t.Fatal("the stream took 256 MiB without the command reading")
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	var out bytes.Buffer
	res, err := f.client.Exec(ctx, sandbox.ExecRequest{Argv: []string{"wc -c"}, Stdin: bytes.NewReader(make([]byte, 4<<20)), Stdout: &out})
	if err != nil || res.ExitCode != 0 || strings.TrimSpace(out.String()) != "4194304" {
		t.Errorf("exec with 4 MiB of stdin beside a stalled stream: %+v, %v, output %q", res, err, out.String())
	}
}

// TestFirstWritable: a bundle that /etc cannot take (an image user that
// is not root, a read-only root) goes to the next place; other errors
// stop.
func TestFirstWritable(t *testing.T) {
	denied := map[string]error{
		"/etc/b":  &fs.PathError{Op: "open", Path: "/etc/b", Err: fs.ErrPermission},
		"/run/b":  &fs.PathError{Op: "open", Path: "/run/b", Err: syscall.EROFS},
		"/weird":  errors.New("disk on fire"),
		"/tmp/ok": nil,
	}
	write := func(p string) error { return denied[p] }
	if got, err := firstWritable([]string{"/etc/b", "/run/b", "/tmp/ok"}, write); err != nil || got != "/tmp/ok" {
		t.Errorf("firstWritable = %q, %v; want /tmp/ok", got, err)
	}
	if _, err := firstWritable([]string{"/etc/b", "/weird", "/tmp/ok"}, write); err == nil || err.Error() != "disk on fire" {
		t.Errorf("another error did not stop it: %v", err)
	}
	if _, err := firstWritable([]string{"/etc/b", "/run/b"}, write); !errors.Is(err, fs.ErrPermission) {
		t.Errorf("none writable: %v, want the first error", err)
	}
}

// TestEgressPump: a pump on an agent that relays nothing stops rather
// than retry forever, and runs again when asked; on an agent that relays,
// it carries connections until stopped.
func TestEgressPump(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	bare := newFixture(t, nil)
	var p EgressPump
	p.Run(bare.client, func(c net.Conn) { _ = c.Close() }, log)
	done := p.done
	select {
	case <-done:
	case <-time.After(waitFor):
		t.Fatal("the pump kept going on an agent without --egress")
	}
	p.Run(bare.client, func(c net.Conn) { _ = c.Close() }, log)
	if p.done == done {
		t.Error("Run did not start a stopped pump again")
	}
	p.Stop()

	f, addr := newEgressFixture(t, nil)
	p.Run(f.client, echo, log)
	running := p.done
	p.Run(f.client, echo, log)
	if p.done != running {
		t.Error("Run started a second pump on the same client")
	}
	c := dialEgress(t, addr)
	if _, err := c.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4)
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "ping" {
		t.Errorf("through the pump: %q, %v", buf, err)
	}
	_ = c.Close()
	p.Stop()
	select {
	case <-running:
	case <-time.After(waitFor):
		t.Error("Stop did not end the pump")
	}
}
