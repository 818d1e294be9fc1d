package egress_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/internal/egress"
	"github.com/hutchsandbox/hutch/internal/netpolicy"
)

// TestRelays: connections offered for an office reach that office's one
// proxy, made on first use, which reads the office's policy per request.
func TestRelays(t *testing.T) {
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = fmt.Fprint(w, "hello from origin")
	}))
	t.Cleanup(origin.Close)
	var made atomic.Int32
	allow := atomic.Bool{}
	allow.Store(true)
	r := &egress.Relays{New: func(key string) (*egress.Proxy, error) {
		made.Add(1)
		return &egress.Proxy{
			Office: key,
			Policy: func() netpolicy.Policy {
				if !allow.Load() {
					return netpolicy.Policy{Mode: netpolicy.ModeNone}
				}
				return netpolicy.Policy{Mode: netpolicy.ModeOpen}
			},
			Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, network, strings.TrimPrefix(origin.URL, "http://"))
			},
		}, nil
	}}
	t.Cleanup(r.Close)

	get := func() string {
		t.Helper()
		inside, host := net.Pipe()
		go r.Handler(office)(host)
		defer func() { _ = inside.Close() }()
		_ = inside.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.WriteString(inside, "GET http://origin.test/ HTTP/1.1\r\nHost: origin.test\r\nConnection: close\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		res, err := http.ReadResponse(bufio.NewReader(inside), nil)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		return fmt.Sprintf("%d %s", res.StatusCode, body)
	}
	if got := get(); got != "200 hello from origin" {
		t.Errorf("first relayed request: %q", got)
	}
	allow.Store(false)
	if got := get(); !strings.HasPrefix(got, "403 hutch egress: origin.test:80 is refused: sandbox.network is none") {
		t.Errorf("after the policy changed to none: %q", got)
	}
	if n := made.Load(); n != 1 {
		t.Errorf("%d proxies made for one office, want 1", n)
	}
	r.Close()
	inside, host := net.Pipe()
	r.Offer(office, host)
	_ = inside.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := inside.Read(make([]byte, 1)); err == nil {
		t.Error("a connection offered after Close was served")
	}
}
