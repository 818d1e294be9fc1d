package admin

import (
	"bytes"
	"context"
	"image/png"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/hutchsandbox/hutch/internal/office"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/testenv"
)

// pageWidth is the window width every page is looked at, and shot, in
// TestBrowser_EveryPage: a laptop's browser window.
const pageWidth = 1400

// ScreenshotsDir is where TestBrowser_EveryPage writes its screenshots:
// the artefacts directory's admin-1400 (testenv.ArtifactsDir, which
// $HUTCH_TEST_ARTIFACTS sets).
func screenshotsDir() string { return filepath.Join(testenv.ArtifactsDir(), "admin-1400") }

// TestBrowser_EveryPage opens every page of the portal in Chromium at
// 1400 px wide, as an operator of a managed mode sees it (runtimes
// running and stopped, resource use with an hour's chart, names longer
// than a column), and writes a screenshot of each to screenshotsDir. On
// each page it checks what a person would see: the page uses the
// window's width without growing past it, no key or name wraps inside a
// word, and one cut short by an ellipsis carries its full value in its
// title.
func TestBrowser_EveryPage(t *testing.T) {
	mode := sandbox.Mode{Kind: sandbox.KindImage, Target: "hutch-sandbox:dev"}
	p := newPortalIn(t, mode)
	now := p.clock.now()

	// Three conversations: one running near its memory limit, one with an
	// id longer than any column, stopped, and one that never ran.
	type conv struct {
		addr office.Address
		st   sandbox.Status
	}
	mk := func(platform, id string, state sandbox.RuntimeState, limits sandbox.Limits) conv {
		addr, err := office.NewAddress(platform, id)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.svc.SetChannelKind(addr, "im"); err != nil {
			t.Fatal(err)
		}
		key := string(addr.Key())
		return conv{addr, sandbox.Status{
			OfficeKey: key, Platform: platform, ConversationID: id, Name: "hutch-" + key, State: state,
			Image: "registry.example.com/team/hutch-sandbox:2026-12-01", Limits: limits,
			StartedAt: now.Add(-50 * time.Minute), LastActivity: now.Add(-2 * time.Minute),
			Fingerprint: "9c2316794999cd7d7890e87d1fcf39c2b0e1f4a5", Recreated: now.Add(-40 * time.Minute),
			RecreatedBecause: "what it was built from changed (mounts)",
		}}
	}
	busy := mk("slack", "C0123ABCDEF:1700000000.123456", sandbox.StateRunning, sandbox.Limits{CPUs: 1.5, MemoryBytes: 1 << 30, Pids: 1024})
	busy.st.Boosted = true
	long := mk("web", "a-conversation-id-far-longer-than-any-column-of-a-table-should-ever-have-to-hold", sandbox.StateStopped, sandbox.Limits{CPUs: 0.5, MemoryBytes: 1 << 30, Pids: 1024})
	never := mk("discord", "123456789012345678", sandbox.StateMissing, sandbox.Limits{})
	pendMigrations(t, p)
	lc := &listingLifecycle{runtimes: []sandbox.Status{busy.st, long.st}}
	old := lifecycleFor
	lifecycleFor = func(*Server, context.Context) (sandbox.Lifecycle, error) { return lc, nil }
	t.Cleanup(func() { lifecycleFor = old })

	// Resource use: an hour of readings of the running runtime, CPU
	// rising toward its limit, memory toward its own.
	rts := &fakeRuntimes{list: []sandbox.Status{busy.st}}
	u := stubSampler(p.srv, p.clock.now, rts)
	t.Cleanup(func() {
		samplers.Lock()
		delete(samplers.m, p.srv)
		samplers.Unlock()
	})
	key := busy.st.OfficeKey
	var cpu, clock time.Duration
	p.clock.add(-usageWindow + sampleEvery)
	for i := range ringSize {
		clock += sampleEvery
		cpu += time.Duration(float64(sampleEvery) * 1.5 * float64(i) / float64(ringSize)) // up to 1.5 CPUs busy
		rts.mu.Lock()
		if rts.readings == nil {
			rts.readings, rts.last = map[string][]sandbox.Usage{}, map[string]sandbox.Usage{}
		}
		rts.readings[key] = append(rts.readings[key], sandbox.Usage{
			Instance: "id", CPU: cpu, Clock: clock,
			Memory: uint64(300+i*2) << 20, MemoryLimit: 1 << 30, Pids: 12, PidsLimit: 1024,
		})
		rts.mu.Unlock()
		u.tick(context.Background())
		if i < ringSize-1 {
			p.clock.add(sampleEvery)
		}
	}

	link, _, err := p.srv.Link("ada (browser)", 0)
	if err != nil {
		t.Fatal(err)
	}
	b := &tab{t: t, ctx: testenv.Browser(t)}
	b.run("a 1400 px window", chromedp.EmulateViewport(pageWidth, 900))
	dir := screenshotsDir()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshots at %d px: %s", pageWidth, dir)

	query := func(a office.Address) string {
		return url.Values{"platform": {string(a.Platform)}, "conversation": {a.ConversationID}}.Encode()
	}
	officeURL := func(a office.Address) string { return p.ts.URL + "/admin/office?" + query(a) }
	pages := []struct {
		name, url string
		status    int64
		// heading is the page's h1.
		heading string
	}{
		{"login", link, http.StatusOK, "hutch admin"},
		{"home", p.ts.URL + "/admin/", http.StatusOK, "Offices and runtimes"},
		{"office-running", officeURL(busy.addr), http.StatusOK, "Office " + busy.addr.String()},
		{"office-stopped", officeURL(long.addr), http.StatusOK, "Office " + long.addr.String()},
		{"office-never-ran", officeURL(never.addr), http.StatusOK, "Office " + never.addr.String()},
		{"office-not-found", p.ts.URL + "/admin/office?platform=web&conversation=nobody", http.StatusNotFound, "hutch admin"},
		{"confirm-stop", p.ts.URL + "/admin/confirm?action=stop&" + query(busy.addr), http.StatusOK, "Stop the runtime of " + busy.addr.String() + "?"},
		{"limits", p.ts.URL + "/admin/limits", http.StatusOK, "Global limits and boost size"},
		{"audit", p.ts.URL + "/admin/audit", http.StatusOK, "Audit log"},
		{"migrations", p.ts.URL + "/admin/migrations", http.StatusOK, "Migrations"},
		{"projects", p.ts.URL + "/admin/projects", http.StatusOK, "Project sandboxes"},
		{"page-not-found", p.ts.URL + "/admin/nowhere", http.StatusNotFound, "hutch admin"},
	}
	for i, pg := range pages {
		if i == 1 {
			// Signed in from the login page, as a person does.
			if code := b.press("button", "Sign in"); code != http.StatusOK {
				t.Fatalf("sign in: %d\n%s", code, b.text("body"))
			}
		} else if code := b.open(pg.url); code != pg.status {
			t.Errorf("%s: %d, want %d\n%s", pg.name, code, pg.status, b.text("body"))
			continue
		}
		if h := b.text("h1"); h != pg.heading {
			t.Errorf("%s: heading %q, want %q", pg.name, h, pg.heading)
		}
		lookAt(t, b, pg.name)
		shot(t, b, filepath.Join(dir, pg.name+".png"))
	}
	// The signed-out page last: it ends the session.
	b.open(p.ts.URL + "/admin/")
	if code := b.press("button", "Sign out"); code != http.StatusOK {
		t.Errorf("sign out: %d", code)
	}
	shot(t, b, filepath.Join(dir, "signed-out.png"))
}

