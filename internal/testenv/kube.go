package testenv

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/hutchsandbox/hutch/internal/agentbin"
	"github.com/hutchsandbox/hutch/internal/kubeagent"
)

// DefaultKubeconfig is where hack/kube-up writes the test cluster's
// admin kubeconfig.
const DefaultKubeconfig = "/var/cache/hutch-kube/run/admin.kubeconfig"

// KubeCluster is the test cluster that hack/kube-up runs.
type KubeCluster struct {
	// Kubeconfig is its admin kubeconfig.
	Kubeconfig string
	// Client is a clientset of it.
	Client kubernetes.Interface
	root   string
}

// Kube returns the repo's single-node test cluster (hack/kube-up up):
// HUTCH_TEST_KUBECONFIG, else the script's kubeconfig. When none answers
// the test skips, except in CI, where .ci/run starts one and Kubernetes
// tests must not skip.
func Kube(t testing.TB) KubeCluster {
	t.Helper()
	path := os.Getenv("HUTCH_TEST_KUBECONFIG")
	if path == "" {
		path = DefaultKubeconfig
	}
	fail := func(format string, args ...any) {
		t.Helper()
		if InCI() {
			t.Fatalf(format+" (CI is set, and Kubernetes tests must not skip in CI: hack/kube-up up)", args...)
		}
		t.Skipf(format+" (start the test cluster with hack/kube-up up)", args...)
	}
	if _, err := os.Stat(path); err != nil {
		fail("no test cluster: %v", err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		fail("test cluster kubeconfig %s: %v", path, err)
	}
	cfg.Timeout = 5 * time.Second
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.Discovery().ServerVersion(); err != nil {
		fail("test cluster does not answer: %v", err)
	}
	cfg.Timeout = 0
	if cs, err = kubernetes.NewForConfig(cfg); err != nil {
		t.Fatal(err)
	}
	root, err := ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	return KubeCluster{Kubeconfig: path, Client: cs, root: root}
}

// loaded remembers the images this test process put into the cluster.
var loaded sync.Map // ref -> error

// Load imports an image archive (docker save format) into the cluster's
// node through hack/kube-up load.
func (k KubeCluster) Load(t testing.TB, archive []byte) {
	t.Helper()
	if err := k.load(archive); err != nil {
		t.Fatal(err)
	}
}

func (k KubeCluster) load(archive []byte) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(k.root, "hack", "kube-up"), "load", "-")
	cmd.Stdin = bytes.NewReader(archive)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("hack/kube-up load: %v\n%s", err, out)
	}
	return nil
}

// LoadDockerImage copies an image of the Docker engine into the cluster,
// once per test process.
func (k KubeCluster) LoadDockerImage(t testing.TB, cli *client.Client, ref string) {
	t.Helper()
	k.once(t, "docker:"+ref, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		rc, err := cli.ImageSave(ctx, []string{ref})
		if err != nil {
			return err
		}
		defer func() { _ = rc.Close() }()
		var buf bytes.Buffer
		if _, err := buf.ReadFrom(rc); err != nil {
			return err
		}
		return k.load(buf.Bytes())
	})
}

// AgentImage puts the agent image of the static hutch build the tests
// use (HutchBinary) into the cluster, once per test process, and returns
// the binary and the image's reference.
func (k KubeCluster) AgentImage(t testing.TB) (agentbin.Binary, string) {
	t.Helper()
	bin, err := agentbin.Locate(HutchBinary(t))
	if err != nil {
		t.Fatal(err)
	}
	ref := kubeagent.Ref("", bin)
	k.once(t, "agent:"+ref, func() error {
		var buf bytes.Buffer
		if err := kubeagent.Write(&buf, bin, ref); err != nil {
			return err
		}
		return k.load(buf.Bytes())
	})
	return bin, ref
}

func (k KubeCluster) once(t testing.TB, key string, f func() error) {
	t.Helper()
	v, _ := loaded.LoadOrStore(key, &onceErr{})
	o := v.(*onceErr)
	o.once.Do(func() { o.err = f() })
	if o.err != nil {
		t.Fatalf("load %s into the test cluster: %v", key, o.err)
	}
}

type onceErr struct {
	once sync.Once
	err  error
}
