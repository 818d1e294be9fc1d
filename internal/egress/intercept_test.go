package egress_test

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/internal/egress"
	"github.com/hutchsandbox/hutch/internal/netpolicy"
	"github.com/hutchsandbox/hutch/internal/testenv"
)

// The secret of these tests, as the vault hands it to the proxy.
const (
	secretName  = "GH_TOKEN"
	placeholder = "hutch-placeholder-0123456789abcdef0123456789abcdef"
	realValue   = "ghp_the-real-value-4f2a"
)

// pki is the "internet's" CA: it signs the upstreams' certificates, and
// the proxy trusts it through UpstreamRoots.
type pki struct {
	ca   *testenv.CA
	pool *x509.CertPool
}

func newPKI(t *testing.T) *pki {
	ca := testenv.NewCA(t, "test internet CA")
	return &pki{ca: ca, pool: ca.Pool()}
}

func (p *pki) serverCert(t *testing.T, name string) tls.Certificate { return p.ca.Server(t, name) }

// seenReq is what an upstream received.
type seenReq struct {
	host, path, query, auth, custom, remote string
	body                                    string
	contentLength                           int64
	bodyErr                                 error
}

// upstream records every request and echoes its Authorization header
// back, as some APIs echo what they were sent.
type upstream struct {
	srv  *httptest.Server
	mu   sync.Mutex
	reqs []seenReq
}

// newUpstream starts an upstream: over TLS with a certificate for name
// from p, with httptest's own certificate when p is nil, and in plain
// HTTP when name is empty.
func newUpstream(t *testing.T, p *pki, name string) *upstream {
	t.Helper()
	u := &upstream{}
	u.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		u.mu.Lock()
		u.reqs = append(u.reqs, seenReq{
			host: r.Host, path: r.URL.EscapedPath(), query: r.URL.RawQuery,
			auth: r.Header.Get("Authorization"), custom: r.Header.Get("X-Token"), remote: r.RemoteAddr,
			body: string(body), contentLength: r.ContentLength, bodyErr: err,
		})
		u.mu.Unlock()
		w.Header().Set("X-Echo-Authorization", r.Header.Get("Authorization"))
		_, _ = io.WriteString(w, "upstream says ok")
	}))
	switch {
	case name == "":
		u.srv.Start()
	case p != nil:
		u.srv.TLS = &tls.Config{Certificates: []tls.Certificate{p.serverCert(t, name)}}
		u.srv.StartTLS()
	default:
		u.srv.StartTLS()
	}
	t.Cleanup(u.srv.Close)
	return u
}

func (u *upstream) requests() []seenReq {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]seenReq(nil), u.reqs...)
}

func (u *upstream) addr() string { return u.srv.Listener.Addr().String() }

// events collects what the proxy records.
type events struct {
	mu   sync.Mutex
	list []egress.Event
}

func (e *events) record(ev egress.Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.list = append(e.list, ev)
}

func (e *events) get() []egress.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]egress.Event(nil), e.list...)
}

// fixture is a proxy with a CA and the secret, in front of api.test (the
// secret's host), other.test (another host), bad.test (a certificate the
// proxy does not trust) and plain.test (plain HTTP).
type fixture struct {
	h       *harness
	api     *upstream
	other   *upstream
	bad     *upstream
	plain   *upstream
	events  *events
	secrets atomic.Pointer[[]egress.Secret]
	guestCA *x509.CertPool
}