// lookAt checks the page as a person at pageWidth sees it.
func lookAt(t *testing.T, b *tab, name string) {
	t.Helper()
	// The page fills the window's width and does not grow past it.
	if w := eval[int](b, "document.documentElement.scrollWidth"); w > pageWidth {
		t.Errorf("%s: the page is %d px wide in a %d px window", name, w, pageWidth)
	}
	if w := eval[float64](b, `document.querySelector("main").getBoundingClientRect().width`); w < pageWidth-40 {
		t.Errorf("%s: the content is %v px wide in a %d px window", name, w, pageWidth)
	}
	// At this width no table needs to scroll sideways.
	if wide := eval[[]string](b, `Array.from(document.querySelectorAll(".scroll")).filter(e => e.scrollWidth > e.clientWidth).map(e => e.getAttribute("aria-labelledby") + ": " + e.scrollWidth + " px")`); len(wide) > 0 {
		t.Errorf("%s: these tables scroll sideways in a %d px window: %q", name, pageWidth, wide)
	}
	// Nothing breaks words anywhere.
	if n := eval[int](b, `Array.from(document.querySelectorAll("*")).filter(e => getComputedStyle(e).wordBreak === "break-all").length`); n != 0 {
		t.Errorf("%s: %d elements break words anywhere", name, n)
	}
	// A key or name in a table is on one line; one cut short says its
	// full value in its title.
	wrapped := eval[[]string](b, `Array.from(document.querySelectorAll("td code:not(.path), th code:not(.path), code.path .seg, .name a, .nowrap")).filter(e => e.getClientRects().length > 1 || e.getBoundingClientRect().height > 1.6 * parseFloat(getComputedStyle(e).lineHeight || 24)).map(e => e.textContent)`)
	if len(wrapped) > 0 {
		t.Errorf("%s: these wrap: %q", name, wrapped)
	}
	cut := eval[[]string](b, `Array.from(document.querySelectorAll(".id, .name a")).filter(e => e.scrollWidth > e.clientWidth && e.title !== e.textContent).map(e => e.textContent)`)
	if len(cut) > 0 {
		t.Errorf("%s: these are cut short without their full value in a title: %q", name, cut)
	}
}

// shot writes a screenshot of the whole page to file and checks it is a
// PNG pageWidth wide.
func shot(t *testing.T, b *tab, file string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	data, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Errorf("screenshot %s: %v", file, err)
		return
	}
	cfg, err := png.DecodeConfig(bytes.NewReader(data))
	if err != nil || cfg.Width != pageWidth || cfg.Height < 100 {
		t.Errorf("screenshot %s: %dx%d (%v), want %d px wide", file, cfg.Width, cfg.Height, err, pageWidth)
	}
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Error(err)
		return
	}
	t.Logf("screenshot: %s (%dx%d)", file, cfg.Width, cfg.Height)
}
