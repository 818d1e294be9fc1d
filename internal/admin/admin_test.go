package admin

import (
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/internal/events"
	"github.com/hutchsandbox/hutch/internal/office"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/service"
)

// clock is a settable time for link and session expiry.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

type portal struct {
	srv   *Server
	ts    *httptest.Server
	clock *clock
	svc   *service.Service
}

// newPortal serves a portal over a fresh state dir in host mode, with a
// registered office that has a vault value.
func newPortal(t *testing.T) *portal { return newPortalIn(t, sandbox.Mode{Kind: sandbox.KindHost}) }

func newPortalIn(t *testing.T, mode sandbox.Mode) *portal {
	t.Helper()
	root := t.TempDir()
	layout := service.Layout{StateDir: filepath.Join(root, "state"), Workspace: filepath.Join(root, "ws"), RunDir: filepath.Join(root, "run")}
	for _, d := range []string{layout.StateDir, layout.Workspace} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	svc := service.New(layout, nil)
	c := &clock{t: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
	p := &portal{clock: c, svc: svc}
	p.ts = httptest.NewUnstartedServer(nil)
	p.ts.Start()
	t.Cleanup(p.ts.Close)
	srv, err := New(Options{Service: svc, Mode: mode, BaseURL: p.ts.URL, Now: c.now})
	if err != nil {
		t.Fatal(err)
	}
	p.srv = srv
	p.ts.Config.Handler = srv.Handler()
	return p
}

// browser is a client with its own cookie jar that, like a browser, says
// where its requests come from.
type browser struct {
	t      *testing.T
	c      *http.Client
	origin string
}

func (p *portal) browser(t *testing.T) *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{t: t, c: &http.Client{Jar: jar}, origin: p.ts.URL}
}