func mustList(t *testing.T, entries ...string) netpolicy.Allowlist {
	t.Helper()
	a, err := netpolicy.ParseAllowlist(entries)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func apiSecret(t *testing.T) egress.Secret {
	return egress.Secret{Name: secretName, Placeholder: placeholder, Value: realValue, Hosts: mustList(t, "api.test")}
}

func newFixture(t *testing.T, policy func() netpolicy.Policy, secrets ...egress.Secret) *fixture {
	t.Helper()
	p := newPKI(t)
	f := &fixture{
		api:    newUpstream(t, p, "api.test"),
		other:  newUpstream(t, p, "other.test"),
		bad:    newUpstream(t, nil, "bad.test"),
		plain:  newUpstream(t, nil, ""),
		events: &events{},
	}
	f.secrets.Store(&secrets)
	ca, err := egress.LoadOrCreateCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	f.guestCA = x509.NewCertPool()
	if !f.guestCA.AppendCertsFromPEM(ca.CertPEM()) {
		t.Fatal("the CA's PEM does not parse")
	}
	f.h = start(t, func(h *harness, px *egress.Proxy) {
		px.Policy = policy
		px.Dial = h.routes(map[string]string{
			"api.test:443":   f.api.addr(),
			"other.test:443": f.other.addr(),
			"bad.test:443":   f.bad.addr(),
			"plain.test:80":  f.plain.addr(),
			"api.test:80":    f.plain.addr(),
		})
		px.CA = ca
		px.UpstreamRoots = p.pool
		px.Secrets = func() []egress.Secret { return *f.secrets.Load() }
		px.Record = f.events.record
	})
	return f
}

// client trusts the office's CA, as a guest with the CA installed does.
func (f *fixture) client() *http.Client {
	return f.h.client(&tls.Config{RootCAs: f.guestCA})
}

func (f *fixture) do(t *testing.T, c *http.Client, req *http.Request) (*http.Response, string) {
	t.Helper()
	res, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL.Host, err)
	}
	body, err := io.ReadAll(res.Body)
	_ = res.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	return res, string(body)
}

// assertNoValue checks that the real value is nowhere but where it was
// meant to go: not in the logs, the events or the texts given.
func (f *fixture) assertNoValue(t *testing.T, texts ...string) {
	t.Helper()
	texts = append(texts, f.h.logs.String(), fmt.Sprintf("%+v", f.events.get()))
	for _, s := range texts {
		if strings.Contains(s, realValue) {
			t.Errorf("the real value leaked into %q", s)
		}
	}
}

func allowAll() netpolicy.Policy { return netpolicy.Policy{Mode: netpolicy.ModeOpen} }

