package admin

import (
	"context"
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/hutchsandbox/hutch/internal/events"
	"github.com/hutchsandbox/hutch/internal/office"
	"github.com/hutchsandbox/hutch/internal/projection"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/service"
	"github.com/hutchsandbox/hutch/internal/testenv"
)

// The browser tests drive the portal in a real, headless Chromium, as a
// person does: they find controls by role and accessible name, click and
// type, and read what the page shows. Only setting up state (an office, a
// link, the clock, an attacker's page) goes around the pages.

// stepTimeout bounds one browser step: a control that never shows up
// fails the step then.
const stepTimeout = 15 * time.Second

// tab is one browser tab on a portal.
type tab struct {
	t   *testing.T
	ctx context.Context
}

// run runs actions, failing the test on an error.
func (b *tab) run(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
}

// open navigates to target and returns the answer's status.
func (b *tab) open(target string) int64 {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	resp, err := chromedp.Run(ctx, chromedp.NavigateResponse(target))
	if err != nil {
		b.t.Fatalf("opening %s: %v", target, err)
	}
	return resp.Status
}

// press clicks the control of role with that accessible name, waits for
// the page it leads to and returns its status.
func (b *tab) press(role, name string) int64 {
	b.t.Helper()
	return b.navigateBy(role+" "+name, chromedp.Click(name, testenv.ByRole(role, name)))
}

// navigateBy runs an action that leads to another page, waits for it and
// returns its status.
func (b *tab) navigateBy(what string, a chromedp.Action[chromedp.Void]) int64 {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	resp, err := chromedp.RunResponse(ctx, a)
	if err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
	return resp.Status
}

// text is the visible text of the first element sel (CSS) matches.
func (b *tab) text(sel string) string {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		b.t.Fatalf("text of %s: %v", sel, err)
	}
	return strings.TrimSpace(s)
}

// value is the value of the form control of role with that accessible name.
func (b *tab) value(role, name string) string {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Value(name, testenv.ByRole(role, name)))
	if err != nil {
		b.t.Fatalf("value of %s %q: %v", role, name, err)
	}
	return v
}

// eval evaluates a JavaScript expression in the page (for reading what a
// person sees, such as the focused element; never to act).
func eval[T any](b *tab, expr string) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		b.t.Fatalf("evaluating %s: %v", expr, err)
	}
	return v
}

