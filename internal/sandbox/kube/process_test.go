package kube_test

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hutchsandbox/hutch/internal/agent"
	"github.com/hutchsandbox/hutch/internal/daemon"
	"github.com/hutchsandbox/hutch/internal/settings"
	"github.com/hutchsandbox/hutch/internal/testenv"
)

// TestServe runs the real binary: `hutch serve --sandbox kube:<image>`
// with the cluster and namespace from settings, a conversation with a
// vault env and a vault file, its command through the daemon, the pod
// listed by `hutch sandbox ls`, and a second daemon adopting the pod
// the first left (pods outlive the process that made them).
func TestServe(t *testing.T) {
	f := newFixture(t)
	bin := testenv.HutchBinary(t)
	run, err := os.MkdirTemp("", "hk")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = agent.RemoveSocketDir(run) }) // sealed socket dirs included
	for k, v := range map[string]string{"sandbox.kube.kubeconfig": f.cluster.Kubeconfig, "sandbox.kube.namespace": f.namespace, "sandbox.cpus": "0.2", "sandbox.memory": "128m"} {
		if err := settings.SetRuntime(settings.GlobalPath(f.state), k, v); err != nil {
			t.Fatal(err)
		}
	}
	mode := "kube:" + f.img
	env := append(os.Environ(), "HUTCH_STATE_DIR="+f.state, "HUTCH_WORKSPACE="+f.ws, "HUTCH_RUN_DIR="+run, "HUTCH_SANDBOX="+mode)
	hutch := func(stdin string, args ...string) string {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Env = env
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("hutch %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	serve := func() *exec.Cmd {
		t.Helper()
		return testenv.Serve(t, bin, daemon.SocketPath(f.state), env, "--sandbox", mode)
	}

	envValue, fileValue := secret(t), secret(t)
	src := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(src, []byte(fileValue), 0o600); err != nil {
		t.Fatal(err)
	}
	hutch(envValue+"\n", "vault", "set", "web/e2e", "API_TOKEN")
	hutch("", "vault", "put-file", "web/e2e", ".token", src)

	first := serve()
	out := hutch("", "exec", "--conversation", "web/e2e", "--", `echo "env=$API_TOKEN"; cat /root/.token; echo; stat -c %a /root/.token`)
	if !strings.Contains(out, "env="+envValue+"\n"+fileValue+"\n600\n") {
		t.Errorf("hutch exec in kube mode:\n%s", out)
	}
	if ls := hutch("", "sandbox", "ls"); !strings.Contains(ls, "running") {
		t.Errorf("hutch sandbox ls:\n%s", ls)
	}
	pods, err := f.cluster.Client.CoreV1().Pods(f.namespace).List(context.Background(), metav1.ListOptions{})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("pods after a command: %d, %v", len(pods.Items), err)
	}
	uid := pods.Items[0].UID
	portalShowsUse(t, env, bin)
	if err := first.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if _, err := first.Process.Wait(); err != nil {
		t.Fatal(err)
	}

	serve()
	if out := hutch("", "exec", "--conversation", "web/e2e", "--", "echo again"); !strings.Contains(out, "again") {
		t.Errorf("after a restart: %q", out)
	}
	pods, err = f.cluster.Client.CoreV1().Pods(f.namespace).List(context.Background(), metav1.ListOptions{})
	if err != nil || len(pods.Items) != 1 || pods.Items[0].UID != uid {
		t.Errorf("the second daemon did not adopt the pod: %v", err)
	}
}

// portalShowsUse signs in to the running daemon's admin portal through a
// link and reads its usage table: the pod's use, read by its agent, with
// the memory limit the settings gave.
func portalShowsUse(t *testing.T, env []string, bin string) {
	t.Helper()
	cmd := exec.Command(bin, "admin", "link")
	cmd.Env = env
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("hutch admin link: %v", err)
	}
	link, err := url.Parse(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatal(err)
	}
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Timeout: 30 * time.Second}
	resp, err := c.PostForm(link.Scheme+"://"+link.Host+"/admin/login", url.Values{"token": {link.Query().Get("token")}})
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("signing in: %d", resp.StatusCode)
	}
	resp, err = c.Get(link.Scheme + "://" + link.Host + "/admin/usage")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	row := regexp.MustCompile(`(?s)web/e2e</a></th>\s*<td class="num">([0-9.]+) % <span class="muted">of 0.2 CPUs \(its limit\)</span></td>\s*<td class="num">[0-9.]+ [KM]iB / 128 MiB</td>\s*<td class="num">[1-9][0-9]*</td>`)
	if resp.StatusCode != http.StatusOK || !row.Match(body) {
		t.Errorf("the portal's usage table in kube mode: %d\n%s", resp.StatusCode, body)
	}
}