func TestIntercept_Substitutes(t *testing.T) {
	f := newFixture(t, allowAll, apiSecret(t))
	testCases := []struct {
		name  string
		build func(req *http.Request)
		check func(s seenReq) bool
	}{
		{"bearer_header", func(req *http.Request) { req.Header.Set("Authorization", "Bearer "+placeholder) },
			func(s seenReq) bool { return s.auth == "Bearer "+realValue }},
		{"other_header", func(req *http.Request) { req.Header.Set("X-Token", "token="+placeholder+";v=1") },
			func(s seenReq) bool { return s.custom == "token="+realValue+";v=1" }},
		{"basic_auth", func(req *http.Request) { req.SetBasicAuth("x-access-token", placeholder) },
			func(s seenReq) bool {
				r := &http.Request{Header: http.Header{"Authorization": {s.auth}}}
				user, pass, ok := r.BasicAuth()
				return ok && user == "x-access-token" && pass == realValue
			}},
		{"query", func(req *http.Request) { req.URL.RawQuery = "access_token=" + placeholder + "&x=1" },
			func(s seenReq) bool { return s.query == "access_token="+realValue+"&x=1" }},
		{"path", func(req *http.Request) { req.URL.Path = "/bot" + placeholder + "/getMe" },
			func(s seenReq) bool { return s.path == "/bot"+realValue+"/getMe" }},
		// The Host header names another server: the request still goes
		// to the CONNECT's host, and says so.
		{"host_header_ignored", func(req *http.Request) {
			req.Header.Set("Authorization", "Bearer "+placeholder)
			req.Host = "other.test"
		}, func(s seenReq) bool { return s.host == "api.test" && s.auth == "Bearer "+realValue }},
	}
	for i, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest("GET", "https://api.test/v1/user", nil)
			tc.build(req)
			res, body := f.do(t, f.client(), req)
			if res.StatusCode != http.StatusOK || body != "upstream says ok" {
				t.Fatalf("%s: %s %q, want 200", tc.name, res.Status, body)
			}
			reqs := f.api.requests()
			if len(reqs) != i+1 {
				t.Fatalf("api.test got %d requests, want %d", len(reqs), i+1)
			}
			if got := reqs[i]; !tc.check(got) || strings.Contains(fmt.Sprint(got), placeholder) {
				t.Errorf("api.test saw %+v, want the real value in place of the placeholder", got)
			}
			ev := f.events.get()
			if len(ev) != i+1 {
				t.Fatalf("%d events after %d requests: %+v", len(ev), i+1, ev)
			}
			if e := ev[i]; e.Kind != egress.KindSubstituted || e.Secret != secretName || e.Host != "api.test" ||
				e.Port != 443 || e.Office != office || e.Reason != "" || e.Time.IsZero() {
				t.Errorf("event %+v, want a substitution of %s toward api.test:443", e, secretName)
			}
			if i == 0 {
				// Responses are not rewritten: an upstream that echoes
				// the request hands the value to the command (a limit
				// the package doc states).
				if got := res.Header.Get("X-Echo-Authorization"); got != "Bearer "+realValue {
					t.Errorf("echoed Authorization %q: the proxy rewrote the response", got)
				}
			}
		})
	}

	t.Run("one_event_per_secret", func(t *testing.T) {
		before := len(f.events.get())
		req, _ := http.NewRequest("GET", "https://api.test/x?t="+placeholder, nil)
		req.Header.Set("Authorization", "token "+placeholder)
		if res, body := f.do(t, f.client(), req); res.StatusCode != http.StatusOK {
			t.Fatalf("%s %q", res.Status, body)
		}
		if n := len(f.events.get()) - before; n != 1 {
			t.Errorf("%d events for one request using the placeholder twice, want 1", n)
		}
	})

	logs := f.h.logs.String()
	if lines := logLines(logs, "egress placeholder substituted"); len(lines) == 0 ||
		!strings.Contains(lines[0], "secret="+secretName) || !strings.Contains(lines[0], "host=api.test") {
		t.Errorf("want info lines naming the substitutions, got:\n%s", logs)
	}
	f.assertNoValue(t)
}

func TestIntercept_RefusesUnlistedHost(t *testing.T) {
	// Open mode lets every public host through; the secret still goes
	// only to its own.
	f := newFixture(t, allowAll, apiSecret(t))
	testCases := []struct {
		name  string
		build func(req *http.Request)
	}{
		{"header", func(req *http.Request) { req.Header.Set("Authorization", "Bearer "+placeholder) }},
		{"basic_auth", func(req *http.Request) { req.SetBasicAuth("me", placeholder) }},
		{"query_encoded", func(req *http.Request) { req.URL.RawQuery = "t=%68" + url.QueryEscape(placeholder[1:]) }},
		{"path", func(req *http.Request) { req.URL.Path = "/" + placeholder }},
		{"body", func(req *http.Request) {
			req.Method = "POST"
			req.Body = io.NopCloser(strings.NewReader(`{"token":"` + placeholder + `"}`))
		}},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			before := len(f.events.get())
			req, _ := http.NewRequest("GET", "https://other.test/collect", nil)
			tc.build(req)
			res, body := f.do(t, f.client(), req)
			if res.StatusCode != http.StatusForbidden {
				t.Fatalf("a placeholder toward other.test: %s %q, want 403", res.Status, body)
			}
			want := "hutch egress: secret GH_TOKEN refused for other.test:443: host not listed for this secret"
			if strings.TrimSpace(body) != want {
				t.Errorf("body %q, want %q", body, want)
			}
			ev := f.events.get()[before:]
			if len(ev) != 1 || ev[0].Kind != egress.KindRefused || ev[0].Reason != egress.ReasonNotListed ||
				ev[0].Secret != secretName || ev[0].Host != "other.test" || ev[0].Port != 443 || ev[0].Office != office {
				t.Errorf("events %+v, want one refusal of %s toward other.test:443", ev, secretName)
			}
			f.assertNoValue(t, body)
		})
	}
	if reqs := f.other.requests(); len(reqs) != 0 {
		t.Errorf("other.test got %d requests, want none: %+v", len(reqs), reqs)
	}

	// Without a placeholder, other.test is reached as before.
	res, body := f.do(t, f.client(), must(http.NewRequest("GET", "https://other.test/plain", nil)))
	if res.StatusCode != http.StatusOK || len(f.other.requests()) != 1 {
		t.Errorf("GET other.test without a placeholder: %s %q", res.Status, body)
	}

	lines := logLines(f.h.logs.String(), "egress placeholder refused")
	if len(lines) != len(testCases) {
		t.Fatalf("want %d refusal lines, got:\n%s", len(testCases), f.h.logs.String())
	}
	for _, want := range []string{"level=WARN", "office=" + office, "secret=" + secretName, "host=other.test",
		"port=443", "exfiltration=true", `reason="host not listed for this secret"`} {
		if !strings.Contains(lines[0], want) {
			t.Errorf("refusal line %q lacks %q", lines[0], want)
		}
	}
}

