// Command kube measures the kube:<image> mode against image mode on the
// same busybox test image, side by side in one run:
//
//	go run ./bench/kube [-starts 5] [-n 100] [-writes 10] [-kubeconfig FILE]
//
// The cluster is the repo's single-node test cluster (hack/kube-up up),
// whose node is this machine: both modes run their container under the
// same kernel, kube through containerd and the kubelet, image through the
// Docker engine. It makes one office per mode (same limits: 1 CPU,
// 512 MiB), runs a first command in each (the pod, and the container and
// its network, are made then; that one-off time is printed, not compared)
// and then measures three comparisons, each as kube beside image, the
// paths interleaved round by round:
//
//  1. Cold start to first command (-starts rounds). Untimed before each
//     round, Runtime.Stop: for kube it deletes the pod (a pod cannot be
//     stopped and started again), and the bench then polls the API server
//     for the pod's name until it answers NotFound, so that the timed part
//     never waits out a graceful deletion; for image it stops the
//     container (it and its network stay). Timed: Runtime.Exec of `true`
//     until it returns. For kube that is creating the pod through the API
//     server, the scheduler binding it, the kubelet making its sandbox and
//     running the init container that installs the agent, then the main
//     container, hutch watching the pod until it runs, opening the exec
//     stream to `hutch agent --stdio`, the agent's ping, and `true`; for
//     image it is starting the stopped container, waiting for its agent,
//     and `true`. A diagnostic row does the same after Runtime.Remove:
//     for kube that is Stop again (a deleted pod is all there is to
//     remove); for image the container and its network are removed, so
//     the timed command also creates them, which is the work kube always
//     does. Each round checks that the runtime reported a start (kube's
//     "created", image's "started"), so a row can never silently measure a
//     warm command.
//  2. Warm exec (-n rounds, after 5 warm-up rounds): Runtime.Exec of
//     `true` in the running pod and in the running container. A
//     diagnostic row runs `true` on the agent client directly
//     (Runtime.Agent once, then agent.Client.Exec), which leaves out each
//     mode's check that its runtime is up to date (kube reads the pod from
//     the API server; image mode asks the engine twice).
//  3. 16 MiB file write (-writes rounds, after 2 warm-up rounds): 16 MiB
//     of random bytes written into the office through the agent's file
//     API, Runtime.Agent then agent.Client.WriteFile (the agent stages,
//     fsyncs and renames); for kube the bytes travel the exec stream and
//     the office is a hostPath volume mounted with subPath, for image the
//     agent's unix socket and a bind mount. A diagnostic row writes 16 MiB
//     of zeros by a command, `head -c 16777216 /dev/zero > f` in the office
//     through Runtime.Exec, so that only the command crosses the stream.
//     The file is removed on the host, untimed, after each write; one
//     write of each kind is checked on the host first.
//
// Each table shows p50 and p90 (nearest rank) per mode and their ratio
// kube/image. These machines are noisy, so the claim is the ratio of
// paths measured in the same run, never a bare time; nothing is asserted.
// The header names the Kubernetes version and the node: on the test
// cluster every hop of the exec stream (hutch to the API server, the API
// server to the kubelet, the kubelet to containerd) is on loopback, so the
// kube rows pay for those hops' TLS, HTTP and WebSocket framing, but not
// for a network between machines.
//
// It needs the test cluster (hack/kube-up up; -kubeconfig, default its
// admin kubeconfig /var/cache/hutch-kube/run/admin.kubeconfig when that
// exists, else KUBECONFIG), root to load images into the node
// (hack/kube-up load) and a Docker engine (hack/docker-up starts one when
// /var/run/docker.sock does not answer). The image hutch-test-busybox:1 is
// built by `go test -run TestBusyboxImage ./internal/testenv` when
// missing, and copied from Docker into the node's containerd (docker save
// format, through hack/kube-up load); the agent is a static hutch built
// from this module, and its agent image (internal/kubeagent) goes the
// same way. The pods live in a namespace of their own,
// hutch-bench-<random>. The pod and the namespace are deleted, the
// container removed with its network, and the temp dirs deleted at the
// end and on Ctrl-C. Tables go to stdout, progress and the runtimes'
// warnings to stderr.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/hutchsandbox/hutch/bench/benchkit"
	"github.com/hutchsandbox/hutch/internal/agentbin"
	"github.com/hutchsandbox/hutch/internal/engine"
	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/kubeagent"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/sandbox/kube"
)

