package testenv

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/accessibility"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/dom"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// chromiumPath is where Debian's chromium package puts the browser;
// hack/test-deps installs it.
const chromiumPath = "/usr/bin/chromium"

// The browser's window, and the phone PhoneScreenshot emulates.
const (
	DesktopWidth, DesktopHeight = 1280, 900
	PhoneWidth, PhoneHeight     = 390, 844
)

// browserTimeout bounds one test's use of its browser, start included: a
// page that never shows what a test waits for fails the test then, not at
// go test's timeout.
const browserTimeout = 2 * time.Minute

// ArtifactsEnv names the directory tests write artefacts to, such as
// screenshots; unset, they go to os.TempDir()/hutch-test-artifacts.
const ArtifactsEnv = "HUTCH_TEST_ARTIFACTS"

// Browser returns a chromedp context whose actions drive a tab of a
// headless Chromium of the test's own: a 1280x900 window, no sandbox
// (tests run as root), no GPU, a fresh profile. The browser stops when
// the test ends, and a page that threw an uncaught exception or broke its
// Content-Security-Policy meanwhile fails the test (PageErrors takes the
// ones a test expects).
//
// Without Chromium the test is skipped, except when the CI environment
// variable is set (to anything but a false boolean): there it fails, as
// Docker does without an engine.
func Browser(t testing.TB) context.Context {
	t.Helper()
	path, err := findChromium()
	if err != nil {
		if InCI() {
			t.Fatalf("%v (CI is set, and browser tests must not skip in CI: install it, e.g. with hack/test-deps)", err)
		}
		t.Skipf("%v: install it with hack/test-deps (apt-get install -y chromium)", err)
	}
	base, cancelBase := context.WithTimeout(context.Background(), browserTimeout)
	out := &syncBuffer{}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.WindowSize(DesktopWidth, DesktopHeight),
		chromedp.Flag("lang", "en-US"),
		chromedp.CombinedOutput(out),
	)
	alloc, cancelAlloc := chromedp.NewExecAllocator(base, opts...)
	ctx, cancelTab := chromedp.NewContext(alloc)
	st := &pageErrors{}
	ctx = context.WithValue(ctx, pageErrorsKey{}, st)
	stop := func() {
		cancelTab()
		cancelAlloc()
		cancelBase()
	}
	// The first action starts the browser and opens the tab.
	if err := chromedp.Do(ctx); err != nil {
		stop()
		t.Fatalf("starting %s: %v\n%s", path, err, tail(out.String(), 20))
	}
	if err := st.watch(ctx); err != nil {
		stop()
		t.Fatalf("watching the page's errors: %v", err)
	}
	t.Cleanup(func() {
		for _, e := range st.take() {
			t.Errorf("browser: %s", e)
		}
		stop()
	})
	return ctx
}

// FreshTab returns a tab of ctx's browser in a browser context of its
// own, as a second person's browser would be: it shares no cookie or
// storage with ctx's tab. It closes when t ends; its page errors are
// collected with those of ctx's tab (PageErrors(ctx) returns both) and
// fail the test that called Browser.
func FreshTab(t testing.TB, ctx context.Context) context.Context {
	t.Helper()
	st, _ := ctx.Value(pageErrorsKey{}).(*pageErrors)
	if st == nil {
		t.Fatal("FreshTab: ctx does not come from testenv.Browser")
	}
	tab, cancel := chromedp.NewContext(ctx, chromedp.WithNewBrowserContext())
	if err := chromedp.Do(tab); err != nil {
		cancel()
		t.Fatalf("opening a tab: %v", err)
	}
	if err := st.watch(tab); err != nil {
		cancel()
		t.Fatalf("watching the page's errors: %v", err)
	}
	t.Cleanup(cancel)
	return tab
}

// PageErrors returns the uncaught exceptions and Content-Security-Policy
// violations the browser's pages reported so far, and forgets them, so
// that a test expecting one does not fail at its end.
func PageErrors(ctx context.Context) []string {
	st, _ := ctx.Value(pageErrorsKey{}).(*pageErrors)
	if st == nil {
		return nil
	}
	return st.take()
}

// Screenshot writes a PNG of the whole page of ctx's tab, not just what
// the window shows, to ArtifactsDir()/screenshots/<test>-<name>.png and
// logs where. A screenshot that cannot be taken fails the test, which
// goes on.
func Screenshot(t testing.TB, ctx context.Context, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Errorf("screenshot %s: %v", name, err)
		return
	}
	dir := filepath.Join(ArtifactsDir(), "screenshots")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Errorf("screenshot %s: %v", name, err)
		return
	}
	file := filepath.Join(dir, fileSafe(t.Name()+"-"+name)+".png")
	if err := os.WriteFile(file, png, 0o644); err != nil {
		t.Errorf("screenshot %s: %v", name, err)
		return
	}
	t.Logf("screenshot: %s", file)
}