func must(req *http.Request, err error) *http.Request {
	if err != nil {
		panic(err)
	}
	return req
}

func TestIntercept_Expired(t *testing.T) {
	sec := apiSecret(t)
	sec.Expires = time.Now().Add(-time.Minute)
	f := newFixture(t, allowAll, sec)
	req, _ := http.NewRequest("GET", "https://api.test/v1/user", nil)
	req.Header.Set("Authorization", "Bearer "+placeholder)
	res, body := f.do(t, f.client(), req)
	if res.StatusCode != http.StatusForbidden || !strings.Contains(body, "secret GH_TOKEN refused for api.test:443: expired") {
		t.Fatalf("an expired secret: %s %q, want 403 naming it", res.Status, body)
	}
	if reqs := f.api.requests(); len(reqs) != 0 {
		t.Errorf("api.test got %+v, want nothing", reqs)
	}
	if ev := f.events.get(); len(ev) != 1 || ev[0].Kind != egress.KindRefused || ev[0].Reason != egress.ReasonExpired {
		t.Errorf("events %+v, want one refusal, expired", ev)
	}
	if lines := logLines(f.h.logs.String(), "egress placeholder refused"); len(lines) != 1 || !strings.Contains(lines[0], "exfiltration=false") {
		t.Errorf("an expired secret toward its own host is no exfiltration attempt; got:\n%s", f.h.logs.String())
	}
	f.assertNoValue(t, body)
}

func TestIntercept_PlainHTTPRefused(t *testing.T) {
	f := newFixture(t, allowAll, apiSecret(t))
	for _, host := range []string{"api.test", "plain.test"} {
		req, _ := http.NewRequest("GET", "http://"+host+"/v1/user", nil)
		req.Header.Set("Authorization", "Bearer "+placeholder)
		res, body := f.do(t, f.client(), req)
		want := "hutch egress: secret GH_TOKEN refused for " + host + ":80: plain HTTP"
		if res.StatusCode != http.StatusForbidden || strings.TrimSpace(body) != want {
			t.Errorf("a placeholder in plain HTTP to %s: %s %q, want 403 %q", host, res.Status, body, want)
		}
		f.assertNoValue(t, body)
	}
	if reqs := f.plain.requests(); len(reqs) != 0 {
		t.Errorf("the plain upstream got %+v, want nothing", reqs)
	}
	ev := f.events.get()
	if len(ev) != 2 || ev[0].Reason != egress.ReasonPlainHTTP || ev[1].Reason != egress.ReasonPlainHTTP || ev[0].Port != 80 {
		t.Errorf("events %+v, want two refusals, plain HTTP", ev)
	}
	lines := logLines(f.h.logs.String(), "egress placeholder refused")
	if len(lines) != 2 || !strings.Contains(lines[0], "exfiltration=false") || !strings.Contains(lines[1], "exfiltration=true") {
		t.Errorf("want refusals toward api.test (its host) and plain.test (not), got:\n%s", f.h.logs.String())
	}
	if denied := logLines(f.h.logs.String(), "egress denied"); len(denied) != 2 {
		t.Errorf("want the two refused requests logged as denied, got:\n%s", f.h.logs.String())
	}

	// Without a placeholder, plain HTTP goes through.
	res, body := f.do(t, f.client(), must(http.NewRequest("POST", "http://plain.test/", strings.NewReader("data"))))
	if res.StatusCode != http.StatusOK || len(f.plain.requests()) != 1 || f.plain.requests()[0].body != "data" {
		t.Errorf("plain HTTP without a placeholder: %s %q", res.Status, body)
	}
}

