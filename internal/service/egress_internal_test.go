package service

import (
	"bufio"
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hutchsandbox/hutch/internal/metrics"
	"github.com/hutchsandbox/hutch/internal/office"
)

// TestEgressProxy_DenialCounted: a connection an office's egress proxy
// refuses by its network setting is a refusal in the daemon's metrics.
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
}