const (
	// testKubeconfig is where hack/kube-up writes the test cluster's
	// admin kubeconfig (internal/testenv.DefaultKubeconfig).
	testKubeconfig = "/var/cache/hutch-kube/run/admin.kubeconfig"
	// goneTimeout bounds the untimed wait for a deleted pod to go (its
	// grace period is 5 s).
	goneTimeout = 2 * time.Minute
)

// limits are both offices' limits. Given explicitly because the defaults
// (0.5 CPU, 1 GiB) would be the same in both, but a bench should say what
// it ran with; pids are left to each mode (kube has no per-pod pid cap).
var limits = sandbox.Limits{CPUs: 1, MemoryBytes: 512 << 20}

var progress = benchkit.Progress("bench/kube")

func main() {
	starts := flag.Int("starts", 5, "cold start rounds (each deletes and makes the pod, stops and starts the container)")
	n := flag.Int("n", 100, "warm exec rounds")
	writes := flag.Int("writes", 10, "16 MiB write rounds")
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the cluster (default: "+testKubeconfig+" when it exists, else KUBECONFIG)")
	flag.Parse()
	if *starts < 1 || *n < 1 || *writes < 1 {
		fmt.Fprintln(os.Stderr, "bench/kube: -starts, -n and -writes must be at least 1")
		os.Exit(2)
	}
	if *kubeconfig == "" {
		// Else empty: kube.Connect then reads KUBECONFIG (or
		// ~/.kube/config), as hutch itself would.
		if _, err := os.Stat(testKubeconfig); err == nil {
			*kubeconfig = testKubeconfig
		}
	}
	benchkit.Main("bench/kube", "interrupted: cleaning up (interrupt again to quit at once, leaving the namespace and the container behind)", func(ctx context.Context) error {
		return run(ctx, opts{starts: *starts, n: *n, writes: *writes, kubeconfig: *kubeconfig})
	})
}

type opts struct {
	starts, n, writes int
	kubeconfig        string
}

