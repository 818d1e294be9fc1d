package admin

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/internal/office"
	"github.com/hutchsandbox/hutch/internal/sandbox"
)

// TestOfficePage_NotFound: the page of a conversation without an office
// is a short 404 with a way back, and offers no action on it.
func TestOfficePage_NotFound(t *testing.T) {
	p, b, _ := actionPortal(t, &fakeLifecycle{})
	code, body := b.do(http.MethodGet, p.ts.URL+"/admin/office?platform=web&conversation=nobody", nil)
	if code != http.StatusNotFound {
		t.Errorf("an office that does not exist: %d, want 404", code)
	}
	for _, want := range []string{
		`<p role="alert">There is no office for web/nobody: no command has run in this conversation.</p>`,
		`<a href="/admin/">Back to offices and runtimes</a>`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the 404 page lacks %s\n%s", want, body)
		}
	}
	for _, never := range []string{"<form", "<button", "<table", "Boost", "Stop", "Remove", "door policy"} {
		if strings.Contains(body, never) {
			t.Errorf("the 404 page holds %q\n%s", never, body)
		}
	}
	// So is the confirmation of a stop or a remove of its runtime.
	code, body = b.do(http.MethodGet, p.ts.URL+"/admin/confirm?action=stop&platform=web&conversation=nobody", nil)
	if code != http.StatusNotFound || !strings.Contains(body, "There is no office for web/nobody") || strings.Contains(body, "<button") {
		t.Errorf("confirming a stop for a conversation without an office: %d\n%s", code, body)
	}
	// An unknown page is a 404 with the same way back.
	if code, body := b.do(http.MethodGet, p.ts.URL+"/admin/nowhere", nil); code != http.StatusNotFound || !strings.Contains(body, "There is no such page.") || !strings.Contains(body, `href="/admin/"`) {
		t.Errorf("an unknown page: %d\n%s", code, body)
	}
}

// TestOfficePage_Runtime: the office page shows its runtime's state,
// limits and fingerprint, with the actions its state allows; home's
// runtimes table leaves the fingerprint out.
func TestOfficePage_Runtime(t *testing.T) {
	p := newPortal(t)
	now := p.clock.now()
	addr, _ := office.NewAddress("web", "x")
	key := string(addr.Key())
	const fp = "9c2316794999cd7d7890e87d1fcf39c2"
	fake := &listingLifecycle{runtimes: []sandbox.Status{{
		OfficeKey: key, Platform: "web", ConversationID: "x", Name: "hutch-" + key, State: sandbox.StateRunning,
		Image: "hutch-sandbox:dev", Limits: sandbox.Limits{CPUs: 1.5, MemoryBytes: 1536 << 20, Pids: 512}, Boosted: true,
		StartedAt: now.Add(-time.Minute), LastActivity: now.Add(-time.Minute), Fingerprint: fp,
	}}}
	old := lifecycleFor
	lifecycleFor = func(*Server, context.Context) (sandbox.Lifecycle, error) { return fake, nil }
	t.Cleanup(func() { lifecycleFor = old })
	if err := p.svc.SetChannelKind(addr, "im"); err != nil {
		t.Fatal(err)
	}
	b := signedIn(t, p)
	_, page := b.do(http.MethodGet, p.ts.URL+"/admin/office?platform=web&conversation=x", nil)
	for _, want := range []string{
		`<h2 id="runtime-h">Runtime</h2>`,
		"<dt>State</dt><dd>running (boosted until it stops)</dd>",
		"<dt>Limits</dt><dd>1.5 CPUs, 1.5 GiB of memory, 512 processes</dd>",
		"<dt>Idle stop</dt><dd>in 9m0s</dd>",
		"<dt>Fingerprint</dt><dd><code>" + fp + "</code>",
		`aria-label="Boost web/x"`, `aria-label="Stop web/x"`, `aria-label="Remove web/x"`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the office page lacks %s\n%s", want, page)
		}
	}
	_, home := b.do(http.MethodGet, p.ts.URL+"/admin/", nil)
	if strings.Contains(home, fp) || strings.Contains(home, "Fingerprint") {
		t.Errorf("home still shows the fingerprint:\n%s", home)
	}

	// Stopped: no boost or stop; missing: only what the next command does.
	fake.runtimes[0].State = sandbox.StateStopped
	_, page = b.do(http.MethodGet, p.ts.URL+"/admin/office?platform=web&conversation=x", nil)
	if !strings.Contains(page, "<dt>State</dt><dd>stopped") || strings.Contains(page, `aria-label="Boost web/x"`) || strings.Contains(page, `aria-label="Stop web/x"`) || !strings.Contains(page, `aria-label="Remove web/x"`) {
		t.Errorf("a stopped runtime's office page:\n%s", page)
	}
	fake.runtimes = nil
	_, page = b.do(http.MethodGet, p.ts.URL+"/admin/office?platform=web&conversation=x", nil)
	if !strings.Contains(page, "No runtime exists: the next command of this conversation makes one") || strings.Contains(page, `aria-label="Remove web/x"`) {
		t.Errorf("the office page without a runtime:\n%s", page)
	}
}

// TestWrapPath: a path may wrap after a slash, never inside a name, and
// stays escaped.
func TestWrapPath(t *testing.T) {
	got := string(wrapPath("/srv/ws/v1-web-a&b"))
	want := `/<wbr><span class="seg">srv</span>/<wbr><span class="seg">ws</span>/<wbr><span class="seg">v1-web-a&amp;b</span>`
	if got != want {
		t.Errorf("wrapPath: %s, want %s", got, want)
	}
}

// TestByteSizeAndAgo: sizes and times read as a person writes them.
func TestByteSizeAndAgo(t *testing.T) {
	for n, want := range map[float64]string{
		512: "512 B", 1536 << 20: "1.5 GiB", 1 << 30: "1 GiB", 1020 << 20: "1020 MiB", 5.168 * (1 << 20): "5.17 MiB", 256 << 20: "256 MiB",
	} {
		if got := byteSize(n); got != want {
			t.Errorf("byteSize(%v) = %q, want %q", n, got, want)
		}
	}
	for d, want := range map[time.Duration]string{
		-time.Second: "0 s ago", 40 * time.Second: "40 s ago", 12*time.Minute + 5*time.Second: "12 min ago",
		3*time.Hour + 5*time.Minute: "3 h 5 min ago", 73 * time.Hour: "3 days ago",
	} {
		if got := ago(d); got != want {
			t.Errorf("ago(%s) = %q, want %q", d, got, want)
		}
	}
}
