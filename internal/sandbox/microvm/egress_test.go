package microvm_test

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/internal/egress"
	"github.com/hutchsandbox/hutch/internal/netpolicy"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/sandbox/microvm"
	"github.com/hutchsandbox/hutch/internal/testenv"
)

// upstreamNames are the HTTPS hosts the placeholder test's server
// answers for: the secret's own, and another the allowlist lists too.
const (
	secretHost = "api.example.test"
	otherHost  = "other.example.test"
)

// upstream is an HTTPS server on the host with a certificate for
// upstreamNames, which records the Authorization header of each request
// by the name the request was for.
type upstream struct {
	srv   *httptest.Server
	roots *x509.CertPool
	mu    sync.Mutex
	seen  []string // "host: authorization"
}

func newUpstream(t *testing.T) *upstream {
	t.Helper()
	ca := testenv.NewCA(t, "hutch test upstream CA")
	u := &upstream{roots: ca.Pool()}
	u.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		u.seen = append(u.seen, r.Host+": "+r.Header.Get("Authorization"))
		u.mu.Unlock()
		_, _ = fmt.Fprint(w, "hello from "+r.Host)
	}))
	// The proxy dials an upstream before it decides on the requests in
	// the tunnel, and drops it unused on a refusal.
	u.srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	u.srv.TLS = &tls.Config{Certificates: []tls.Certificate{ca.Server(t, secretHost, otherHost)}}
	u.srv.StartTLS()
	t.Cleanup(u.srv.Close)
	return u
}

func (u *upstream) requests() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Clone(u.seen)
}

// dial maps upstreamNames on port 443 to the server and refuses the rest.
func (u *upstream) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	if addr != secretHost+":443" && addr != otherHost+":443" {
		return nil, fmt.Errorf("test dialer: %s is not a test upstream", addr)
	}
	var d net.Dialer
	return d.DialContext(ctx, network, u.srv.Listener.Addr().String())
}

// guestClient builds testdata/httpsget, static, into dir.
func guestClient(t *testing.T, dir string) string {
	t.Helper()
	out := filepath.Join(dir, "httpsget")
	// hutch's test build flags, so the standard library compiled for it
	// is reused.
	cmd := exec.Command("go", "build", "-trimpath", "-gcflags", "all=-N -l", "-ldflags", "-s -w", "-o", out, "./testdata/httpsget")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the guest's HTTPS client: %v\n%s", err, b)
	}
	return out
}

func randomHex(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// TestPlaceholders: a command in a VM sends a placeholder over HTTPS
// through the VM's proxy, trusting the office's CA; the secret's host
// receives the value, another listed host gets a refusal and no request,
// the value is in no process of the guest, both are recorded, and a new
// allowlist applies without a new VM.
func TestPlaceholders(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	up := newUpstream(t)
	ca, err := egress.LoadOrCreateCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	value := "value-" + randomHex(t, 12)
	token := "hutch-placeholder-" + randomHex(t, 16)
	hosts, err := netpolicy.ParseAllowlist([]string{secretHost})
	if err != nil {
		t.Fatal(err)
	}
	allow := []string{secretHost, otherHost}

	var mu sync.Mutex
	var events []egress.Event
	created := 0
	policy := netpolicy.Policy{Mode: netpolicy.ModeAllowlist}
	if policy.Allow, err = netpolicy.ParseAllowlist(allow); err != nil {
		t.Fatal(err)
	}
	rt := f.runtime(t, func(c *microvm.Config) {
		c.Event = func(e string) {
			if e == "created" {
				mu.Lock()
				created++
				mu.Unlock()
			}
		}
		c.EgressPolicy = func(string) netpolicy.Policy {
			mu.Lock()
			defer mu.Unlock()
			return policy
		}
		c.EgressSecrets = func(string) []egress.Secret {
			return []egress.Secret{{Name: "API_TOKEN", Placeholder: token, Value: value, Hosts: hosts}}
		}
		c.EgressCA = func(string) (*egress.CA, error) { return ca, nil }
		c.EgressRecord = func(string) func(egress.Event) {
			return func(ev egress.Event) {
				mu.Lock()
				events = append(events, ev)
				mu.Unlock()
			}
		}
		c.EgressDial = up.dial
		c.EgressUpstreamRoots = up.roots
	})
	spec := f.office(t, "placeholders")
	spec.Network, spec.NetworkAllow, spec.Placeholders = netpolicy.ModeAllowlist, allow, true
	guestClient(t, spec.OfficeDir)
	env := map[string]string{"API_TOKEN": token}
	sh := func(cmd string) (string, int) {
		t.Helper()
		var out strings.Builder
		res, err := rt.Exec(t.Context(), spec, sandbox.ExecRequest{Argv: []string{cmd}, Env: env, Stdout: &out, Stderr: &out, Timeout: time.Minute})
		if err != nil {
			t.Fatalf("Exec(%s): %v", cmd, err)
		}
		return out.String(), res.ExitCode
	}
	get := func(url string) (string, int) { t.Helper(); return sh("./httpsget " + url) }

	out, code := get("https://" + secretHost + "/v1/me")
	if code != 0 || !strings.HasPrefix(out, "200 OK\nhello from "+secretHost) {
		t.Errorf("the secret's host: exit %d, %q; want 200 and its answer", code, out)
	}
	if got, want := up.requests(), []string{secretHost + ": Bearer " + value}; !slices.Equal(got, want) {
		t.Errorf("the upstream received %q, want %q (the value in place of the placeholder)", got, want)
	}

	out, code = get("https://" + otherHost + "/collect")
	if code != 0 || !strings.HasPrefix(out, "403 Forbidden") || !strings.Contains(out, "secret API_TOKEN refused for "+otherHost+":443") {
		t.Errorf("another listed host: exit %d, %q; want the proxy's 403 naming the secret", code, out)
	}
	if got := up.requests(); len(got) != 1 {
		t.Errorf("the upstream received %q; want the first request alone", got)
	}

	// The guest's processes, the agent (its init) and this command
	// included, hold the placeholder and never the value.
	out, _ = sh(`for f in /proc/[0-9]*/environ; do cat "$f"; done 2>/dev/null | tr '\0' '\n' | grep -e ` + value + ` -e ` + token)
	if strings.Contains(out, value) || !strings.Contains(out, "API_TOKEN="+token) {
		t.Errorf("the guest's environments: %q; want the placeholder and not the value", out)
	}

	mu.Lock()
	got := slices.Clone(events)
	mu.Unlock()
	want := []egress.Event{
		{Secret: "API_TOKEN", Host: secretHost, Port: 443, Kind: egress.KindSubstituted},
		{Secret: "API_TOKEN", Host: otherHost, Port: 443, Kind: egress.KindRefused, Reason: egress.ReasonNotListed},
	}
	for i := range got {
		got[i].Time, got[i].Office = time.Time{}, ""
	}
	if !slices.Equal(got, want) {
		t.Errorf("recorded events %+v, want %+v", got, want)
	}

	// A new allowlist applies to the next connection, in the same VM.
	mu.Lock()
	policy.Allow, _ = netpolicy.ParseAllowlist([]string{secretHost})
	mu.Unlock()
	spec.NetworkAllow = []string{secretHost}
	out, code = get("https://" + otherHost + "/")
	if code != 2 || !strings.Contains(out, "Forbidden") {
		t.Errorf("a host taken off the allowlist: exit %d, %q; want the CONNECT refused", code, out)
	}
	mu.Lock()
	n := created
	mu.Unlock()
	if n != 1 {
		t.Errorf("%d VMs were created; a new allowlist must not re-create the VM", n)
	}
}