func run(ctx context.Context, o opts) error {
	eng, err := benchkit.BusyboxEngine(ctx, progress)
	if err != nil {
		return err
	}
	defer func() { _ = eng.Close() }()

	// Connect only reads the kubeconfig; the version is the first
	// request, bounded so that a cluster that is down fails the bench
	// before anything is built.
	ns := "hutch-bench-" + benchkit.RandomHex(4)
	cluster, err := kube.Connect(o.kubeconfig, ns)
	if err != nil {
		return err
	}
	quick, err := cluster.WithTimeout(10 * time.Second)
	if err != nil {
		return err
	}
	// The bench reads and deletes what kube mode does not (nodes, its
	// namespace), so it has a clientset of its own.
	quickCS, err := kubernetes.NewForConfig(quick.Config)
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cluster.Config)
	if err != nil {
		return err
	}
	version, err := quickCS.Discovery().ServerVersion()
	if err != nil {
		return fmt.Errorf("the Kubernetes API server at %s (%s) does not answer (hack/kube-up up starts the test cluster): %w", cluster.Config.Host, cluster.Source, err)
	}
	node, err := describeNode(ctx, quickCS)
	if err != nil {
		return err
	}

	sc, err := benchkit.NewScratch(ctx, "kube", progress)
	if err != nil {
		return err
	}
	defer sc.Close()
	agentRef := kubeagent.Ref("", sc.Agent)
	progress("loading %s into the node (docker save | hack/kube-up load -)", benchkit.BusyboxRef)
	if err := loadDockerImage(ctx, eng, benchkit.BusyboxRef); err != nil {
		return err
	}
	progress("loading the agent image %s into the node (hack/kube-up load -)", agentRef)
	if err := loadAgentImage(ctx, sc.Agent, agentRef); err != nil {
		return err
	}

	progress("creating namespace %s", ns)
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create namespace %s: %w", ns, err)
	}
	defer deleteNamespace(cs, ns)

	// kube reports "created" for every pod it makes (a pod is never
	// started again); the cold start rows only ask whether the count moved.
	kb := &benchkit.Mode{Name: "kube", StartEvents: []string{"created"}}
	kubeRt, err := kube.New(kube.Config{
		Cluster: cluster, Image: benchkit.BusyboxRef,
		// The workspace is a hostPath on the node, which is this
		// machine: the pod sees the very directory the container
		// bind-mounts.
		StateDir: filepath.Join(sc.Dir, "state-kube"), Workspace: sc.Workspace,
		AgentImage: agentRef, Agent: sc.Agent, Log: sc.Log, Event: kb.Event,
	})
	if err != nil {
		return err
	}
	defer kubeRt.Close()
	kb.Runtime = kubeRt

	tag := benchkit.RandomHex(4)
	if kb.Spec, err = sc.Office("bench-kube-kube-"+tag, limits); err != nil {
		return err
	}
	kb.Stop = func(ctx context.Context) error {
		if err := kubeRt.Stop(ctx, kb.Spec.OfficeKey); err != nil {
			return err
		}
		return waitPodGone(ctx, cs.CoreV1().Pods(ns), kube.PodName(kb.Spec.OfficeKey))
	}
	kb.Remove = func(ctx context.Context) error {
		if err := kubeRt.Remove(ctx, kb.Spec.OfficeKey); err != nil {
			return err
		}
		return waitPodGone(ctx, cs.CoreV1().Pods(ns), kube.PodName(kb.Spec.OfficeKey))
	}

	img, removeImg, err := sc.ImageMode(eng, "bench-kube-image-"+tag, limits)
	if err != nil {
		return err
	}
	// Removed whatever happened: the container and its network, and the
	// pod (waited for, so that the workspace it mounts is not deleted
	// under it); the namespace goes after, by the deferred call above.
	defer func() {
		removeImg()
		cctx, ccancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer ccancel()
		progress("cleanup: deleting the pod")
		if err := kb.Remove(cctx); err != nil && !errdefs.IsNotFound(err) {
			progress("cleanup: kube Remove: %v", err)
		}
	}()

	v := benchkit.Versus{Subject: kb, Base: img, Progress: progress}
	if err := v.FirstCommands(ctx); err != nil {
		return err
	}
	startTbl, err := measureStarts(ctx, o.starts, v)
	if err != nil {
		return err
	}
	execTbl, err := v.Exec(ctx, o.n, "2. Warm exec: `true` in a running pod / container", []string{
		"Runtime.Exec: what a service call does (kube: one GET of the pod from the API server; image: two engine GETs), then the agent runs `true`.",
		"diag agent client: agent.Client.Exec on the client Runtime.Agent returned once: the agent's own round trip",
		"                   (kube: over the exec stream through API server and kubelet; image: the agent's unix socket).",
	})
	if err != nil {
		return err
	}
	writeTbl, err := v.Writes(ctx, o.writes, "3. 16 MiB file write into the office", "diag: command `head -c … > f`", []string{
		"agent file API: Runtime.Agent + agent.Client.WriteFile of 16 MiB random bytes (staged, fsynced, renamed by the agent);",
		"                kube's bytes cross the exec stream (API server, kubelet), image's the agent's unix socket.",
		"diag command: Runtime.Exec `" + benchkit.WriteCommand + "` in the office (no fsync): only the command crosses.",
		"kube's office is a hostPath volume mounted with subPath, image's a bind mount, of the same directory tree. The file is removed on the host after each run, untimed.",
	})
	if err != nil {
		return err
	}

	benchkit.Header{Bench: "bench/kube", Engine: eng, Detail: true}.Print(os.Stdout)
	fmt.Printf("kubernetes %s (API server %s) · %s · agent sha256 %s\n", version.GitVersion, cluster.Config.Host, node, sc.Agent.SHA256[:16])
	fmt.Println("the kube exec stream runs hutch → API server → kubelet → containerd, every hop on loopback on this machine (no network between machines)")
	fmt.Printf("both offices: %g CPU, %d MiB; image %s; percentiles nearest-rank; ratio = kube / image\n",
		limits.CPUs, limits.MemoryBytes>>20, benchkit.BusyboxRef)
	fmt.Printf("first command of a new office (once each, not compared): kube %s (pod created, agent installed by the init container, started, exec stream opened) · image %s (agent staged earlier; network and container created, started)\n",
		benchkit.Ms(kb.First), benchkit.Ms(img.First))
	startTbl.Print(os.Stdout)
	execTbl.Print(os.Stdout)
	writeTbl.Print(os.Stdout)
	return nil
}

// describeNode names the cluster's node and what it runs, for the header;
// the bench expects one (the test cluster's).
func describeNode(ctx context.Context, cs kubernetes.Interface) (string, error) {
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", fmt.Errorf("list nodes: %w", err)
	}
	if len(nodes.Items) == 0 {
		return "", errors.New("the cluster has no node")
	}
	var out []string
	for _, n := range nodes.Items {
		cpu := n.Status.Capacity[corev1.ResourceCPU]
		out = append(out, fmt.Sprintf("node %s: kubelet %s, %s, %s CPUs", n.Name, n.Status.NodeInfo.KubeletVersion, n.Status.NodeInfo.ContainerRuntimeVersion, cpu.String()))
	}
	return strings.Join(out, "; "), nil
}