// settle evaluates expr until it gives want or stepTimeout passes, and
// returns what it gave last: for what the browser does after a page has
// loaded, such as moving the focus to an autofocus element.
func settle[T comparable](b *tab, expr string, want T) T {
	b.t.Helper()
	deadline := time.Now().Add(stepTimeout)
	for {
		got := eval[T](b, expr)
		if got == want || time.Now().After(deadline) {
			return got
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// location is the tab's URL.
func (b *tab) location() string {
	b.t.Helper()
	loc, err := chromedp.Run(b.ctx, chromedp.Location())
	if err != nil {
		b.t.Fatal(err)
	}
	return loc
}

// imageMode is a managed mode the projection is computed for: host mode
// has no runtime, so its mounts are what the next command of such a mode
// would get.
var imageMode = sandbox.Mode{Kind: sandbox.KindImage, Target: "x"}

func TestBrowser_SignInAndDoor(t *testing.T) {
	p := newPortal(t)
	addr, _ := office.NewAddress("web", "door")
	if err := p.svc.SetChannelKind(addr, "im"); err != nil {
		t.Fatal(err)
	}
	before, err := p.svc.Resolve(addr, imageMode, "")
	if err != nil {
		t.Fatal(err)
	}
	ws := p.svc.Layout().Workspace
	if w := before.Decision.Policy.DoorWord(); w != "isolated" || len(before.Mounts) != 1 || before.Mounts[0].HostPath != filepath.Join(ws, string(addr.Key())) {
		t.Fatalf("an im conversation starts %q with mounts %+v; this test expects isolated, the office only", w, before.Mounts)
	}
	link, _, err := p.srv.Link("ada (browser)", 0)
	if err != nil {
		t.Fatal(err)
	}
	b := &tab{t: t, ctx: testenv.Browser(t)}

	// The link shows a sign-in page; pressing its button signs in.
	if code := b.open(link); code != http.StatusOK {
		t.Fatalf("link: %d", code)
	}
	if h := b.text("h1"); h != "hutch admin" || !strings.Contains(b.text("main"), "signs you in to the admin portal once") {
		t.Errorf("sign-in page: %q\n%s", h, b.text("main"))
	}
	if code := b.press("button", "Sign in"); code != http.StatusOK {
		t.Fatalf("sign in: %d\n%s", code, b.text("body"))
	}
	if loc, h := b.location(), b.text("h1"); loc != p.ts.URL+"/admin/" || h != "Offices and runtimes" {
		t.Fatalf("after signing in: %s, %q", loc, h)
	}
	if who := b.text(".who"); !strings.Contains(who, "signed in as ada (browser)") {
		t.Errorf("header: %q", who)
	}
	testenv.Screenshot(t, b.ctx, "home")

	// The office, from its link on the home page.
	if code := b.press("link", addr.String()); code != http.StatusOK {
		t.Fatalf("office page: %d", code)
	}
	if h := b.text("h1"); h != "Office "+addr.String() {
		t.Errorf("office page heading %q", h)
	}
	if got := b.text("section[aria-labelledby=mounts-h] tbody td"); got != before.Mounts[0].HostPath {
		t.Errorf("the office page shows the mount of %q, want %q", got, before.Mounts[0].HostPath)
	}
	testenv.Screenshot(t, b.ctx, "office")

	// Change its door policy with the form.
	const label = "Door policy of this conversation"
	if sel := b.value("combobox", label); sel != "isolated" {
		t.Errorf("the door policy select shows %q, want isolated", sel)
	}
	b.run("choosing full", chromedp.SetValue(label, "full", testenv.ByRole("combobox", label)))
	if code := b.press("button", "Set the door policy"); code != http.StatusOK {
		t.Fatalf("setting the door policy: %d\n%s", code, b.text("main"))
	}
	if flash := b.text("[role=status]"); flash != "Door policy set to full; the next command runs with it." {
		t.Errorf("flash %q", flash)
	}
	after, err := p.svc.Resolve(addr, imageMode, "")
	if err != nil {
		t.Fatal(err)
	}
	if w := after.Decision.Policy.DoorWord(); w != "full" {
		t.Errorf("after the change the service resolves %q, want full", w)
	}
	// The next command's projection: the whole workspace root now, not
	// only the office.
	if len(after.Mounts) != 1 || after.Mounts[0].Role != projection.RoleRoot || after.Mounts[0].HostPath != ws || after.Mounts[0].RuntimePath != service.RuntimeRoot {
		t.Errorf("mounts after the change: %+v (before: %+v), want the workspace root %s", after.Mounts, before.Mounts, ws)
	}
	if got := b.text("section[aria-labelledby=mounts-h] tbody td"); got != ws {
		t.Errorf("the office page now shows the mount of %q, want the workspace root %q", got, ws)
	}

	// The audit log lists the change.
	if code := b.press("link", "Audit log"); code != http.StatusOK {
		t.Fatalf("audit page: %d", code)
	}
	if row := b.text("tbody tr"); !strings.Contains(row, "ada (browser)") || !strings.Contains(row, "door.set") || !strings.Contains(row, addr.String()) || !strings.Contains(row, "trusted/full") {
		t.Errorf("the audit log's newest row: %q", row)
	}
	testenv.Screenshot(t, b.ctx, "audit")

	// Home again, as on a phone: nothing wider than the screen.
	if code := b.press("link", "Offices and runtimes"); code != http.StatusOK {
		t.Fatalf("home: %d", code)
	}
	if row := b.text("section[aria-labelledby=offices-h] tbody tr"); !strings.Contains(row, after.Decision.Policy.String()) {
		t.Errorf("home lists the office as %q, want its door policy %q", row, after.Decision.Policy.String())
	}
	b.run("emulating a phone", testenv.Phone)
	if w := eval[int](b, "document.documentElement.scrollWidth"); w > testenv.PhoneWidth {
		t.Errorf("on a phone the home page is %d px wide, more than the screen's %d", w, testenv.PhoneWidth)
	}
	testenv.Screenshot(t, b.ctx, "home-phone")
	b.run("back to the desktop", testenv.Desktop)
}

func TestBrowser_Refusals(t *testing.T) {
	ctx := testenv.Browser(t)

	t.Run("used link", func(t *testing.T) {
		p := newPortal(t)
		link, _, _ := p.srv.Link("ada", 0)
		// Two people open the forwarded link; the first to press the
		// button signs in.
		first := &tab{t: t, ctx: testenv.FreshTab(t, ctx)}
		second := &tab{t: t, ctx: testenv.FreshTab(t, ctx)}
		for _, b := range []*tab{first, second} {
			if code := b.open(link); code != http.StatusOK {
				t.Fatalf("link: %d", code)
			}
		}
		if code := first.press("button", "Sign in"); code != http.StatusOK {
			t.Fatalf("sign in: %d", code)
		}
		if code := second.press("button", "Sign in"); code != http.StatusForbidden {
			t.Errorf("sign in with a used link: %d", code)
		}
		refused(t, second, refusedLink)
		// Opening it again shows the refusal, not the button.
		if code := second.open(link); code != http.StatusForbidden {
			t.Errorf("a used link: %d", code)
		}
		refused(t, second, refusedLink)
		notSignedIn(t, p, second)
		if n := len(auditOf(t, p)); n != 1 {
			t.Errorf("%d audit entries, want the one sign-in", n)
		}
	})

	t.Run("expired link", func(t *testing.T) {
		p := newPortal(t)
		link, _, _ := p.srv.Link("ada", 5*time.Minute)
		b := &tab{t: t, ctx: testenv.FreshTab(t, ctx)}
		if code := b.open(link); code != http.StatusOK {
			t.Fatalf("link: %d", code)
		}
		// The page stays open past the link's time.
		p.clock.add(5 * time.Minute)
		if code := b.press("button", "Sign in"); code != http.StatusForbidden {
			t.Errorf("sign in with an expired link: %d", code)
		}
		refused(t, b, refusedLink)
		if code := b.open(link); code != http.StatusForbidden {
			t.Errorf("an expired link: %d", code)
		}
		refused(t, b, refusedLink)
		notSignedIn(t, p, b)
		if n := len(auditOf(t, p)); n != 0 {
			t.Errorf("%d audit entries, want none", n)
		}
	})

	t.Run("cross-site form", func(t *testing.T) {
		p := newPortal(t)
		addr, _ := office.NewAddress("web", "victim")
		if err := p.svc.SetChannelKind(addr, "im"); err != nil {
			t.Fatal(err)
		}
		link, _, _ := p.srv.Link("ada", 0)
		b := &tab{t: t, ctx: testenv.FreshTab(t, ctx)}
		b.open(link)
		if code := b.press("button", "Sign in"); code != http.StatusOK {
			t.Fatalf("sign in: %d", code)
		}
		// The attacker even has the session's CSRF token (read here from
		// the page), so only the origin check stands in the way.
		csrf := eval[string](b, `document.querySelector("input[name=csrf]").value`)
		evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			_, _ = fmt.Fprintf(w, `<!doctype html><title>Win a prize</title>
<form method="post" action="%s/admin/door">
<input type="hidden" name="csrf" value="%s">
<input type="hidden" name="platform" value="web">
<input type="hidden" name="conversation" value="victim">
<input type="hidden" name="policy" value="full">
</form>
<script>document.forms[0].submit()</script>`, html.EscapeString(p.ts.URL), html.EscapeString(csrf))
		}))
		t.Cleanup(evil.Close)
		u, _ := url.Parse(evil.URL)
		// Another port of the same host (same site, another origin), and
		// another host (another site).
		for _, origin := range []string{evil.URL, "http://localhost:" + u.Port()} {
			b.open(origin)
			// The page submits itself; wait for the portal's answer.
			b.run("waiting for the portal's answer", chromedp.WaitVisible(chromedp.CSS("p[role=alert]")))
			if loc := b.location(); loc != p.ts.URL+"/admin/door" {
				t.Fatalf("from %s: the form led to %s", origin, loc)
			}
			refused(t, b, "This request came from another site, so it was refused.")
		}
		pol, err := p.svc.Resolve(addr, imageMode, "")
		if err != nil {
			t.Fatal(err)
		}
		if w := pol.Decision.Policy.DoorWord(); w != "isolated" {
			t.Errorf("a cross-site form set the door policy to %s", w)
		}
		for _, e := range auditOf(t, p) {
			if e.Action != events.PortalSignIn {
				t.Errorf("audit after refusals: %+v", e)
			}
		}
		// The same session, from the portal's own page, can.
		b.open(p.ts.URL + "/admin/")
		if code := b.press("link", addr.String()); code != http.StatusOK {
			t.Fatalf("office page: %d", code)
		}
		b.run("choosing full", chromedp.SetValue("policy", "full", testenv.ByRole("combobox", "Door policy of this conversation")))
		if code := b.press("button", "Set the door policy"); code != http.StatusOK {
			t.Errorf("the portal's own form: %d\n%s", code, b.text("main"))
		}
	})
}

