package admin

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"html/template"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/office"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/sandbox/image"
	"github.com/hutchsandbox/hutch/internal/testenv"
)

func TestCPUPercent(t *testing.T) {
	pre := sandbox.Usage{Instance: "c1", CPU: 1 * time.Second, Clock: 25 * time.Second}
	cur := sandbox.Usage{Instance: "c1", CPU: 1500 * time.Millisecond, Clock: 26 * time.Second}
	// 0.5 s of CPU time over 1 s: half a CPU.
	if got, ok := cpuPercent(cur, pre); !ok || got != 50 {
		t.Errorf("cpuPercent = %v, %v; want 50, true", got, ok)
	}
	for name, pre := range map[string]sandbox.Usage{
		"none":              {},
		"another runtime":   {Instance: "c0", CPU: 1, Clock: 1},
		"counter went back": {Instance: "c1", CPU: 2 * time.Second, Clock: 25 * time.Second},
		"no time passed":    {Instance: "c1", CPU: 1, Clock: 26 * time.Second},
	} {
		if got, ok := cpuPercent(cur, pre); ok {
			t.Errorf("%s: cpuPercent = %v, want unknown", name, got)
		}
	}
	if s := toSample(time.Time{}, cur, nil); s.CPUKnown {
		t.Errorf("a reading alone gave a CPU figure: %+v", s)
	}
	cur.Memory, cur.MemoryLimit, cur.Pids, cur.PidsLimit = 1<<20, 64<<20, 2, 64
	want := sample{CPU: 50, CPUKnown: true, Mem: 1 << 20, MemLimit: 64 << 20, Pids: 2, PidsLimit: 64}
	if s := toSample(time.Time{}, cur, &pre); s != want {
		t.Errorf("sample = %+v, want %+v", s, want)
	}
}

func TestRing_KeepsTheLastHour(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	var r ring
	for i := range 400 {
		r.add(sample{At: t0.Add(time.Duration(i) * sampleEvery), Pids: uint64(i)})
	}
	now := t0.Add(399 * sampleEvery)
	got := r.since(now.Add(-usageWindow))
	if len(got) != ringSize || ringSize != 360 {
		t.Fatalf("%d samples kept (ring of %d), want 360", len(got), ringSize)
	}
	if got[0].Pids != 40 || got[359].Pids != 399 {
		t.Errorf("kept samples %d to %d, want 40 to 399", got[0].Pids, got[359].Pids)
	}
	// After a pause, what is older than an hour is not shown, though kept.
	later := now.Add(30 * time.Minute)
	r.add(sample{At: later, Pids: 1000})
	if got := r.since(later.Add(-usageWindow)); len(got) != 181 || got[0].Pids != 220 || got[180].Pids != 1000 {
		t.Errorf("after a 30 min pause: %d samples from %d", len(got), got[0].Pids)
	}
	if l, _ := r.last(); l.Pids != 1000 {
		t.Errorf("last = %+v", l)
	}
}

// chartFixture is 30 samples, 10 s apart up to now: CPU 2 % more each
// time (the first unknown), memory from 100 MiB, 1 MiB more each time.
func chartFixture(now time.Time) []sample {
	var out []sample
	for i := range 30 {
		out = append(out, sample{
			At:  now.Add(time.Duration(i-29) * sampleEvery),
			CPU: float64(2 * i), CPUKnown: i > 0,
			Mem: uint64(100+i) << 20, MemLimit: 512 << 20, Pids: 3, PidsLimit: 512,
		})
	}
	return out
}

var (
	pointsAttr = regexp.MustCompile(`<polyline points="([^"]*)"`)
	gCPU       = regexp.MustCompile(`(?s)<g class="cpu">(.*?)</g>`)
	gMem       = regexp.MustCompile(`(?s)<g class="mem">(.*?)</g>`)
)

// countPoints counts the polylines' points and the dots in an SVG group.
func countPoints(group string) (lines []int, dots int) {
	for _, m := range pointsAttr.FindAllStringSubmatch(group, -1) {
		lines = append(lines, len(strings.Fields(m[1])))
	}
	return lines, strings.Count(group, "<circle")
}