// TestIntercept_Rotation reads Secrets per request: two requests on one
// kept-alive tunnel carry the value current at each.
func TestIntercept_Rotation(t *testing.T) {
	f := newFixture(t, allowAll, apiSecret(t))
	c := f.client()
	c.Transport.(*http.Transport).DisableKeepAlives = false
	defer c.CloseIdleConnections()
	send := func() {
		req, _ := http.NewRequest("GET", "https://api.test/v1/user", nil)
		req.Header.Set("Authorization", "Bearer "+placeholder)
		if res, body := f.do(t, c, req); res.StatusCode != http.StatusOK {
			t.Fatalf("%s %q", res.Status, body)
		}
	}
	send()
	rotated := apiSecret(t)
	rotated.Value = "ghp_rotated-value"
	f.secrets.Store(&[]egress.Secret{rotated})
	send()
	reqs := f.api.requests()
	if len(reqs) != 2 || reqs[0].auth != "Bearer "+realValue || reqs[1].auth != "Bearer ghp_rotated-value" {
		t.Fatalf("api.test saw %+v, want the value before and after rotation", reqs)
	}
	if reqs[0].remote != reqs[1].remote {
		t.Errorf("the two requests came over different upstream connections (%s, %s), want one tunnel", reqs[0].remote, reqs[1].remote)
	}
	if n := len(logLines(f.h.logs.String(), "egress allowed")); n != 1 {
		t.Errorf("want one CONNECT for both requests, got %d:\n%s", n, f.h.logs.String())
	}
}

func TestIntercept_Body(t *testing.T) {
	withBody := apiSecret(t)
	withBody.Body = true
	f := newFixture(t, allowAll, withBody)
	post := func(host, body string) (*http.Response, string) {
		t.Helper()
		return f.do(t, f.client(), must(http.NewRequest("POST", "https://"+host+"/gists", strings.NewReader(body))))
	}

	t.Run("substituted", func(t *testing.T) {
		res, body := post("api.test", `{"token":"`+placeholder+`"}`)
		if res.StatusCode != http.StatusOK {
			t.Fatalf("%s %q", res.Status, body)
		}
		got := f.api.requests()[0]
		want := `{"token":"` + realValue + `"}`
		if got.body != want || got.contentLength != int64(len(want)) {
			t.Errorf("api.test got body %q (Content-Length %d), want %q (%d)", got.body, got.contentLength, want, len(want))
		}
	})

	t.Run("large_unchanged", func(t *testing.T) {
		large := strings.Repeat("x", 1<<20) + placeholder
		res, body := post("api.test", large)
		if res.StatusCode != http.StatusOK {
			t.Fatalf("%s %q", res.Status, body)
		}
		if got := f.api.requests()[1]; got.body != large {
			t.Errorf("a body over 1 MiB toward its host: got %d bytes, want it forwarded unchanged", len(got.body))
		}
	})

	t.Run("large_refused_elsewhere", func(t *testing.T) {
		before := len(f.events.get())
		res, body := post("other.test", strings.Repeat("y", 3<<19)+placeholder)
		if res.StatusCode != http.StatusForbidden || !strings.Contains(body, "host not listed for this secret") {
			t.Fatalf("a placeholder at the end of a large body toward other.test: %s %q, want 403", res.Status, body)
		}
		for _, r := range f.other.requests() {
			if strings.Contains(r.body, placeholder) || r.bodyErr == nil {
				t.Errorf("other.test received a whole body (%d bytes, error %v), want it cut before the placeholder", len(r.body), r.bodyErr)
			}
		}
		if ev := f.events.get()[before:]; len(ev) != 1 || ev[0].Reason != egress.ReasonNotListed || ev[0].Host != "other.test" {
			t.Errorf("events %+v, want one refusal toward other.test", ev)
		}
	})
	f.assertNoValue(t)
}

