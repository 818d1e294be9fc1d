package cloudflare_test

import (
	"encoding/pem"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hutchsandbox/hutch/internal/bridge/protocol"
	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/sandbox/cloudflare"
)

// TestTLS: an https bridge with a private certificate is trusted through
// the CA file, and refused without it.
func TestTLS(t *testing.T) {
	t.Parallel()
	f := &fakeBridge{extensions: allExtensions}
	f.exec = func(w http.ResponseWriter, r *http.Request, req protocol.ExecRequest) {
		frame := frames(w)
		frame(protocol.Frame{Stdout: []byte("over tls\n")})
		frame(protocol.Frame{Exit: &protocol.Exit{}})
	}
	srv := httptest.NewUnstartedServer(f)
	// The refused handshake below is expected: keep it out of the output.
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	ca := filepath.Join(t.TempDir(), "bridge-ca.pem")
	pemBytes := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if err := os.WriteFile(ca, pemBytes, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := cloudflare.ConfigFromEnv("box", func(k string) string {
		return map[string]string{"HUTCH_BRIDGE_URL": srv.URL, "HUTCH_BRIDGE_CA": ca}[k]
	})
	if err != nil {
		t.Fatal(err)
	}
	rt, err := cloudflare.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if h, err := rt.Health(t.Context()); err != nil || !h.Has("stream") {
		t.Fatalf("Health over TLS with the CA file: %+v, %v", h, err)
	}
	res, stdout, _, err := execute(t, rt, sandbox.ExecRequest{Argv: []string{"echo over tls"}})
	if err != nil || res.ExitCode != 0 || stdout != "over tls\n" {
		t.Errorf("Exec over TLS: %+v, stdout %q, %v", res, stdout, err)
	}

	untrusting, err := cloudflare.New(cloudflare.Config{SandboxID: "box", URL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	_, err = untrusting.Health(t.Context())
	if want := "The bridge at " + srv.URL + " is not reachable: "; !errdefs.IsUnavailable(err) || !strings.HasPrefix(fmtErr(err), want) || !strings.Contains(fmtErr(err), "certificate") {
		t.Errorf("Health over TLS without the CA: %v; want ErrUnavailable starting %q about the certificate", err, want)
	}
}