func TestChart(t *testing.T) {
	p := newPortal(t)
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	v := renderChart("web/chart", now, now.Add(-10*time.Minute), sandbox.Limits{CPUs: 1}, chartFixture(now), 25*time.Second)
	var out bytes.Buffer
	if err := p.srv.pages.ExecuteTemplate(&out, "chart", v); err != nil {
		t.Fatal(err)
	}
	svg := out.String()
	for _, want := range []string{
		`<svg class="chart-svg" viewBox="0 0 640 240" role="img" aria-labelledby="usage-chart-title usage-chart-desc">`,
		`<title id="usage-chart-title">CPU and memory use of web/chart&#39;s runtime over the last hour</title>`,
		`<desc id="usage-chart-desc">Line chart from 11:00:00 UTC to 12:00:00 UTC: CPU use in percent of its limit of 1 CPU (solid line, left axis, 0 to 125 %) and memory use in MiB (dashed line, right axis, 0 to 640 MiB), one sample every 10 seconds; the dotted line is the limit; a break in a line is a time the runtime was not measured.</desc>`,
		`<p id="usage-chart-summary">CPU, in percent of its limit of 1 CPU: now 58.0 %, peak 58.0 %, average 30.0 %. Memory: now 129 MiB, peak 129 MiB, limit 512 MiB. 30 samples, the last at 12:00:00 UTC. The portal has measured since 11:50:00 UTC.</p>`,
		`>−60 min</text>`, `>now</text>`, `>100 %</text>`, `>512 MiB</text>`, `>256 MiB</text>`,
		// Both limits sit at four fifths of their axes: one line, "limit".
		`<g class="limit"><line x1="64" x2="576" y1="55.2" y2="55.2"/><text x="576" y="55.2" dx="-4" dy="-5" text-anchor="end">limit</text></g>`,
		`<span class="key cpu"></span> CPU use, % of its limit of 1 CPU (left axis)`,
	} {
		if !strings.Contains(svg, want) {
			t.Errorf("the chart lacks %s\n%s", want, svg)
		}
	}
	if strings.Contains(svg, "hx-get") {
		t.Error("a chart without a URL polls")
	}
	cpu, mem := gCPU.FindStringSubmatch(svg), gMem.FindStringSubmatch(svg)
	if cpu == nil || mem == nil {
		t.Fatalf("no cpu or mem group:\n%s", svg)
	}
	if lines, dots := countPoints(cpu[1]); len(lines) != 1 || lines[0] != 29 || dots != 0 {
		t.Errorf("CPU: polylines of %v points and %d dots, want one of 29 (the first sample has no CPU figure)", lines, dots)
	}
	if lines, dots := countPoints(mem[1]); len(lines) != 1 || lines[0] != 30 || dots != 0 {
		t.Errorf("memory: polylines of %v points and %d dots, want one of 30", lines, dots)
	}
	// The newest point is at the right edge, at its value: 58 % of an
	// axis of 125 %, 129 of 640 MiB.
	if !strings.Contains(cpu[1], " 576,121.1\"") || !strings.Contains(mem[1], " 576,172.5\"") {
		t.Errorf("last points: cpu %s mem %s", cpu[1], mem[1])
	}

	// A gap breaks the lines; a sample alone between gaps is a dot.
	s := chartFixture(now)
	gappy := append(append([]sample{}, s[:10]...), s[12])
	gappy = append(gappy, s[15:]...)
	v = renderChart("web/chart", now, time.Time{}, sandbox.Limits{}, gappy, 25*time.Second)
	if len(v.Mem) != 2 || len(v.MemDots) != 1 || len(v.CPU) != 2 || len(v.CPUDots) != 1 {
		t.Errorf("with gaps: %d+%d memory lines+dots, %d+%d CPU, want 2+1 each", len(v.Mem), len(v.MemDots), len(v.CPU), len(v.CPUDots))
	}
	// Without a CPU limit, CPU is a share of one CPU, and the one line
	// drawn is the memory limit's.
	if v.CPUOf != "one CPU" || len(v.Limits) != 1 || v.Limits[0].Label != "memory limit" || !strings.HasPrefix(v.Summary, "CPU, in percent of one CPU: ") {
		t.Errorf("without a CPU limit: CPU of %q, limit lines %+v, summary %q", v.CPUOf, v.Limits, v.Summary)
	}
	// A CPU figure past the limit (a burst over its quota) raises the CPU
	// axis: the two limits part, each drawn and named.
	burst := chartFixture(now)
	burst[len(burst)-1].CPU = 180
	v = renderChart("web/chart", now, time.Time{}, sandbox.Limits{CPUs: 1}, burst, 25*time.Second)
	if len(v.Limits) != 2 || v.Limits[0].Label != "CPU limit" || v.Limits[1].Label != "memory limit" || v.Limits[0].Pos == v.Limits[1].Pos {
		t.Errorf("a burst past the CPU limit: limit lines %+v, want a CPU and a memory line apart", v.Limits)
	}

	// No sample: no chart, a sentence.
	v = renderChart("web/chart", now, now.Add(-time.Minute), sandbox.Limits{}, nil, 25*time.Second)
	out.Reset()
	if err := p.srv.pages.ExecuteTemplate(&out, "chart", v); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "<svg") || !strings.Contains(out.String(), "No resource use was recorded for this runtime in the last hour") {
		t.Errorf("empty chart:\n%s", out.String())
	}
}