func TestIntercept_BodyWithoutBodyFlag(t *testing.T) {
	f := newFixture(t, allowAll, apiSecret(t))
	sent := `{"token":"` + placeholder + `"}`
	res, body := f.do(t, f.client(), must(http.NewRequest("POST", "https://api.test/x", strings.NewReader(sent))))
	if res.StatusCode != http.StatusOK {
		t.Fatalf("%s %q", res.Status, body)
	}
	if got := f.api.requests()[0].body; got != sent {
		t.Errorf("api.test got body %q, want it unchanged %q (Body is not set)", got, sent)
	}
	if ev := f.events.get(); len(ev) != 0 {
		t.Errorf("events %+v, want none: nothing was substituted", ev)
	}
}

func TestIntercept_UntrustedUpstream(t *testing.T) {
	// The secret names bad.test: only the failed verification keeps its
	// value from a server that may not be bad.test at all.
	sec := apiSecret(t)
	sec.Hosts = mustList(t, "api.test", "bad.test")
	f := newFixture(t, allowAll, sec)
	req, _ := http.NewRequest("GET", "https://bad.test/", nil)
	req.Header.Set("Authorization", "Bearer "+placeholder)
	res, body := f.do(t, f.client(), req)
	if res.StatusCode != http.StatusBadGateway || !strings.Contains(body, "cannot reach bad.test:443") ||
		!strings.Contains(body, "certificate") {
		t.Errorf("an upstream with an untrusted certificate: %s %q, want 502 naming the certificate", res.Status, body)
	}
	if reqs := f.bad.requests(); len(reqs) != 0 {
		t.Errorf("bad.test got %+v, want nothing", reqs)
	}
	f.assertNoValue(t, body)
}

// TestIntercept_NotTLS: with secrets and a CA, a tunnel that does not
// start with a TLS ClientHello is spliced as before, whether its client
// speaks first or waits for the server.
func TestIntercept_NotTLS(t *testing.T) {
	banner := "SSH-2.0-hutch-test\r\n"
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer func() { _ = c.Close() }()
				_, _ = io.WriteString(c, banner)
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	echo, _ := echoServer(t)
	// A TLS server for a protocol other than HTTP/1.1, which ignores ALPN.
	internet := newPKI(t)
	tl, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{internet.serverCert(t, "api.test")}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tl.Close() })
	go func() {
		for {
			c, err := tl.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(c, c); _ = c.Close() }()
		}
	}()
	ca, err := egress.LoadOrCreateCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	h := start(t, func(h *harness, p *egress.Proxy) {
		p.Policy = mustAllow(t, "ssh.test:22", "echo.test:7", "api.test")
		p.Dial = h.routes(map[string]string{"ssh.test:22": l.Addr().String(), "echo.test:7": echo, "api.test:443": tl.Addr().String()})
		p.CA = ca
		p.Secrets = func() []egress.Secret { return []egress.Secret{apiSecret(t)} }
	})

	t.Run("server_speaks_first", func(t *testing.T) {
		res, _, c, br := h.roundTrip(t, connectReq("ssh.test:22", ""))
		if res.StatusCode != http.StatusOK {
			t.Fatalf("CONNECT: %s", res.Status)
		}
		got, err := br.ReadString('\n')
		if err != nil || got != banner {
			t.Fatalf("banner %q, %v; want %q", got, err, banner)
		}
		if _, err := io.WriteString(c, "ping\n"); err != nil {
			t.Fatal(err)
		}
		if got, err := br.ReadString('\n'); err != nil || got != "ping\n" {
			t.Errorf("echo %q, %v", got, err)
		}
	})

	t.Run("client_speaks_first", func(t *testing.T) {
		res, _, _, br := h.roundTrip(t, connectReq("echo.test:7", "ping\n"))
		if res.StatusCode != http.StatusOK {
			t.Fatalf("CONNECT: %s", res.Status)
		}
		if got, err := bufio.NewReader(br).ReadString('\n'); err != nil || got != "ping\n" {
			t.Errorf("echo %q, %v", got, err)
		}
	})

	// A client that offers only h2 would fail a handshake with the proxy
	// (HTTP/1.1 only): its tunnel goes end to end, to the secret's own
	// host too, and the handshake verifies against the real server.
	t.Run("tls_without_http1", func(t *testing.T) {
		res, _, c, br := h.roundTrip(t, connectReq("api.test:443", ""))
		if res.StatusCode != http.StatusOK {
			t.Fatalf("CONNECT: %s", res.Status)
		}
		tc := tls.Client(&readerConn{Conn: c, r: br}, &tls.Config{RootCAs: internet.pool, ServerName: "api.test", NextProtos: []string{"h2"}})
		if err := tc.Handshake(); err != nil {
			t.Fatalf("an h2-only handshake through the tunnel: %v", err)
		}
		if _, err := io.WriteString(tc, "ping\n"); err != nil {
			t.Fatal(err)
		}
		if got, err := bufio.NewReader(tc).ReadString('\n'); err != nil || got != "ping\n" {
			t.Errorf("echo over TLS %q, %v", got, err)
		}
	})
}

