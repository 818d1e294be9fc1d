package testenv

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
)

// TestTLSUpstream reaches the server from a container with curl, by name
// with --resolve, by alias through the network's DNS and by IP, and
// checks what it answered and recorded. Slow the first time on a
// machine, as TestDebianClientsImage is.
func TestTLSUpstream(t *testing.T) {
	t.Parallel()
	cli := Docker(t)
	label := "org.hutchsandbox.test=" + Name(t)
	CleanupContainers(t, cli, label)
	key, value, _ := strings.Cut(label, "=")
	net := Name(t)
	if _, err := cli.NetworkCreate(context.Background(), net, client.NetworkCreateOptions{
		Driver: "bridge",
		Labels: map[string]string{key: value},
	}); err != nil {
		t.Fatal(err)
	}
	base := debianBase(t)
	srv := TLSUpstream(t, cli, base, net, "api.test", "other.test")
	if !srv.Roots.Equal(poolOf(t, srv.CAPEM)) {
		t.Error("Roots does not trust CAPEM alone")
	}

	script := `set -e
printf %s "$CA" >/tmp/ca.pem
curl -sS --fail --cacert /tmp/ca.pem --resolve "api.test:443:$IP" -H 'X-Test: one' -H 'X-Test: two' --data-binary 'hello {"x":1}' 'https://api.test/v1/things?a=1&b=%20'
curl -sS --fail --cacert /tmp/ca.pem https://other.test/by-alias
curl -sS --fail --cacert /tmp/ca.pem -X DELETE "https://$IP/by-ip"
# Another CA's certificate is refused.
if curl -sS -o /dev/null https://other.test/untrusted 2>/dev/null; then echo trusted the system roots; exit 1; fi
`
	out, errOut, code := runContainer(t, cli, client.ContainerCreateOptions{
		Config: &container.Config{
			Image:  DebianClientsImage(t, cli, base),
			Cmd:    []string{"sh", "-c", script},
			Env:    []string{"CA=" + string(srv.CAPEM), "IP=" + srv.IP},
			Labels: map[string]string{key: value},
		},
		HostConfig: &container.HostConfig{NetworkMode: container.NetworkMode(net)},
	})
	if code != 0 {
		t.Fatalf("curl: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var answered []RecordedRequest
	for _, l := range lines {
		var r RecordedRequest
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("answer %q: %v", l, err)
		}
		answered = append(answered, r)
	}

	got := srv.Requests()
	if diff := cmp.Diff(answered, got); diff != "" {
		t.Errorf("Requests() differs from the answers (-answered +recorded):\n%s", diff)
	}
	if len(got) != 3 {
		t.Fatalf("Requests() = %d requests, want 3: %+v", len(got), got)
	}
	first := got[0]
	for _, c := range []struct{ what, got, want string }{
		{"method", first.Method, "POST"},
		{"path", first.Path, "/v1/things"},
		{"query", first.Query, "a=1&b=%20"},
		{"body", first.Body, `hello {"x":1}`},
		{"SNI", first.SNI, "api.test"},
		{"Host", first.Header.Get("Host"), "api.test"},
		{"Content-Type", first.Header.Get("Content-Type"), "application/x-www-form-urlencoded"},
		{"X-Test", strings.Join(first.Header.Values("X-Test"), ","), "one,two"},
		{"alias SNI", got[1].SNI, "other.test"},
		{"alias path", got[1].Path, "/by-alias"},
		{"IP method", got[2].Method, "DELETE"},
		{"IP SNI", got[2].SNI, ""},
		{"IP Host", got[2].Header.Get("Host"), srv.IP},
	} {
		if c.got != c.want {
			t.Errorf("%s = %q, want %q", c.what, c.got, c.want)
		}
	}
	if first.Remote == "" || first.Remote == srv.IP {
		t.Errorf("Remote = %q, want the client's address", first.Remote)
	}
}

// TestTLSUpstream_DefaultBridge starts the server on the engine's default
// network, where it has no aliases, and reaches it there.
func TestTLSUpstream_DefaultBridge(t *testing.T) {
	t.Parallel()
	cli := Docker(t)
	label := "org.hutchsandbox.test=" + Name(t)
	CleanupContainers(t, cli, label)
	base := debianBase(t)
	srv := TLSUpstream(t, cli, base, "", "api.test")
	key, value, _ := strings.Cut(label, "=")
	out, errOut, code := runContainer(t, cli, client.ContainerCreateOptions{
		Config: &container.Config{
			Image:  DebianClientsImage(t, cli, base),
			Cmd:    []string{"sh", "-c", `printf %s "$CA" >/tmp/ca.pem && curl -sS --fail --cacert /tmp/ca.pem --resolve "api.test:443:$IP" https://api.test/bridge`},
			Env:    []string{"CA=" + string(srv.CAPEM), "IP=" + srv.IP},
			Labels: map[string]string{key: value},
		},
		HostConfig: &container.HostConfig{},
	})
	if code != 0 {
		t.Fatalf("curl: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if got := srv.Requests(); len(got) != 1 || got[0].Path != "/bridge" || got[0].SNI != "api.test" {
		t.Errorf("Requests() = %+v, want one GET /bridge for api.test", got)
	}
}

func poolOf(t *testing.T, pemCerts []byte) *x509.CertPool {
	t.Helper()
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM(pemCerts) {
		t.Fatalf("no certificate in %q", pemCerts)
	}
	return p
}