// loadDockerImage copies ref from the Docker engine into the node's
// containerd, as internal/testenv does for the kube tests: the cluster
// has no registry, and pods find the image there (IfNotPresent).
func loadDockerImage(ctx context.Context, eng *engine.Engine, ref string) error {
	rc, err := eng.Client.ImageSave(ctx, []string{ref})
	if err != nil {
		return fmt.Errorf("docker save %s: %w", ref, err)
	}
	defer func() { _ = rc.Close() }()
	return kubeLoad(ctx, rc)
}

// loadAgentImage writes the agent image of bin and imports it into the
// node's containerd.
func loadAgentImage(ctx context.Context, bin agentbin.Binary, ref string) error {
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(kubeagent.Write(pw, bin, ref)) }()
	defer func() { _ = pr.Close() }()
	return kubeLoad(ctx, pr)
}

// kubeLoad feeds an image archive (docker save format) to hack/kube-up
// load on stdin.
func kubeLoad(ctx context.Context, archive io.Reader) error {
	root, err := os.Getwd()
	if err != nil {
		return err
	}
	// The script sits at the module root; go run runs in the module.
	for {
		if _, err := os.Stat(filepath.Join(root, "hack", "kube-up")); err == nil {
			break
		}
		parent := filepath.Dir(root)
		if parent == root {
			return errors.New("hack/kube-up not found above the working directory: run the bench inside the hutch module")
		}
		root = parent
	}
	cmd := exec.CommandContext(ctx, filepath.Join(root, "hack", "kube-up"), "load", "-")
	cmd.Stdin = archive
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("hack/kube-up load: %v\n%s", err, out)
	}
	return nil
}

// waitPodGone polls the API server until it answers NotFound for the pod:
// Stop deletes gracefully, and a cold start must not be timed while the
// old pod still terminates.
func waitPodGone(ctx context.Context, pods corev1client.PodInterface, name string) error {
	ctx, cancel := context.WithTimeout(ctx, goneTimeout)
	defer cancel()
	for {
		_, err := pods.Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return nil
		case err != nil && ctx.Err() == nil:
			return fmt.Errorf("pod %s: %w", name, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("pod %s is still there after %s: %w", name, goneTimeout, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// deleteNamespace deletes the bench's namespace and waits (bounded) until
// it is gone, so that a finished run leaves nothing in the cluster.
func deleteNamespace(cs kubernetes.Interface, ns string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	progress("cleanup: deleting namespace %s", ns)
	nss := cs.CoreV1().Namespaces()
	if err := nss.Delete(ctx, ns, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		progress("cleanup: delete namespace %s: %v", ns, err)
		return
	}
	for {
		if _, err := nss.Get(ctx, ns, metav1.GetOptions{}); apierrors.IsNotFound(err) {
			return
		}
		select {
		case <-ctx.Done():
			progress("cleanup: namespace %s is still terminating; the cluster finishes on its own", ns)
			return
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func measureStarts(ctx context.Context, rounds int, v benchkit.Versus) (*benchkit.Comparison, error) {
	started := func(m *benchkit.Mode, name string, down func(context.Context) error) *benchkit.Series {
		return m.ColdStart(ctx, name, down, "started")
	}
	kb, img := v.Subject, v.Base
	c := v.Comparison("1. Cold start to first command: Runtime.Exec `true` with nothing running", rounds, 0, []string{
		"stopped: kube: Stop deleted the pod, gone before the clock starts; timed: pod created, scheduled, init container installs the agent,",
		"         sandbox container started, pod seen running, exec stream opened, agent pinged, `true`.",
		"         image: Stop stopped the container; timed: container start, agent answers, `true`.",
		"removed: kube: Remove is Stop (a deleted pod is all there is); timed: as stopped.",
		"         image: Remove deleted container and network; timed: network + container created, started, agent answers, `true`.",
	})
	c.Rows = []benchkit.Row{
		{Name: "stopped → first `true`", Subject: started(kb, "new pod", kb.Stop), Base: started(img, "start", img.Stop)},
		{Name: "diag: removed → first `true`", Subject: started(kb, "new pod after Remove", kb.Remove), Base: started(img, "create + start", img.Remove)},
	}
	return c, v.Measure(ctx, c, "cold start to first command")
}
