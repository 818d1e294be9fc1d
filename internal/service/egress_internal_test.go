package service

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/internal/egress"
	"github.com/hutchsandbox/hutch/internal/events"
	"github.com/hutchsandbox/hutch/internal/metrics"
	"github.com/hutchsandbox/hutch/internal/office"
)

// TestEgressProxy_DenialCounted: a connection an office's egress proxy
// refuses by its network setting is a refusal in the daemon's metrics,
// and an event of the log naming the office, the host and why.
func TestEgressProxy_DenialCounted(t *testing.T) {
	layout, err := ResolveLayout(LayoutOptions{StateDir: filepath.Join(t.TempDir(), "state"), Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	s := New(layout, nil)
	m := metrics.New("")
	s.SetMetrics(m)
	addr, err := office.NewAddress("web", "egress-denied")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetNetwork(&addr, "none", nil); err != nil {
		t.Fatal(err)
	}
	p, err := s.newEgressProxy(string(addr.Key()))
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", filepath.Join(t.TempDir(), "egress.sock"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- p.Serve(ctx, l) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, net.ErrClosed) {
			t.Errorf("the proxy's Serve: %v", err)
		}
	})

	c, err := net.Dial("unix", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	if _, err := c.Write([]byte("CONNECT example.test:443 HTTP/1.1\r\nHost: example.test:443\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	if res.StatusCode != http.StatusForbidden {
		t.Fatalf("CONNECT with network none: %s, want 403", res.Status)
	}
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if want := `hutch_refusals_total{reason="network",surface="egress"} 1`; !strings.Contains(rec.Body.String(), want) {
		t.Errorf("metrics lack %s", want)
	}
	evs, err := s.Events().Last(10)
	if err != nil {
		t.Fatal(err)
	}
	want := events.Event{Surface: events.SurfaceEgress, Action: events.Refused, Target: string(addr.Key()), Detail: "network: example.test:443 network is none"}
	if n := len(evs); n == 0 || evs[n-1].Surface != want.Surface || evs[n-1].Action != want.Action || evs[n-1].Target != want.Target || evs[n-1].Detail != want.Detail {
		t.Errorf("events: %+v; want the last one %+v", evs, want)
	}
}

// TestEgressRecorder_PlaceholderRefusalIsAnEvent: a placeholder the proxy
// refused toward a host its entry does not name is an attempted
// exfiltration in the event log (the secret's name and the host, never
// its value); a substitution is no event there (the office's journal
// keeps it).
func TestEgressRecorder_PlaceholderRefusalIsAnEvent(t *testing.T) {
	layout, err := ResolveLayout(LayoutOptions{StateDir: filepath.Join(t.TempDir(), "state"), Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	s := New(layout, nil)
	key := "v1-web-exfil-0123456789abcdef"
	record := s.egressRecorder(key)
	record(egress.Event{Secret: "GH_TOKEN", Host: "api.github.com", Port: 443, Kind: egress.KindSubstituted})
	record(egress.Event{Secret: "GH_TOKEN", Host: "evil.example", Port: 443, Kind: egress.KindRefused, Reason: egress.ReasonNotListed})
	evs, err := s.Events().Last(10)
	if err != nil {
		t.Fatal(err)
	}
	want := "egress refused " + key + " placeholder: GH_TOKEN toward evil.example:443 host not listed for this secret (an attempted exfiltration)"
	if len(evs) != 1 || evs[0].Surface+" "+evs[0].Action+" "+evs[0].Target+" "+evs[0].Detail != want {
		t.Errorf("events: %+v; want one: %s", evs, want)
	}
}

// TestRefusalLimiter_Sources: past maxRefusalSources, sources back at
// their full burst are forgotten so a new one gets its own rate; while
// none is idle, a new one shares its surface's overflow source.
func TestRefusalLimiter_Sources(t *testing.T) {
	l := &refusalLimiter{every: 500 * time.Millisecond}
	for i := range maxRefusalSources {
		if ok, _ := l.admitSource("mcp", fmt.Sprint("web/c", i)); !ok {
			t.Fatalf("source %d refused at once", i)
		}
	}
	// None idle yet (each spent a token just now, and gets it back only
	// after 500 ms): a new source overflows.
	for range refusalSourceBurst {
		l.admitSource("mcp", "web/new")
	}
	if _, own := l.sources["mcp\x00web/new"]; own || len(l.sources) != maxRefusalSources+1 {
		t.Fatalf("a new source past the bound: own entry %v, %d sources", own, len(l.sources))
	}
	if ok, _ := l.admitSource("mcp", "web/newer"); ok {
		t.Error("the overflow source admitted past its burst")
	}
	// Once the first sources are back at their burst, they are forgotten.
	time.Sleep(600 * time.Millisecond)
	if ok, _ := l.admitSource("mcp", "web/latest"); !ok {
		t.Error("a new source was refused after the idle ones were forgotten")
	}
	if _, own := l.sources["mcp\x00web/latest"]; !own {
		t.Errorf("the new source shares a rate: %d sources", len(l.sources))
	}
}