// fakeRuntimes is a measured mode: it lists runtimes and answers their
// readings from a queue per runtime, and records the readings asked for.
type fakeRuntimes struct {
	mu       sync.Mutex
	list     []sandbox.Status
	err      error
	readings map[string][]sandbox.Usage // queued, by office key
	last     map[string]sandbox.Usage   // answered last, by office key
	calls    []string
}

func (f *fakeRuntimes) List(context.Context) ([]sandbox.Status, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]sandbox.Status(nil), f.list...), f.err
}

func (f *fakeRuntimes) setList(l ...sandbox.Status) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.list = l
}

// Usage answers the oldest queued reading, and the last one answered
// again once the queue is empty.
func (f *fakeRuntimes) Usage(_ context.Context, key string) (sandbox.Usage, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, key)
	if q := f.readings[key]; len(q) > 0 {
		f.last[key], f.readings[key] = q[0], q[1:]
	}
	u, ok := f.last[key]
	if !ok {
		return sandbox.Usage{}, errdefs.New(errdefs.ErrNotFound, "no such runtime: "+key)
	}
	return u, nil
}

// set queues a runtime's next reading: CPU time and host CPU time on 2
// CPUs so far (ns; the clock is half of it), memory in use (MiB).
func (f *fakeRuntimes) set(key string, cpu, system uint64, memMiB uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.readings == nil {
		f.readings, f.last = map[string][]sandbox.Usage{}, map[string]sandbox.Usage{}
	}
	f.readings[key] = append(f.readings[key], sandbox.Usage{
		Instance: "id-" + key, CPU: time.Duration(cpu), Clock: time.Duration(system / 2),
		Memory: memMiB << 20, MemoryLimit: 256 << 20, Pids: 4, PidsLimit: 128,
	})
}

func (f *fakeRuntimes) takeCalls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.calls
	f.calls = nil
	return c
}

func usageStatus(platform, id string, state sandbox.RuntimeState) sandbox.Status {
	addr, _ := office.NewAddress(platform, id)
	key := string(addr.Key())
	return sandbox.Status{OfficeKey: key, Platform: platform, ConversationID: id, Name: image.ContainerName(key), State: state, Limits: sandbox.Limits{CPUs: 1, MemoryBytes: 256 << 20, Pids: 128}}
}

// stubSampler is a sampler over a fake whose readings the test makes with
// tick; it is registered as srv's, and its loop never runs.
func stubSampler(srv *Server, now func() time.Time, rts *fakeRuntimes) *sampler {
	u := newSampler(now, nil, func(context.Context) (measured, error) { return rts, nil })
	u.pause = 0
	u.once.Do(func() {})
	close(u.first)
	samplers.Lock()
	samplers.m[srv] = u
	samplers.Unlock()
	return u
}