// TestBrowser_Keyboard: the sign-in button has the focus and Enter
// presses it; on a portal page Tab reaches the skip link first, and
// following it moves on into the content.
func TestBrowser_Keyboard(t *testing.T) {
	p := newPortal(t)
	addr, _ := office.NewAddress("web", "keys")
	if err := p.svc.SetChannelKind(addr, "im"); err != nil {
		t.Fatal(err)
	}
	link, _, _ := p.srv.Link("ada", 0)
	b := &tab{t: t, ctx: testenv.Browser(t)}
	b.open(link)
	// Chromium moves the focus to an autofocus button at a rendering
	// update after the load, which a loaded machine may not have had yet.
	if f := settle(b, "document.activeElement.textContent.trim()", "Sign in"); f != "Sign in" {
		t.Errorf("the sign-in page opens with the focus on %q, want the Sign in button", f)
	}
	if code := b.navigateBy("pressing Enter", chromedp.KeyEvent(kb.Enter)); code != http.StatusOK {
		t.Fatalf("Enter on Sign in: %d", code)
	}
	if h := b.text("h1"); h != "Offices and runtimes" {
		t.Fatalf("after Enter: %q", h)
	}

	b.run("Tab", chromedp.KeyEvent(kb.Tab))
	if f := eval[string](b, "document.activeElement.textContent.trim()"); f != "Skip to the content" {
		t.Errorf("the first Tab reaches %q, want the skip link", f)
	}
	if left := eval[float64](b, "document.activeElement.getBoundingClientRect().left"); left < 0 {
		t.Errorf("the focused skip link is off screen (left %v)", left)
	}
	b.run("Enter on the skip link", chromedp.KeyEvent(kb.Enter))
	b.run("Tab", chromedp.KeyEvent(kb.Tab))
	if in := eval[bool](b, `document.querySelector("main").contains(document.activeElement)`); !in {
		t.Errorf("after the skip link, Tab reaches %q, outside the content", eval[string](b, "document.activeElement.outerHTML.slice(0, 120)"))
	}
}

// refused checks the tab shows a refusal page with msg and nothing else.
func refused(t *testing.T, b *tab, msg string) {
	t.Helper()
	if got := b.text("p[role=alert]"); !strings.HasPrefix(got, msg) {
		t.Errorf("refusal %q, want %q", got, msg)
	}
	if n := eval[int](b, `document.querySelectorAll("nav, form, table, button").length`); n != 0 {
		t.Errorf("the refusal page shows %d controls or tables", n)
	}
}

// notSignedIn checks the tab has no session on the portal.
func notSignedIn(t *testing.T, p *portal, b *tab) {
	t.Helper()
	if code := b.open(p.ts.URL + "/admin/"); code != http.StatusUnauthorized {
		t.Errorf("home after a refusal: %d", code)
	}
	refused(t, b, "You are not signed in")
}

// auditOf is the event log but its refusals: what the portal changed.
func auditOf(t *testing.T, p *portal) []events.Event {
	t.Helper()
	entries, err := p.svc.Events().Last(200)
	if err != nil {
		t.Fatal(err)
	}
	var changes []events.Event
	for _, e := range entries {
		if e.Action != events.Refused {
			changes = append(changes, e)
		}
	}
	return changes
}
