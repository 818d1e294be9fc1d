package testenv

import (
	"bytes"
	"context"
	"fmt"
	"image/png"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestBrowser drives the helpers against a tiny page: the window's size,
// screenshots at desktop and phone sizes, and a CSP violation reported.
func TestBrowser(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(ArtifactsEnv, dir)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		if r.URL.Path == "/csp" {
			w.Header().Set("Content-Security-Policy", "default-src 'self'")
			_, _ = fmt.Fprint(w, `<!doctype html><title>csp</title><script>document.title = "ran"</script>`)
			return
		}
		_, _ = fmt.Fprint(w, `<!doctype html><meta name="viewport" content="width=device-width, initial-scale=1">
<title>page</title><h1>Hello</h1><p style="height: 2000px">tall</p>`)
	}))
	t.Cleanup(ts.Close)

	ctx := Browser(t)
	if err := chromedp.Do(ctx, chromedp.Navigate(ts.URL)); err != nil {
		t.Fatal(err)
	}
	if w, err := chromedp.Run(ctx, chromedp.Evaluate[int]("window.innerWidth")); err != nil || w != DesktopWidth {
		t.Errorf("window width %d, %v; want %d", w, err, DesktopWidth)
	}
	Screenshot(t, ctx, "desktop")
	PhoneScreenshot(t, ctx, "phone")
	if w, err := chromedp.Run(ctx, chromedp.Evaluate[int]("window.innerWidth")); err != nil || w != DesktopWidth {
		t.Errorf("after the phone screenshot, window width %d, %v; want %d", w, err, DesktopWidth)
	}
	for name, want := range map[string][2]int{"desktop": {DesktopWidth, 2000}, "phone": {PhoneWidth, 2000}} {
		data, err := os.ReadFile(filepath.Join(dir, "screenshots", "TestBrowser-"+name+".png"))
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := png.DecodeConfig(bytes.NewReader(data))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		// The whole page, not only the window: taller than the text.
		if cfg.Width != want[0] || cfg.Height < want[1] {
			t.Errorf("%s screenshot is %dx%d, want %d wide and at least %d high", name, cfg.Width, cfg.Height, want[0], want[1])
		}
	}

	// A CSP violation, in the first tab and in a fresh one, is reported.
	for name, c := range map[string]context.Context{"first": ctx, "fresh": FreshTab(t, ctx)} {
		if err := chromedp.Do(c, chromedp.Navigate(ts.URL+"/csp")); err != nil {
			t.Fatal(err)
		}
		if title, err := chromedp.Run(c, chromedp.Title()); err != nil || title != "csp" {
			t.Errorf("%s tab: title %q, %v: the inline script ran", name, title, err)
		}
		errs := waitPageErrors(c)
		if len(errs) != 1 || !strings.Contains(errs[0], "Content Security Policy") {
			t.Errorf("%s tab: page errors %q, want one CSP violation", name, errs)
		}
	}
}

// waitPageErrors waits a little for the browser's reports, which are
// events that may come after the page has loaded.
func waitPageErrors(ctx context.Context) []string {
	for range 50 {
		if errs := PageErrors(ctx); len(errs) > 0 {
			return errs
		}
		time.Sleep(100 * time.Millisecond)
	}
	return nil
}

func TestByRole(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = fmt.Fprint(w, `<!doctype html><title>roles</title>
<button>Sign in</button>
<label for="s">Door policy</label><select id="s"><option>a</option></select>
<select><option>unlabelled</option></select>
<button aria-label="Boost web/x">Boost</button>`)
	}))
	t.Cleanup(ts.Close)
	ctx := Browser(t)
	if err := chromedp.Do(ctx, chromedp.Navigate(ts.URL)); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		role, name string
		want       int
	}{
		{"button", "Sign in", 1},
		{"button", "Sign", 0}, // names match exactly
		{"combobox", "Door policy", 1},
		{"combobox", "", 2},
		{"button", "Boost", 0}, // aria-label wins over the text
		{"button", "Boost web/x", 1},
		{"link", "Sign in", 0},
	} {
		c, cancel := context.WithTimeout(ctx, 10*time.Second)
		nodes, err := chromedp.Run(c, chromedp.Nodes(tt.name, ByRole(tt.role, tt.name), chromedp.AtLeast(0)))
		cancel()
		if err != nil || len(nodes) != tt.want {
			t.Errorf("ByRole(%q, %q) found %d, %v; want %d", tt.role, tt.name, len(nodes), err, tt.want)
		}
	}
}

func TestFreshTab_NoSharedCookies(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/set" {
			http.SetCookie(w, &http.Cookie{Name: "c", Value: "1", Path: "/"})
		}
		c, err := r.Cookie("c")
		_, _ = fmt.Fprintf(w, "<!doctype html><title>%v</title>", err == nil && c.Value == "1")
	}))
	t.Cleanup(ts.Close)
	ctx := Browser(t)
	if err := chromedp.Do(ctx, chromedp.Navigate(ts.URL+"/set"), chromedp.Navigate(ts.URL)); err != nil {
		t.Fatal(err)
	}
	if title, err := chromedp.Run(ctx, chromedp.Title()); err != nil || title != "true" {
		t.Fatalf("the first tab has no cookie: %q, %v", title, err)
	}
	fresh := FreshTab(t, ctx)
	if err := chromedp.Do(fresh, chromedp.Navigate(ts.URL)); err != nil {
		t.Fatal(err)
	}
	if title, err := chromedp.Run(fresh, chromedp.Title()); err != nil || title != "false" {
		t.Errorf("a fresh tab has the first tab's cookie: %q, %v", title, err)
	}
}

func TestArtifactsDir(t *testing.T) {
	t.Setenv(ArtifactsEnv, "")
	if got, want := ArtifactsDir(), filepath.Join(os.TempDir(), "hutch-test-artifacts"); got != want {
		t.Errorf("ArtifactsDir() = %q, want %q", got, want)
	}
	t.Setenv(ArtifactsEnv, "/x/y")
	if got := ArtifactsDir(); got != "/x/y" {
		t.Errorf("ArtifactsDir() = %q with %s=/x/y", got, ArtifactsEnv)
	}
	if got, want := fileSafe("TestA/sub case-1.x"), "TestA_sub_case-1.x"; got != want {
		t.Errorf("fileSafe = %q, want %q", got, want)
	}
}