// usageSession is a browser with a session, made without the home page
// (which lists runtimes, and so needs a working managed mode).
func (p *portal) usageSession(t *testing.T) *browser {
	t.Helper()
	link, _, _ := p.srv.Link("ada", 0)
	u, _ := url.Parse(link)
	id, _, ok := p.srv.store.redeem(u.Query().Get("token"))
	if !ok {
		t.Fatal("the link was not redeemed")
	}
	b := p.browser(t)
	base, _ := url.Parse(p.ts.URL + "/admin/")
	b.c.Jar.SetCookies(base, []*http.Cookie{{Name: cookieName, Value: id, Path: "/admin/"}})
	return b
}

func TestSampler(t *testing.T) {
	p := newPortalIn(t, sandbox.Mode{Kind: sandbox.KindImage, Target: "hutch-sandbox:dev"})
	a, b := usageStatus("web", "alpha", sandbox.StateRunning), usageStatus("web", "beta & co", sandbox.StateRunning)
	rts := &fakeRuntimes{list: []sandbox.Status{a, b, usageStatus("web", "gamma", sandbox.StateStopped)}}
	u := stubSampler(p.srv, p.clock.now, rts)
	ctx := context.Background()
	br := p.usageSession(t)
	get := func(path string) string {
		t.Helper()
		code, body := br.do(http.MethodGet, p.ts.URL+path, nil)
		if code != http.StatusOK {
			t.Fatalf("%s: %d\n%s", path, code, body)
		}
		return body
	}

	// A runtime's first reading is two, a pause apart, so CPU is known
	// at once; stopped runtimes are not read.
	rts.set(a.OfficeKey, 900_000_000, 98_000_000_000, 40)
	rts.set(a.OfficeKey, 1_000_000_000, 100_000_000_000, 50)
	rts.set(b.OfficeKey, 4_900_000_000, 98_000_000_000, 90)
	rts.set(b.OfficeKey, 5_000_000_000, 100_000_000_000, 100)
	// beta's engine leaves the process limit out of its readings (as
	// Podman's stats do): the limit its status lists is shown.
	for i := range rts.readings[b.OfficeKey] {
		rts.readings[b.OfficeKey][i].PidsLimit = 0
	}
	u.tick(ctx)
	if c := rts.takeCalls(); len(c) != 4 || strings.Count(strings.Join(c, " "), a.OfficeKey) != 2 {
		t.Errorf("first reading's calls: %q", c)
	}
	body := get("/admin/usage")
	for _, want := range []string{
		`<section id="usage" class="usage" aria-labelledby="usage-h" hx-get="/admin/usage" hx-trigger="every 10s" hx-swap="outerMorph" hx-status:4xx="select:'p[role=alert]' swap:outerHTML" hx-status:5xx="swap:none">`,
		`<p id="usage-news" class="visually-hidden" role="status" aria-live="polite" aria-atomic="true"></p>`,
		`aria-live="off"`,
		`<a href="/admin/office?conversation=alpha&amp;platform=web">web/alpha</a>`,
		`<a href="/admin/office?conversation=beta&#43;%26&#43;co&amp;platform=web">web/beta &amp; co</a>`,
		`<td class="num">10.0 % <span class="muted">of 1 CPU (its limit)</span></td>`, // 0.1 s over 1 s
		`<td class="num">50 MiB / 256 MiB</td>`, `<td class="num">100 MiB / 256 MiB</td>`,
		`<time datetime="2026-11-30T12:00:00Z">12:00:00 UTC</time>`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("usage fragment lacks %s\n%s", want, body)
		}
	}
	if n := strings.Count(body, `<td class="num">4 / 128</td>`); n != 2 {
		t.Errorf("%d rows show 4 of 128 processes, want both", n)
	}
	if strings.Contains(body, "gamma") || strings.Contains(body, "<html") {
		t.Errorf("usage fragment shows a stopped runtime or is a page:\n%s", body)
	}

	// Later readings are one each, compared with the previous one: 1 s of
	// CPU time over 10 s. beta stops; alpha's memory nears its limit. Each
	// is news once.
	p.clock.add(sampleEvery)
	rts.set(a.OfficeKey, 2_000_000_000, 120_000_000_000, 240)
	rts.setList(a)
	u.tick(ctx)
	if c := rts.takeCalls(); len(c) != 1 || c[0] != a.OfficeKey {
		t.Errorf("second reading's calls: %q", c)
	}
	body = get("/admin/usage")
	news := `aria-atomic="true">12:00:10 UTC: web/alpha uses 240 MiB of its 256 MiB of memory; web/beta &amp; co stopped.</p>`
	if !strings.Contains(body, news) || !strings.Contains(body, `<td class="num">10.0 % `) || strings.Contains(body, "beta &amp; co</a>") {
		t.Errorf("after beta stopped:\n%s", body)
	}
	p.clock.add(sampleEvery)
	rts.set(a.OfficeKey, 3_000_000_000, 140_000_000_000, 240)
	u.tick(ctx)
	if body = get("/admin/usage"); !strings.Contains(body, news) {
		t.Errorf("the news changed though nothing did:\n%s", body)
	}

	// The engine goes away, and comes back.
	p.clock.add(sampleEvery)
	rts.mu.Lock()
	rts.err = errdefs.New(errdefs.ErrUnavailable, "No container engine answers at unix:///var/run/docker.sock.")
	rts.mu.Unlock()
	u.tick(ctx)
	body = get("/admin/usage")
	if !strings.Contains(body, "Resource use could not be read at 12:00:30 UTC: No container engine answers") ||
		!strings.Contains(body, "12:00:30 UTC: resource use cannot be read.</p>") || strings.Contains(body, "<table") {
		t.Errorf("engine gone:\n%s", body)
	}
	p.clock.add(sampleEvery)
	rts.mu.Lock()
	rts.err = nil
	rts.mu.Unlock()
	rts.set(a.OfficeKey, 4_000_000_000, 180_000_000_000, 60)
	u.tick(ctx)
	body = get("/admin/usage")
	if !strings.Contains(body, "12:00:40 UTC: resource use is read again.</p>") || !strings.Contains(body, `<td class="num">60 MiB / 256 MiB</td>`) {
		t.Errorf("engine back:\n%s", body)
	}

	// alpha's chart: five readings, CPU 10 % each, the one after the pause
	// compared over 20 s (within the gap); beta's chart has its one sample.
	body = get("/admin/usage/chart?platform=web&conversation=alpha")
	for _, want := range []string{
		`<section id="usage-chart" class="chart" aria-labelledby="usage-chart-h" hx-get="/admin/usage/chart?conversation=alpha&amp;platform=web" hx-trigger="every 10s" hx-swap="outerMorph" hx-status:4xx=`,
		"CPU, in percent of its limit of 1 CPU: now 5.0 %, peak 10.0 %, average 8.8 %. Memory: now 60 MiB, peak 240 MiB, limit 256 MiB. 4 samples, the last at 12:00:40 UTC. The portal has measured since 12:00:00 UTC.",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("alpha's chart lacks %s\n%s", want, body)
		}
	}
	if body = get("/admin/usage/chart?platform=web&conversation=beta+%26+co"); !strings.Contains(body, "Memory: now 100 MiB, peak 100 MiB, limit 256 MiB. 1 sample,") {
		t.Errorf("beta's chart:\n%s", body)
	}
	if body = get("/admin/usage/chart?platform=web&conversation=never"); !strings.Contains(body, "No resource use was recorded") {
		t.Errorf("a chart without samples:\n%s", body)
	}

	// An hour after beta stopped, its history goes.
	p.clock.add(usageWindow)
	u.tick(ctx)
	u.mu.Lock()
	_, kept := u.series[b.OfficeKey]
	u.mu.Unlock()
	if kept {
		t.Error("a runtime stopped an hour ago is still kept")
	}
}

