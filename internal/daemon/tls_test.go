package daemon_test

import (
	"context"
	"crypto/tls"
	"errors"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/client"
	"github.com/hutchsandbox/hutch/internal/daemon"
	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/testenv"
)

// TestAttack_TokenInClear: a TCP listener on an address others reach
// would carry the bearer token (and the portal's session) in clear. It is
// refused without TLS, for the API and the portal alike; with TLS the API
// is served over it, and plain HTTP gets nothing.
func TestAttack_TokenInClear(t *testing.T) {
	host := sandbox.Mode{Kind: sandbox.KindHost}
	for _, o := range []daemon.Options{
		{Mode: host, TCP: "0.0.0.0:0"},
		{Mode: host, TCP: ":0"},
		{Mode: host, Admin: "0.0.0.0:0"},
		{Mode: host, TCP: "127.0.0.1:0", TLSCert: "only-a-cert.pem"},
	} {
		o.Service = hostService(t)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		err := daemon.Run(ctx, o)
		cancel()
		if !errors.Is(err, errdefs.ErrInvalid) {
			t.Errorf("TCP %q, admin %q, cert %q: %v; want a refusal", o.TCP, o.Admin, o.TLSCert, err)
		} else if o.TLSCert == "" && !strings.Contains(err.Error(), "(not a loopback address) needs TLS") {
			t.Errorf("refusal %q does not say TLS is needed", err)
		}
	}

	cert, key, pool := testenv.SelfSigned(t, t.TempDir())
	const token = "0123456789abcdef0123456789abcdef-tls"
	d := start(t, hostService(t), daemon.Options{Mode: host, TCP: "0.0.0.0:0", Token: token, TLSCert: cert, TLSKey: key, Admin: "0.0.0.0:0"})
	m := regexp.MustCompile(`TCP:\s+https://\S+:(\d+)`).FindStringSubmatch(d.out.String())
	if m == nil {
		t.Fatalf("no https TCP address in the daemon's output:\n%s", d.out.String())
	}
	if !strings.Contains(d.out.String(), "Admin:       https://") {
		t.Errorf("the portal is not served over TLS:\n%s", d.out.String())
	}
	base := "https://127.0.0.1:" + m[1]
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
	defer tr.CloseIdleConnections()
	if h, err := (&client.Client{BaseURL: base, Token: token, Transport: tr}).Health(context.Background()); err != nil || h.Status != "ok" {
		t.Errorf("health over TLS: %+v, %v", h, err)
	}
	plain := &http.Transport{}
	defer plain.CloseIdleConnections()
	req, _ := http.NewRequest("GET", "http://127.0.0.1:"+m[1]+"/v1/health", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	if resp, err := (&http.Client{Transport: plain}).Do(req); err == nil {
		_ = resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Errorf("plain HTTP was served on the TLS listener")
		}
	}
	if err := d.stop(t); err != nil {
		t.Errorf("daemon.Run returned %v, want nil", err)
	}
}