func (b *browser) do(method, target string, form url.Values) (int, string) {
	b.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, target, body)
	if err != nil {
		b.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if method == http.MethodPost {
		req.Header.Set("Origin", b.origin)
		if b.origin == strings.TrimSuffix(target[:strings.Index(target, "/admin")], "/") {
			req.Header.Set("Sec-Fetch-Site", "same-origin")
		} else {
			req.Header.Set("Sec-Fetch-Site", "cross-site")
		}
	}
	resp, err := b.c.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(data)
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// signIn follows a link as a person does: open it, press the button.
func (b *browser) signIn(link string) string {
	b.t.Helper()
	code, body := b.do(http.MethodGet, link, nil)
	if code != http.StatusOK || !strings.Contains(body, "Sign in") {
		b.t.Fatalf("link page: %d\n%s", code, body)
	}
	u, _ := url.Parse(link)
	code, body = b.do(http.MethodPost, u.Scheme+"://"+u.Host+"/admin/login", url.Values{"token": {u.Query().Get("token")}})
	if code != http.StatusOK || !strings.Contains(body, "Offices and runtimes") {
		b.t.Fatalf("sign in: %d\n%s", code, body)
	}
	m := csrfField.FindStringSubmatch(body)
	if m == nil {
		b.t.Fatal("no CSRF token on the home page")
	}
	return m[1]
}

const refusedLink = "This link is not valid: it was already used, it expired, or it is wrong."

func TestLink_OnceOnly(t *testing.T) {
	p := newPortal(t)
	link, exp, err := p.srv.Link("ada (cli)", 0)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(link, p.ts.URL+"/admin/login?token=") || !exp.Equal(p.clock.now().Add(DefaultLinkTTL)) {
		t.Errorf("link %s expires %s", link, exp)
	}
	// A link preview (GET) does not use it up.
	b := p.browser(t)
	for range 2 {
		if code, _ := b.do(http.MethodGet, link, nil); code != http.StatusOK {
			t.Fatalf("GET of the link: %d", code)
		}
	}
	b.signIn(link)
	// Replayed: by the same browser or another, refused, with no data.
	for _, who := range []*browser{b, p.browser(t)} {
		code, body := who.do(http.MethodGet, link, nil)
		if code != http.StatusForbidden || !strings.Contains(body, refusedLink) {
			t.Errorf("replayed link page: %d\n%s", code, body)
		}
		u, _ := url.Parse(link)
		code, body = who.do(http.MethodPost, p.ts.URL+"/admin/login", url.Values{"token": {u.Query().Get("token")}})
		if code != http.StatusForbidden || !strings.Contains(body, refusedLink) || strings.Contains(body, "Offices") {
			t.Errorf("replayed sign-in: %d\n%s", code, body)
		}
	}
}

func TestLink_Expired(t *testing.T) {
	p := newPortal(t)
	link, _, err := p.srv.Link("ada", 5*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	p.clock.add(5 * time.Minute)
	b := p.browser(t)
	if code, body := b.do(http.MethodGet, link, nil); code != http.StatusForbidden || !strings.Contains(body, refusedLink) {
		t.Errorf("expired link: %d\n%s", code, body)
	}
	if code, _ := b.do(http.MethodGet, p.ts.URL+"/admin/", nil); code != http.StatusUnauthorized {
		t.Errorf("home without a session: %d", code)
	}
	for _, bad := range []time.Duration{time.Second, 25 * time.Hour} {
		if _, _, err := p.srv.Link("ada", bad); err == nil {
			t.Errorf("a link of %s was issued", bad)
		}
	}
}

func TestSession_WrongCookieAndExpiry(t *testing.T) {
	p := newPortal(t)
	link, _, _ := p.srv.Link("ada", 0)
	b := p.browser(t)
	b.signIn(link)
	u, _ := url.Parse(p.ts.URL + "/admin/")
	cookies := b.c.Jar.Cookies(u)
	if len(cookies) != 1 || cookies[0].Name != cookieName {
		t.Fatalf("cookies: %v", cookies)
	}
	// A forged cookie is refused.
	other := p.browser(t)
	other.c.Jar.SetCookies(u, []*http.Cookie{{Name: cookieName, Value: cookies[0].Value + "x"}})
	if code, body := other.do(http.MethodGet, p.ts.URL+"/admin/", nil); code != http.StatusUnauthorized || strings.Contains(body, "Offices") {
		t.Errorf("wrong cookie: %d\n%s", code, body)
	}
	// A session ends SessionTTL after its last use.
	p.clock.add(SessionTTL - time.Minute)
	if code, _ := b.do(http.MethodGet, p.ts.URL+"/admin/", nil); code != http.StatusOK {
		t.Errorf("a used session ended early: %d", code)
	}
	p.clock.add(SessionTTL)
	if code, _ := b.do(http.MethodGet, p.ts.URL+"/admin/", nil); code != http.StatusUnauthorized {
		t.Errorf("an idle session outlived its TTL: %d", code)
	}
}

func TestCookieAttributes(t *testing.T) {
	p := newPortal(t)
	link, _, _ := p.srv.Link("ada", 0)
	u, _ := url.Parse(link)
	resp, err := http.PostForm(p.ts.URL+"/admin/login", url.Values{"token": {u.Query().Get("token")}})
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	// The redirect was followed; the cookie came with the first answer.
	var set string
	for r := resp; r != nil; r = r.Request.Response {
		if v := r.Header.Get("Set-Cookie"); v != "" {
			set = v
		}
	}
	for _, want := range []string{cookieName + "=", "Path=/admin/", "HttpOnly", "SameSite=Strict"} {
		if !strings.Contains(set, want) {
			t.Errorf("Set-Cookie %q lacks %s", set, want)
		}
	}
	if strings.Contains(set, "Secure") {
		t.Errorf("Secure over plain HTTP: %q", set)
	}
}

func TestCSRF(t *testing.T) {
	p := newPortal(t)
	addr, _ := office.NewAddress("web", "csrf")
	if err := p.svc.SetChannelKind(addr, "im"); err != nil {
		t.Fatal(err)
	}
	link, _, _ := p.srv.Link("ada", 0)
	b := p.browser(t)
	csrf := b.signIn(link)
	form := url.Values{"platform": {"web"}, "conversation": {"csrf"}, "policy": {"full"}}
	// Without the token, or with another one: refused, nothing changed.
	for _, tok := range []string{"", csrf + "x"} {
		f := url.Values{}
		for k, v := range form {
			f[k] = v
		}
		if tok != "" {
			f.Set("csrf", tok)
		}
		if code, body := b.do(http.MethodPost, p.ts.URL+"/admin/door", f); code != http.StatusForbidden || !strings.Contains(body, "did not come from the portal") {
			t.Errorf("door change with csrf %q: %d\n%s", tok, code, body)
		}
	}
	// From another origin, even with the token: refused.
	evil := *b
	evil.origin = "https://evil.example"
	form.Set("csrf", csrf)
	if code, body := evil.do(http.MethodPost, p.ts.URL+"/admin/door", form); code != http.StatusForbidden || !strings.Contains(body, "came from another site") {
		t.Errorf("cross-origin door change: %d\n%s", code, body)
	}
	pol, err := p.svc.Resolve(addr, sandbox.Mode{Kind: sandbox.KindHost}, "")
	if err != nil {
		t.Fatal(err)
	}
	if w := pol.Decision.Policy.DoorWord(); w == "full" {
		t.Fatalf("a refused request changed the door policy to %s", w)
	}
	// With the token, from the portal: done, and audited.
	if code, body := b.do(http.MethodPost, p.ts.URL+"/admin/door", form); code != http.StatusOK || !strings.Contains(body, "Door policy set to full") {
		t.Fatalf("door change: %d\n%s", code, body)
	}
	// Home still names the recorded channel kind, though the policy no
	// longer comes from it.
	if code, body := b.do(http.MethodGet, p.ts.URL+"/admin/", nil); code != http.StatusOK || !strings.Contains(body, "<td>im</td>") || !strings.Contains(body, "(from conversation") {
		t.Errorf("home after the change: %d\n%s", code, body)
	}
	entries, err := p.svc.Events().Last(10)
	if err != nil || len(entries) != 2 || entries[1].Action != events.DoorSet || entries[1].Who != "ada" || entries[1].Target != "web/csrf" || entries[1].Detail != "trusted/full" || entries[0].Action != events.PortalSignIn {
		t.Errorf("events: %+v, %v", entries, err)
	}
	if code, body := b.do(http.MethodGet, p.ts.URL+"/admin/audit", nil); code != http.StatusOK || !strings.Contains(body, events.DoorSet) || !strings.Contains(body, "trusted/full") {
		t.Errorf("audit page: %d\n%s", code, body)
	}
	// An agent refused again and again (written straight to the log here,
	// past any rate) cannot crowd the change off the page: refusals have
	// their own table, of the last 50.
	for i := range 900 {
		if err := p.svc.Events().Append(events.Event{Surface: events.SurfaceEgress, Action: events.Refused, Target: "v1-web-agent", Detail: fmt.Sprintf("network: flood-%d.example:443 not in allowlist", i)}); err != nil {
			t.Fatal(err)
		}
	}
	code, body := b.do(http.MethodGet, p.ts.URL+"/admin/audit", nil)
	if code != http.StatusOK || !strings.Contains(body, "trusted/full") || !strings.Contains(body, "flood-899.example:") || strings.Contains(body, "flood-849.example:") {
		t.Errorf("audit page after a flood of refusals: %d; want the change, and the last 50 refusals alone\n%s", code, body)
	}
}

// TestNoVaultValues: no page shows a vault value, only names.
func TestNoVaultValues(t *testing.T) {
	// A mode with per-conversation vaults and no runtimes to list.
	p := newPortalIn(t, sandbox.Mode{Kind: sandbox.KindCloudflare, Target: "sb"})
	addr, _ := office.NewAddress("web", "vault")
	const value = "hutch-secret-value-2f9c1e"
	if err := p.svc.SetChannelKind(addr, "im"); err != nil {
		t.Fatal(err)
	}
	if err := p.svc.Vaults().SetEnv(string(addr.Key()), map[string]string{"API_TOKEN": value}); err != nil {
		t.Fatal(err)
	}
	link, _, _ := p.srv.Link("ada", 0)
	b := p.browser(t)
	b.signIn(link)
	for _, page := range []string{"/admin/", "/admin/office?platform=web&conversation=vault", "/admin/audit"} {
		code, body := b.do(http.MethodGet, p.ts.URL+page, nil)
		if code != http.StatusOK || strings.Contains(body, value) {
			t.Errorf("%s: %d, holds the value: %v", page, code, strings.Contains(body, value))
		}
		if strings.Contains(page, "office") && !strings.Contains(body, "API_TOKEN") {
			t.Errorf("the office page does not name the vault entry:\n%s", body)
		}
	}
}

func TestHeaders(t *testing.T) {
	p := newPortal(t)
	resp, err := http.Get(p.ts.URL + "/admin/login?token=x")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	for k, want := range map[string]string{
		"Cache-Control":   "no-store",
		"Referrer-Policy": "no-referrer",
		"X-Frame-Options": "DENY",
	} {
		if got := resp.Header.Get(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") || !strings.Contains(csp, "frame-ancestors 'none'") {
		t.Errorf("CSP %q", csp)
	}
}

// TestCookieSecureOverTLS: a portal reached over https (its URL, e.g.
// behind a TLS proxy) sets its session cookie Secure.
func TestCookieSecureOverTLS(t *testing.T) {
	p := newPortal(t)
	srv, err := New(Options{Service: p.svc, Mode: sandbox.Mode{Kind: sandbox.KindHost}, BaseURL: "https://admin.example.com", Now: p.clock.now})
	if err != nil {
		t.Fatal(err)
	}
	link, _, _ := srv.Link("ada", 0)
	u, _ := url.Parse(link)
	if u.Scheme != "https" || u.Host != "admin.example.com" {
		t.Errorf("link %s", link)
	}
	req := httptest.NewRequest(http.MethodPost, "/admin/login", strings.NewReader(url.Values{"token": {u.Query().Get("token")}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	rec := httptest.NewRecorder()
	srv.Handler().ServeHTTP(rec, req)
	if set := rec.Header().Get("Set-Cookie"); rec.Code != http.StatusSeeOther || !strings.Contains(set, "Secure") || !strings.Contains(set, "HttpOnly") || !strings.Contains(set, "SameSite=Strict") {
		t.Errorf("sign-in over https: %d, Set-Cookie %q", rec.Code, set)
	}
}