func TestUsage_NeedsASession(t *testing.T) {
	p := newPortalIn(t, sandbox.Mode{Kind: sandbox.KindImage, Target: "hutch-sandbox:dev"})
	stubSampler(p.srv, p.clock.now, &fakeRuntimes{})
	b := p.browser(t)
	for _, path := range []string{"/admin/usage", "/admin/usage/chart?platform=web&conversation=x"} {
		code, body := b.do(http.MethodGet, p.ts.URL+path, nil)
		if code != http.StatusUnauthorized || strings.Contains(body, "Resource use") || !strings.Contains(body, "You are not signed in") {
			t.Errorf("%s without a session: %d\n%s", path, code, body)
		}
	}
}

func TestUsage_HostNotMeasured(t *testing.T) {
	p := newPortalIn(t, sandbox.Mode{Kind: sandbox.KindHost})
	b := p.usageSession(t)
	code, body := b.do(http.MethodGet, p.ts.URL+"/admin/usage", nil)
	if code != http.StatusOK || !strings.Contains(body, "Resource use is measured only for runtimes hutch manages, and host mode has none.") || strings.Contains(body, "hx-get") || strings.Contains(body, "%") {
		t.Errorf("usage: %d\n%s", code, body)
	}
	code, body = b.do(http.MethodGet, p.ts.URL+"/admin/usage/chart?platform=web&conversation=x", nil)
	if code != http.StatusNotImplemented || !strings.Contains(body, "There are no runtimes to chart in host mode: hutch manages none.") || strings.Contains(body, "<svg") {
		t.Errorf("chart: %d\n%s", code, body)
	}
	samplers.Lock()
	_, started := samplers.m[p.srv]
	samplers.Unlock()
	if started {
		t.Error("a sampler was made for a mode that is not measured")
	}
}