// PhoneScreenshot is Screenshot with ctx's tab shown as on a phone (see
// Phone); the tab is back at the desktop size afterwards.
func PhoneScreenshot(t testing.TB, ctx context.Context, name string) {
	t.Helper()
	if err := chromedp.Do(ctx, Phone); err != nil {
		t.Errorf("emulating a phone: %v", err)
		return
	}
	defer func() {
		if err := chromedp.Do(ctx, Desktop); err != nil {
			t.Errorf("back to the desktop size: %v", err)
		}
	}()
	Screenshot(t, ctx, name)
}

// Phone is an action that shows the tab as a phone does: PhoneWidth x
// PhoneHeight, portrait, touch, and a mobile viewport that honours the
// page's viewport meta tag. Desktop undoes it.
var Phone = chromedp.EmulateViewport(PhoneWidth, PhoneHeight, chromedp.EmulateMobile, chromedp.EmulateTouch, chromedp.EmulatePortrait)

// Desktop is an action that ends any emulation: the tab is the window's
// size again (DesktopWidth x DesktopHeight).
var Desktop = chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
	if _, err := cdp.Call(ctx, t, emulation.ClearDeviceMetricsOverride, cdp.Empty{}); err != nil {
		return err
	}
	_, err := cdp.Call(ctx, t, emulation.SetTouchEmulationEnabled, emulation.SetTouchEmulationEnabledParams{})
	return err
})

// ByRole is a query option that finds elements as assistive technology
// does: by their computed role ("button", "link", "combobox", "heading",
// …) and accessible name (what a screen reader reads: the text, the
// associated label, aria-label or aria-labelledby), matched exactly; an
// empty name matches every element of the role. An element without a
// usable name is therefore not found, which is the point. The query's
// selector is only a label in error messages:
//
//	chromedp.Click("Sign in", testenv.ByRole("button", "Sign in"))
func ByRole(role, name string) chromedp.QueryOption {
	return chromedp.ByFunc(func(ctx context.Context, t *chromedp.Target, n *chromedp.Node) ([]cdp.NodeID, error) {
		n.RLock()
		root := n.NodeID
		n.RUnlock()
		res, err := cdp.Call(ctx, t, accessibility.QueryAXTree, accessibility.QueryAXTreeParams{NodeID: root, Role: role, AccessibleName: name})
		if err != nil {
			return nil, err
		}
		var ids []cdp.BackendNodeID
		for _, ax := range res.Nodes {
			if !ax.Ignored && ax.BackendDOMNodeID != 0 {
				ids = append(ids, ax.BackendDOMNodeID)
			}
		}
		if len(ids) == 0 {
			return []cdp.NodeID{}, nil
		}
		pushed, err := cdp.Call(ctx, t, dom.PushNodesByBackendIDsToFrontend, dom.PushNodesByBackendIDsToFrontendParams{BackendNodeIDs: ids})
		return pushed.NodeIDs, err
	})
}

// ArtifactsDir is where tests write what a person may want to look at
// after a run: $HUTCH_TEST_ARTIFACTS, else os.TempDir()/hutch-test-artifacts.
func ArtifactsDir() string {
	if d := os.Getenv(ArtifactsEnv); d != "" {
		return d
	}
	return filepath.Join(os.TempDir(), "hutch-test-artifacts")
}

// findChromium returns Debian's chromium, else one on PATH.
func findChromium() (string, error) {
	if fi, err := os.Stat(chromiumPath); err == nil && !fi.IsDir() {
		return chromiumPath, nil
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("chromium not found at %s or on PATH", chromiumPath)
}

type pageErrorsKey struct{}

// pageErrors collects what the pages of a browser report as broken.
type pageErrors struct {
	mu   sync.Mutex
	errs []string
}

// watch collects the page errors of ctx's tab.
func (p *pageErrors) watch(ctx context.Context) error {
	return chromedp.Listen(ctx, func(ev any) {
		var msg string
		switch ev := ev.(type) {
		case *runtime.EventExceptionThrown:
			d := ev.ExceptionDetails
			if d == nil {
				return
			}
			msg = d.Text
			if d.Exception != nil && d.Exception.Description != "" {
				msg += " " + d.Exception.Description
			}
			msg = fmt.Sprintf("uncaught exception at %s:%d: %s", d.URL, d.LineNumber+1, msg)
		case *log.EventEntryAdded:
			// Security entries are Content-Security-Policy violations
			// (and mixed content); a refused request's status is a
			// network entry, which tests of refusals expect.
			if ev.Entry == nil || ev.Entry.Source != log.EntrySourceSecurity {
				return
			}
			msg = fmt.Sprintf("%s: %s", ev.Entry.URL, ev.Entry.Text)
		default:
			return
		}
		p.mu.Lock()
		p.errs = append(p.errs, msg)
		p.mu.Unlock()
	})
}

func (p *pageErrors) take() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	errs := p.errs
	p.errs = nil
	return errs
}

// fileSafe makes a test name (which has a slash per subtest) a file name.
func fileSafe(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.':
			return r
		}
		return '_'
	}, s)
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// syncBuffer is a bytes.Buffer the browser's output goroutine and the
// test may use at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
