package box_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/project"
	"github.com/hutchsandbox/hutch/internal/project/box"
	"github.com/hutchsandbox/hutch/internal/testenv"
)

// TestEgress_ProjectAllowlist: under sandbox-network allowlist the
// project container has no route but hutch's egress proxy: a listed host
// answers through it, an unlisted one gets a 403, and every way around it
// (no proxy with a forced address, raw TCP, UDP, DNS, IPv6, a route of
// its own) fails. The policy is read from the settings file per
// connection, a typo in it keeps the last one, a CLI process on the warm
// path pumps too, and a container made with a network of its own is
// refused once the settings ask for allowlist.
func TestEgress_ProjectAllowlist(t *testing.T) {
	t.Parallel()
	slow(t)
	f := newFixture(t, nil)
	img := testenv.DebianClientsImage(t, f.cli, f.debianBase)
	up := testenv.TLSUpstream(t, f.cli, f.debianBase, "", "api.test")
	ip := up.IP
	settings := func(network, allow string) map[string]any {
		return map[string]any{project.KeyImage: img, project.KeyUser: "root", project.KeyNetwork: network, project.KeyNetworkAllow: allow}
	}
	f.writeSettings(t, settings("allowlist", "api.test, "+ip+":443"))
	// The upstream's CA, for curl inside: the proxy splices TLS as it is.
	if err := os.WriteFile(filepath.Join(f.project, "ca.pem"), up.CAPEM, 0o644); err != nil {
		t.Fatal(err)
	}

	b := f.box(t)
	t.Cleanup(b.Close)
	box.SetEgressDial(b, func(ctx context.Context, network, addr string) (net.Conn, error) {
		// api.test leads to the upstream; the real dialer would refuse
		// its private address anyway.
		_, port, _ := net.SplitHostPort(addr)
		var d net.Dialer
		return d.DialContext(ctx, network, net.JoinHostPort(ip, port))
	})
	tg, err := b.Up(context.Background())
	if err != nil {
		t.Fatalf("Up: %v", err)
	}
	t.Cleanup(func() { _ = tg.Agent().Close() })
	sh := func(cmd string) (string, int) {
		t.Helper()
		out, errOut, code := run(t, tg, "", "sh", "-c", cmd)
		return out + errOut, code
	}
	curl := "curl -sS --max-time 20 --cacert ca.pem "
	status := curl + "-o /dev/null -w '%{http_code}' "

	if out, code := sh(status + "https://api.test/listed"); code != 0 || out != "200" {
		t.Errorf("a listed host through the proxy: exit %d, %q", code, out)
	}
	if out, code := sh(curl + "https://other.test/unlisted"); code == 0 || !strings.Contains(out, "403") {
		t.Errorf("an unlisted host: exit %d, %q; want a 403 from the proxy", code, out)
	}
	bypasses := map[string]string{
		"no_proxy":   "curl -sS --max-time 5 --noproxy '*' --cacert ca.pem --resolve api.test:443:" + ip + " https://api.test/bypass",
		"raw_tcp":    "nc -z -w 3 " + ip + " 443",
		"udp":        "echo x | nc -u -w 1 " + ip + " 53 && ip route get " + ip,
		"dns":        "dig +time=2 +tries=1 @1.1.1.1 example.com",
		"ipv6":       "curl -sS --max-time 5 -6 --noproxy '*' 'http://[2606:4700:4700::1111]/'",
		"host_route": "ip route | grep -q default || ip -6 route | grep -q default || exit 7; exit 0",
	}
	for name, cmd := range bypasses {
		if out, code := sh(cmd); code == 0 {
			t.Errorf("bypass %s succeeded: %q", name, out)
		}
	}
	received := func() string {
		var paths []string
		for _, r := range up.Requests() {
			paths = append(paths, r.Path)
		}
		return strings.Join(paths, " ")
	}
	if got := received(); strings.Contains(got, "/unlisted") || strings.Contains(got, "/bypass") || !strings.Contains(got, "/listed") {
		t.Errorf("the upstream received %q; want /listed and nothing that should not have left", got)
	}
	id := f.inspect(t, f.name).Container.ID
	if nm := f.inspect(t, f.name).Container.HostConfig.NetworkMode; nm != "none" {
		t.Errorf("network mode %q, want none", nm)
	}

	// The settings file is read per connection: a host taken off the
	// list is refused at once, none refuses everything, and a typo keeps
	// the policy in force rather than opening up.
	f.writeSettings(t, settings("allowlist", "example.org"))
	if out, code := sh(curl + "https://api.test/delisted"); code == 0 || !strings.Contains(out, "403") {
		t.Errorf("a host taken off the list: exit %d, %q", code, out)
	}
	f.writeSettings(t, map[string]any{project.KeyImage: img, project.KeyUser: "root", project.KeyNetwork: "allowlst", project.KeyNetworkAllow: "api.test"})
	if out, code := sh(curl + "https://api.test/typo"); code == 0 || !strings.Contains(out, "403") {
		t.Errorf("after a typo in sandbox-network: exit %d, %q; want the last policy's 403", code, out)
	}
	f.writeSettings(t, settings("none", "api.test"))
	// Plain HTTP, so that the proxy's refusal reaches curl's output.
	if out, _ := sh("curl -sS --max-time 20 -w ' %{http_code}' http://api.test/none"); !strings.Contains(out, "is refused: sandbox.network is none") || !strings.HasSuffix(out, " 403") {
		t.Errorf("under none: %q", out)
	}
	f.writeSettings(t, settings("allowlist", "api.test, "+ip+":443"))
	if out, code := sh(status + "https://api.test/again"); code != 0 || out != "200" {
		t.Errorf("listed again: exit %d, %q", code, out)
	}
	if got := received(); strings.Contains(got, "/delisted") || strings.Contains(got, "/typo") || strings.Contains(got, "/none") {
		t.Errorf("the upstream received %q", got)
	}
	if f.inspect(t, f.name).Container.ID != id {
		t.Error("a changed policy re-created the container")
	}

	// Status names the policy.
	if out, _ := f.mustHutch(t, "status"); !strings.Contains(out, "Network    allowlist (api.test, "+ip+":443)") {
		t.Errorf("status lacks the network line:\n%s", out)
	}

	// A CLI process on the warm path pumps through a proxy of its own
	// (the real dialer: the listed address is reached, the unlisted name
	// refused before any lookup).
	_ = tg.Agent().Close()
	b.Close()
	if out, errOut, code := f.hutch(t, "exec", "--", status+"https://"+ip+"/cli"); code != 0 || out != "200" {
		t.Errorf("through the CLI's proxy: exit %d, %q, %s", code, out, errOut)
	}
	if out, errOut, code := f.hutch(t, "exec", "--", curl+"https://other.test/cli-unlisted"); code == 0 || !strings.Contains(out+errOut, "403") {
		t.Errorf("an unlisted host through the CLI's proxy: exit %d, %q, %s", code, out, errOut)
	}

	// Open again: a rebuild gives the container a network of its own.
	// Asking for allowlist then refuses it, on the warm path too, until
	// a rebuild takes it away.
	f.writeSettings(t, settings("open", ""))
	ob := f.box(t)
	t.Cleanup(ob.Close)
	otg, err := ob.Rebuild(context.Background())
	if err != nil {
		t.Fatalf("Rebuild under open: %v", err)
	}
	_ = otg.Agent().Close()
	if nm := f.inspect(t, f.name).Container.HostConfig.NetworkMode; nm == "none" {
		t.Fatalf("network mode %q under open", nm)
	}
	f.writeSettings(t, settings("allowlist", "api.test"))
	pb := f.box(t)
	t.Cleanup(pb.Close)
	if ptg, err := pb.Up(context.Background()); err == nil {
		_ = ptg.Agent().Close()
		t.Error("Up under allowlist took a container with a network of its own")
	} else if !errdefs.IsFailedPrecondition(err) || !strings.Contains(err.Error(), "hutch project rebuild") {
		t.Errorf("Up under allowlist, on an open container: %v", err)
	}
	if ptg := pb.Attach(context.Background()); ptg != nil {
		_ = ptg.Agent().Close()
		t.Error("the warm path took a container with a network of its own")
	}
	if _, errOut, code := f.hutch(t, "exec", "--", "true"); code == 0 || !strings.Contains(errOut, "network of its own") {
		t.Errorf("hutch project exec on an open container under allowlist: exit %d, %s", code, errOut)
	}
	if out, _ := f.mustHutch(t, "status"); !strings.Contains(out, "network of its own") {
		t.Errorf("status does not say the container must be rebuilt:\n%s", out)
	}
	ptg, err := pb.Rebuild(context.Background())
	if err != nil {
		t.Fatalf("Rebuild under allowlist: %v", err)
	}
	_ = ptg.Agent().Close()
	if nm := f.inspect(t, f.name).Container.HostConfig.NetworkMode; nm != "none" {
		t.Errorf("network mode %q after the rebuild, want none", nm)
	}
}