// TestVendoredHTMX: the served htmx is the one static/VENDOR.md records.
func TestVendoredHTMX(t *testing.T) {
	js, err := assets.ReadFile("static/htmx.min.js")
	if err != nil {
		t.Fatal(err)
	}
	vendor, err := assets.ReadFile("static/VENDOR.md")
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(js)
	if !bytes.Contains(vendor, []byte("SHA-256 of `htmx.min.js`: `"+hex.EncodeToString(sum[:])+"`")) {
		t.Errorf("static/htmx.min.js has SHA-256 %x, which static/VENDOR.md does not record", sum)
	}
	if !bytes.Contains(js, []byte("this.version='4.0.1'")) && !bytes.Contains(js, []byte(`version="4.0.1"`)) {
		t.Error("static/htmx.min.js is not htmx 4.0.1")
	}
	p := newPortal(t)
	resp, err := http.Get(p.ts.URL + "/admin/static/htmx.min.js")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	served, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !bytes.Equal(served, js) || !strings.Contains(resp.Header.Get("Content-Type"), "javascript") {
		t.Errorf("GET htmx.min.js: %d %s, %d bytes", resp.StatusCode, resp.Header.Get("Content-Type"), len(served))
	}
}

func usagePtr[T any](v T) *T { return &v }

// usagePage is a page holding what layout.html must hold for the usage
// fragment to refresh: htmx's config and script.
const usagePage = `<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="htmx-config" content='{"includeIndicatorCSS":false}'>
<title>Resource use</title>
<link rel="stylesheet" href="/admin/static/admin.css">
<script src="/admin/static/htmx.min.js" defer></script>
</head><body><main id="main"><h1>Resource use</h1>{{template "usage" .}}</main></body></html>`