// readerConn reads through r, which may hold bytes read from the Conn.
type readerConn struct {
	net.Conn
	r io.Reader
}

func (c *readerConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// TestIntercept_WithoutCA: secrets without a CA intercept nothing; TLS
// goes end to end and the placeholder arrives as it was sent.
func TestIntercept_WithoutCA(t *testing.T) {
	p := newPKI(t)
	api := newUpstream(t, p, "api.test")
	h := start(t, func(h *harness, px *egress.Proxy) {
		px.Policy = allowAll
		px.Dial = h.routes(map[string]string{"api.test:443": api.addr()})
		px.Secrets = func() []egress.Secret { return []egress.Secret{apiSecret(t)} }
	})
	req, _ := http.NewRequest("GET", "https://api.test/", nil)
	req.Header.Set("Authorization", "Bearer "+placeholder)
	res, err := h.client(&tls.Config{RootCAs: p.pool}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	if reqs := api.requests(); res.StatusCode != http.StatusOK || len(reqs) != 1 || reqs[0].auth != "Bearer "+placeholder {
		t.Errorf("without a CA: %s, api.test saw %+v; want the placeholder untouched", res.Status, reqs)
	}
}

// TestIntercept_CancelClosesTunnel: an intercepted tunnel, kept alive
// between requests, ends with Serve, as a spliced one does.
func TestIntercept_CancelClosesTunnel(t *testing.T) {
	f := newFixture(t, allowAll, apiSecret(t))
	res, _, c, br := f.h.roundTrip(t, connectReq("api.test:443", ""))
	if res.StatusCode != http.StatusOK {
		t.Fatalf("CONNECT: %s", res.Status)
	}
	tc := tls.Client(&readerConn{Conn: c, r: br}, &tls.Config{RootCAs: f.guestCA, ServerName: "api.test"})
	if _, err := io.WriteString(tc, "GET / HTTP/1.1\r\nHost: api.test\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	tbr := bufio.NewReader(tc)
	res, err := http.ReadResponse(tbr, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET inside the tunnel: %s", res.Status)
	}

	f.h.cancel()
	select {
	case err := <-f.h.served:
		if err != nil {
			t.Errorf("Serve after cancel: %v, want nil", err)
		}
		f.h.served <- nil // for the harness's cleanup
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after cancel with an intercepted tunnel open")
	}
	if _, err := tbr.ReadByte(); err == nil {
		t.Error("the intercepted tunnel is still open after cancel")
	}
}