// TestBrowser_UsageRefreshes: in Chromium, under the portal's
// Content-Security-Policy, the usage fragment refreshes itself every 10 s
// with the vendored htmx, and the morph keeps the focused table and the
// live region's node, whose text changes only with the state.
func TestBrowser_UsageRefreshes(t *testing.T) {
	ctx := testenv.Browser(t)
	p := newPortalIn(t, sandbox.Mode{Kind: sandbox.KindImage, Target: "hutch-sandbox:dev"})
	a, b := usageStatus("web", "alpha", sandbox.StateRunning), usageStatus("web", "beta & co", sandbox.StateRunning)
	rts := &fakeRuntimes{list: []sandbox.Status{a, b}}
	u := stubSampler(p.srv, p.clock.now, rts)
	rts.set(a.OfficeKey, 1_000_000_000, 100_000_000_000, 50)
	rts.set(b.OfficeKey, 1_000_000_000, 100_000_000_000, 50)
	u.tick(context.Background())

	// The portal's routes, and the page, with the portal's headers.
	page := template.Must(template.Must(p.srv.pages.Clone()).New("usage-page").Parse(usagePage))
	mux := http.NewServeMux()
	mux.Handle("GET /admin/usage-page", p.srv.headers(p.srv.authed(func(w http.ResponseWriter, r *request) error {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		return page.ExecuteTemplate(w, "usage-page", p.srv.usageView(r.Context()))
	})))
	mux.Handle("/", p.srv.Handler())
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	link, _, _ := p.srv.Link("ada", 0)
	lu, _ := url.Parse(link)
	id, _, _ := p.srv.store.redeem(lu.Query().Get("token"))

	step := func(what string, a chromedp.Action[chromedp.Void]) {
		t.Helper()
		sctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		if err := chromedp.Do(sctx, a); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	js := func(expr string) string {
		t.Helper()
		sctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		v, err := chromedp.Run(sctx, chromedp.Evaluate[string](expr))
		if err != nil {
			t.Fatalf("evaluating %s: %v", expr, err)
		}
		return v
	}
	// waitFor polls the page until expr is "true".
	waitFor := func(what, expr string, within time.Duration) {
		t.Helper()
		deadline := time.Now().Add(within)
		for js(expr) != "true" {
			if time.Now().After(deadline) {
				t.Fatalf("%s within %s; the fragment is:\n%s", what, within, js(`document.getElementById('usage').outerHTML`))
			}
			time.Sleep(200 * time.Millisecond)
		}
	}

	step("setting the session cookie", chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, network.SetCookie, network.SetCookieParams{Name: cookieName, Value: id, URL: ts.URL + "/admin/", HTTPOnly: usagePtr(true)})
		return err
	}))
	sctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	resp, err := chromedp.Run(sctx, chromedp.NavigateResponse(ts.URL+"/admin/usage-page"))
	cancel()
	if err != nil || resp.Status != http.StatusOK {
		t.Fatalf("opening the page: %v, %v", resp, err)
	}
	waitFor("htmx loaded", `String(typeof htmx === 'object' && htmx.version === '4.0.1')`, 5*time.Second)
	if rows := js(`String(document.querySelectorAll('#usage tbody tr').length)`); rows != "2" {
		t.Fatalf("%s rows at first", rows)
	}
	// A person tabs into the table; the live region is marked to tell
	// whether it is still the same node later.
	js(`document.getElementById('usage-table').focus(); document.getElementById('usage-news').hutchMark = 'same'; ''`)

	// beta stops and alpha gets busier: the next poll shows it.
	p.clock.add(sampleEvery)
	rts.setList(a)
	rts.set(a.OfficeKey, 3_000_000_000, 120_000_000_000, 60)
	u.tick(context.Background())
	waitFor("the fragment refreshed by itself", `String(document.getElementById('usage').innerText.includes('20.0 %'))`, 15*time.Second)
	for expr, want := range map[string]string{
		`String(document.querySelectorAll('#usage tbody tr').length)`:     "1",
		`String(document.querySelectorAll('#usage, #usage-news').length)`: "2",
		`String(document.getElementById('usage-news').hutchMark)`:         "same",
		`document.getElementById('usage-news').textContent`:               "12:00:10 UTC: web/beta & co stopped.",
		`document.activeElement.id`:                                       "usage-table",
	} {
		if got := js(expr); got != want {
			t.Errorf("after the refresh, %s = %q, want %q", expr, got, want)
		}
	}
	testenv.Screenshot(t, ctx, "usage")
	testenv.PhoneScreenshot(t, ctx, "usage-phone")

	// Nothing changes state: the next answer leaves the live region alone.
	p.clock.add(sampleEvery)
	rts.set(a.OfficeKey, 4_000_000_000, 140_000_000_000, 60)
	u.tick(context.Background())
	js(`document.getElementById('usage-news').firstChild.hutchMark = 'same'; htmx.trigger('#usage', 'every'); ''`)
	waitFor("the second refresh", `String(document.getElementById('usage').innerText.includes('12:00:20'))`, 10*time.Second)
	if got := js(`String(document.getElementById('usage-news').firstChild.hutchMark) + ' ' + document.getElementById('usage-news').textContent`); got != "same 12:00:10 UTC: web/beta & co stopped." {
		t.Errorf("the live region's text node after a refresh without news: %q", got)
	}

	// The session ends: the next poll's refusal takes the fragment's place.
	p.srv.store.end(id)
	js(`htmx.trigger('#usage', 'every'); ''`)
	waitFor("the refusal shown", `String(!document.getElementById('usage'))`, 10*time.Second)
	if got := js(`Array.from(document.querySelectorAll('main > *')).map(e => e.outerHTML).join('\n')`); got != "<h1>Resource use</h1>\n"+
		`<p role="alert">You are not signed in, or your session ended. Ask for a new link: hutch admin link (or /admin in a chat).</p>` {
		t.Errorf("after the session ended, the page holds:\n%s", got)
	}
}

// TestCPUShare: a CPU figure is a share of the runtime's CPU limit when
// it has one, else of one CPU, and says which.
func TestCPUShare(t *testing.T) {
	for _, tc := range []struct {
		limit, ofOne, want float64
		of, words          string
	}{
		{1.5, 75, 50, "1.5 CPUs (its limit)", "its limit of 1.5 CPUs"},
		{0.5, 50, 100, "0.5 CPUs (its limit)", "its limit of 0.5 CPUs"},
		{1, 20, 20, "1 CPU (its limit)", "its limit of 1 CPU"},
		{0, 250, 250, "one CPU", "one CPU"},
	} {
		s := cpuShareOf(tc.limit)
		if got := s.percent(tc.ofOne); got != tc.want || s.of != tc.of || s.words != tc.words || s.limited != (tc.limit > 0) {
			t.Errorf("cpuShareOf(%v): %v %% of one CPU is %v %% of %q (%q), want %v %% of %q (%q)", tc.limit, tc.ofOne, got, s.of, s.words, tc.want, tc.of, tc.words)
		}
	}
}

// TestSampler_Refresh: an action that changed a runtime asks the loop to
// read at once, and the view shows what it read before the next tick
// (here an hour away): a boost's new memory limit, not the old one.
func TestSampler_Refresh(t *testing.T) {
	a := usageStatus("web", "alpha", sandbox.StateRunning)
	rts := &fakeRuntimes{list: []sandbox.Status{a}}
	rts.set(a.OfficeKey, 900_000_000, 98_000_000_000, 40)
	rts.set(a.OfficeKey, 1_000_000_000, 100_000_000_000, 50)
	u := newSampler(time.Now, nil, func(context.Context) (measured, error) { return rts, nil })
	u.every, u.pause = time.Hour, 0
	u.start()
	defer u.stop()
	<-u.first
	if v := u.view(); len(v.Rows) != 1 || v.Rows[0].MemoryLimit != "256 MiB" {
		t.Fatalf("first view: %+v", v.Rows)
	}
	boosted := a
	boosted.Limits.MemoryBytes = 512 << 20
	rts.setList(boosted)
	rts.mu.Lock()
	rts.readings[a.OfficeKey] = append(rts.readings[a.OfficeKey], sandbox.Usage{
		Instance: "id-" + a.OfficeKey, CPU: 1_100_000_000, Clock: 51_000_000_000,
		Memory: 60 << 20, MemoryLimit: 512 << 20, Pids: 4, PidsLimit: 128,
	})
	rts.mu.Unlock()
	start := time.Now()
	u.refresh(context.Background())
	if waited := time.Since(start); waited >= refreshWait {
		t.Fatalf("refresh waited %v, its bound: the loop did not read", waited)
	}
	if v := u.view(); len(v.Rows) != 1 || v.Rows[0].MemoryLimit != "512 MiB" {
		t.Errorf("the view after a refresh: %+v; want the new limit, 512 MiB", v.Rows)
	}
}
