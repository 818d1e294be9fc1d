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
//     does. Each round checks that the runtime reported a start ("created"
//     or "started"), so a row can never silently measure a warm command.
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
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hutchsandbox/hutch/bench/benchkit"
	"github.com/hutchsandbox/hutch/internal/agent"
	"github.com/hutchsandbox/hutch/internal/agentbin"
	"github.com/hutchsandbox/hutch/internal/engine"
	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/kubeagent"
	"github.com/hutchsandbox/hutch/internal/office"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/sandbox/image"
	"github.com/hutchsandbox/hutch/internal/sandbox/kube"
)

const (
	// fileSize is the size of the written file: large enough that the
	// path's throughput, not a round trip, decides the time.
	fileSize = 16 << 20
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
	ctx, cancel := benchkit.Interruptible(progress, "interrupted: cleaning up (interrupt again to quit at once, leaving the namespace and the container behind)")
	defer cancel()
	if err := run(ctx, opts{starts: *starts, n: *n, writes: *writes, kubeconfig: *kubeconfig}); err != nil {
		fmt.Fprintln(os.Stderr, "bench/kube:", err)
		if ctx.Err() != nil {
			os.Exit(130)
		}
		os.Exit(1)
	}
}

type opts struct {
	starts, n, writes int
	kubeconfig        string
}

// mode is one side of every comparison: a runtime, its office, how it is
// brought to nothing running, and how many starts it has reported (the
// cold start rows check that one happened).
type mode struct {
	name   string
	rt     sandbox.Runtime
	agent  func(context.Context, sandbox.Spec) (*agent.Client, error)
	spec   sandbox.Spec
	stop   func(context.Context) error // untimed: nothing runs afterwards
	remove func(context.Context) error // untimed: nothing is left afterwards
	starts atomic.Int64
	first  time.Duration // the office's first command, the one that made it
}

// event counts the runtimes' starts: kube reports "created" for every
// pod it makes, image "started" for every container start ("created"
// before it, for a new container). The cold start rows only ask whether
// the count moved.
func (m *mode) event(e string) {
	if e == "created" || e == "started" {
		m.starts.Add(1)
	}
}

func run(ctx context.Context, o opts) error {
	eng, err := engine.Connect(ctx)
	if err != nil {
		return fmt.Errorf("no container engine answers (hack/docker-up starts Docker): %w", err)
	}
	defer eng.Close()
	if err := benchkit.EnsureImage(ctx, eng.Client, benchkit.BusyboxRef, progress); err != nil {
		return err
	}

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
	version, err := quick.Client.Discovery().ServerVersion()
	if err != nil {
		return fmt.Errorf("the Kubernetes API server at %s (%s) does not answer (hack/kube-up up starts the test cluster): %w", cluster.Config.Host, cluster.Source, err)
	}
	node, err := describeNode(ctx, quick)
	if err != nil {
		return err
	}

	tmp, err := os.MkdirTemp("", "hutch-bench-kube-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	// Unix socket paths are limited to 107 bytes: image mode's run dir
	// lives directly in the temp dir, under a short name.
	runDir, err := os.MkdirTemp("", "hbk")
	if err != nil {
		return err
	}
	defer os.RemoveAll(runDir)

	progress("building a static hutch (CGO_ENABLED=0 go build ./cmd/hutch), the agent of both modes")
	bin, err := benchkit.BuildHutch(ctx, tmp)
	if err != nil {
		return err
	}
	agentBin, err := agentbin.Locate(bin)
	if err != nil {
		return err
	}
	agentRef := kubeagent.Ref("", agentBin)
	progress("loading %s into the node (docker save | hack/kube-up load -)", benchkit.BusyboxRef)
	if err := loadDockerImage(ctx, eng, benchkit.BusyboxRef); err != nil {
		return err
	}
	progress("loading the agent image %s into the node (hack/kube-up load -)", agentRef)
	if err := loadAgentImage(ctx, agentBin, agentRef); err != nil {
		return err
	}

	progress("creating namespace %s", ns)
	if _, err := cluster.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create namespace %s: %w", ns, err)
	}
	defer deleteNamespace(cluster, ns)

	// The runtimes' warnings (a pod that ended, a slow stop) go beside
	// the progress lines: the report must not hide what went wrong.
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	// The workspace is a hostPath on the node, which is this machine: the
	// pod sees the very directory the container bind-mounts.
	ws := filepath.Join(tmp, "workspace")

	kb := &mode{name: "kube"}
	kubeRt, err := kube.New(kube.Config{
		Cluster: cluster, Image: benchkit.BusyboxRef,
		StateDir: filepath.Join(tmp, "state-kube"), Workspace: ws,
		AgentImage: agentRef, Agent: agentBin, Log: log, Event: kb.event,
	})
	if err != nil {
		return err
	}
	defer kubeRt.Close()
	kb.rt, kb.agent = kubeRt, kubeRt.Agent

	img := &mode{name: "image"}
	imgRt, err := image.New(image.Config{
		Engine: eng, Image: benchkit.BusyboxRef,
		StateDir: filepath.Join(tmp, "state-image"), RunDir: filepath.Join(runDir, "i"),
		Agent: agentBin, Log: log, Event: img.event,
	})
	if err != nil {
		return err
	}
	img.rt, img.agent = imgRt, imgRt.Agent

	tag := benchkit.RandomHex(4)
	if kb.spec, err = officeSpec(ws, "bench-kube-kube-"+tag); err != nil {
		return err
	}
	if img.spec, err = officeSpec(ws, "bench-kube-image-"+tag); err != nil {
		return err
	}
	kb.stop = func(ctx context.Context) error {
		if err := kubeRt.Stop(ctx, kb.spec.OfficeKey); err != nil {
			return err
		}
		return waitPodGone(ctx, cluster, kube.PodName(kb.spec.OfficeKey))
	}
	kb.remove = func(ctx context.Context) error {
		if err := kubeRt.Remove(ctx, kb.spec.OfficeKey); err != nil {
			return err
		}
		return waitPodGone(ctx, cluster, kube.PodName(kb.spec.OfficeKey))
	}
	img.stop = func(ctx context.Context) error { return imgRt.Stop(ctx, img.spec.OfficeKey) }
	img.remove = func(ctx context.Context) error { return imgRt.Remove(ctx, img.spec.OfficeKey) }

	// Removed whatever happened: the container and its network, and the
	// pod (waited for, so that the workspace it mounts is not deleted
	// under it); the namespace goes after, by the deferred call above.
	defer func() {
		cctx, ccancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer ccancel()
		progress("cleanup: removing the image-mode container and its network")
		if err := imgRt.Remove(cctx, img.spec.OfficeKey); err != nil {
			progress("cleanup: image Remove: %v", err)
		}
		progress("cleanup: deleting the pod")
		if err := kb.remove(cctx); err != nil && !errdefs.IsNotFound(err) {
			progress("cleanup: kube Remove: %v", err)
		}
	}()

	for _, m := range []*mode{kb, img} {
		progress("%s: first command (makes the office's runtime)", m.name)
		t0 := time.Now()
		if err := execTrue(ctx, m); err != nil {
			return fmt.Errorf("%s: first command: %w", m.name, err)
		}
		m.first = time.Since(t0)
		progress("%s: first command took %s", m.name, benchkit.Ms(m.first))
	}

	startTbl, err := measureStarts(ctx, o.starts, kb, img)
	if err != nil {
		return err
	}
	execTbl, err := measureExec(ctx, o.n, kb, img)
	if err != nil {
		return err
	}
	writeTbl, err := measureWrites(ctx, o.writes, kb, img)
	if err != nil {
		return err
	}

	benchkit.Header{Bench: "bench/kube", Engine: eng, Detail: true}.Print(os.Stdout)
	fmt.Printf("kubernetes %s (API server %s) · %s · agent sha256 %s\n", version.GitVersion, cluster.Config.Host, node, agentBin.SHA256[:16])
	fmt.Println("the kube exec stream runs hutch → API server → kubelet → containerd, every hop on loopback on this machine (no network between machines)")
	fmt.Printf("both offices: %g CPU, %d MiB; image %s; percentiles nearest-rank; ratio = kube / image\n",
		limits.CPUs, limits.MemoryBytes>>20, benchkit.BusyboxRef)
	fmt.Printf("first command of a new office (once each, not compared): kube %s (pod created, agent installed by the init container, started, exec stream opened) · image %s (agent staged earlier; network and container created, started)\n",
		benchkit.Ms(kb.first), benchkit.Ms(img.first))
	startTbl.print(os.Stdout)
	execTbl.print(os.Stdout)
	writeTbl.print(os.Stdout)
	return nil
}

// describeNode names the cluster's node and what it runs, for the header;
// the bench expects one (the test cluster's).
func describeNode(ctx context.Context, c *kube.Cluster) (string, error) {
	nodes, err := c.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
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
	defer rc.Close()
	return kubeLoad(ctx, rc)
}

// loadAgentImage writes the agent image of bin and imports it into the
// node's containerd.
func loadAgentImage(ctx context.Context, bin agentbin.Binary, ref string) error {
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(kubeagent.Write(pw, bin, ref)) }()
	defer pr.Close()
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
func waitPodGone(ctx context.Context, c *kube.Cluster, name string) error {
	ctx, cancel := context.WithTimeout(ctx, goneTimeout)
	defer cancel()
	pods := c.Client.CoreV1().Pods(c.Namespace)
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
func deleteNamespace(c *kube.Cluster, ns string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	progress("cleanup: deleting namespace %s", ns)
	nss := c.Client.CoreV1().Namespaces()
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

// officeSpec makes an office directory in ws for a conversation and the
// spec the runtimes get for it: the office alone is projected, read-write.
func officeSpec(ws, conv string) (sandbox.Spec, error) {
	addr, err := office.NewAddress("web", conv)
	if err != nil {
		return sandbox.Spec{}, err
	}
	key := string(addr.Key())
	dir := filepath.Join(ws, key)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return sandbox.Spec{}, err
	}
	return sandbox.Spec{
		OfficeKey: key, Platform: "web", ConversationID: conv,
		OfficeDir: dir, OfficeRuntimePath: "/workspace/" + key,
		Mounts: []sandbox.Mount{{HostPath: dir, RuntimePath: "/workspace/" + key}},
		Limits: limits,
	}, nil
}

var trueReq = sandbox.ExecRequest{Argv: []string{"true"}}

func execTrue(ctx context.Context, m *mode) error {
	return check(m.rt.Exec(ctx, m.spec, trueReq))
}

// check turns a command that did not exit 0 into an error.
func check(res sandbox.ExecResult, err error) error {
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("exit %d %s", res.ExitCode, res.Message())
	}
	return nil
}

// pair is one row of a table: the same operation in both modes.
type pair struct {
	name      string
	kube, img *benchkit.Series
}

// table is one comparison.
type table struct {
	title  string
	rows   []pair
	legend []string
}

// series returns the table's series for Interleave, kube and image
// alternating, so that every round rotates through both modes.
func (t *table) series() []*benchkit.Series {
	var out []*benchkit.Series
	for _, r := range t.rows {
		out = append(out, r.kube, r.img)
	}
	return out
}

func (t *table) print(w io.Writer) {
	fmt.Fprintf(w, "\n%s\n", t.title)
	tw := benchkit.Table(w)
	fmt.Fprintln(tw, "operation\tkube p50\tkube p90\timage p50\timage p90\tratio p50\tratio p90\truns k+i\tfailed k+i")
	var errs []string
	for _, r := range t.rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%.2f\t%.2f\t%d+%d\t%d+%d\n", r.name,
			benchkit.Ms(r.kube.P50()), benchkit.Ms(r.kube.Pct(90)), benchkit.Ms(r.img.P50()), benchkit.Ms(r.img.Pct(90)),
			benchkit.Ratio(r.kube.P50(), r.img.P50()), benchkit.Ratio(r.kube.Pct(90), r.img.Pct(90)),
			len(r.kube.Times), len(r.img.Times), r.kube.Fail, r.img.Fail)
		for _, s := range []*benchkit.Series{r.kube, r.img} {
			if s.Err != nil {
				errs = append(errs, fmt.Sprintf("  first failure of %s: %v", s.Name, s.Err))
			}
		}
	}
	tw.Flush()
	for _, l := range t.legend {
		fmt.Fprintln(w, "  "+l)
	}
	for _, e := range errs {
		fmt.Fprintln(w, e)
	}
}

// started wraps a cold start measurement: before marks the runtime's
// start count (after the untimed stop), and the timed run fails unless
// the runtime reported a start, so that a stop that did nothing cannot
// pass a warm command off as a cold start.
func started(ctx context.Context, m *mode, name string, stop func(context.Context) error) *benchkit.Series {
	var mark int64
	return &benchkit.Series{
		Name: m.name + " " + name,
		Before: func() error {
			if err := stop(ctx); err != nil {
				return fmt.Errorf("untimed stop: %w", err)
			}
			mark = m.starts.Load()
			return nil
		},
		Run: func() error {
			if err := execTrue(ctx, m); err != nil {
				return err
			}
			if m.starts.Load() == mark {
				return errors.New("the runtime reported no start: nothing was started")
			}
			return nil
		},
	}
}

func measureStarts(ctx context.Context, rounds int, kb, img *mode) (*table, error) {
	t := &table{
		title: fmt.Sprintf("1. Cold start to first command: Runtime.Exec `true` with nothing running, %d rounds interleaved", rounds),
		rows: []pair{
			{name: "stopped → first `true`", kube: started(ctx, kb, "new pod", kb.stop), img: started(ctx, img, "start", img.stop)},
			{name: "diag: removed → first `true`", kube: started(ctx, kb, "new pod after Remove", kb.remove), img: started(ctx, img, "create + start", img.remove)},
		},
		legend: []string{
			"stopped: kube: Stop deleted the pod, gone before the clock starts; timed: pod created, scheduled, init container installs the agent,",
			"         sandbox container started, pod seen running, exec stream opened, agent pinged, `true`.",
			"         image: Stop stopped the container; timed: container start, agent answers, `true`.",
			"removed: kube: Remove is Stop (a deleted pod is all there is); timed: as stopped.",
			"         image: Remove deleted container and network; timed: network + container created, started, agent answers, `true`.",
		},
	}
	progress("cold start to first command: %d rounds", rounds)
	err := benchkit.Interleave(ctx, benchkit.Rounds{N: rounds, Label: "cold start to first command", Progress: progress, KeepGoing: true}, t.series())
	return t, err
}

func measureExec(ctx context.Context, rounds int, kb, img *mode) (*table, error) {
	t := &table{
		title: fmt.Sprintf("2. Warm exec: `true` in a running pod / container, %d rounds interleaved after 5 warm-up rounds", rounds),
		legend: []string{
			"Runtime.Exec: what a service call does (kube: one GET of the pod from the API server; image: two engine GETs), then the agent runs `true`.",
			"diag agent client: agent.Client.Exec on the client Runtime.Agent returned once: the agent's own round trip",
			"                   (kube: over the exec stream through API server and kubelet; image: the agent's unix socket).",
		},
	}
	row := pair{name: "Runtime.Exec `true`"}
	diag := pair{name: "diag: agent client Exec `true`"}
	for _, m := range []*mode{kb, img} {
		// Both are running: the cold start rounds ended with a command in
		// each.
		cl, err := m.agent(ctx, m.spec)
		if err != nil {
			return nil, fmt.Errorf("%s: Runtime.Agent: %w", m.name, err)
		}
		req := trueReq
		req.Dir = m.spec.OfficeRuntimePath
		s := &benchkit.Series{Name: m.name + " Runtime.Exec", Run: func() error { return execTrue(ctx, m) }}
		d := &benchkit.Series{Name: m.name + " agent client Exec", Run: func() error { return check(cl.Exec(ctx, req)) }}
		if m == kb {
			row.kube, diag.kube = s, d
		} else {
			row.img, diag.img = s, d
		}
	}
	t.rows = []pair{row, diag}
	progress("warm exec: warm-up, 5 rounds")
	if err := benchkit.WarmUp(ctx, benchkit.Rounds{N: 5}, t.series()); err != nil {
		return nil, fmt.Errorf("warm exec warm-up: %w", err)
	}
	progress("warm exec: %d rounds", rounds)
	err := benchkit.Interleave(ctx, benchkit.Rounds{N: rounds, Label: "warm exec", Progress: progress, KeepGoing: true}, t.series())
	return t, err
}

func measureWrites(ctx context.Context, rounds int, kb, img *mode) (*table, error) {
	// Random bytes, so that nothing on the way can make the write cheap
	// (a sparse file, a compressing layer).
	data := make([]byte, fileSize)
	if _, err := rand.Read(data); err != nil {
		return nil, err
	}
	const apiName, cmdName = "bench-api.bin", "bench-cmd.bin"
	cmd := sandbox.ExecRequest{Argv: []string{fmt.Sprintf("head -c %d /dev/zero > %s", fileSize, cmdName)}}
	t := &table{
		title: fmt.Sprintf("3. 16 MiB file write into the office, %d rounds interleaved after 2 warm-up rounds", rounds),
		legend: []string{
			"agent file API: Runtime.Agent + agent.Client.WriteFile of 16 MiB random bytes (staged, fsynced, renamed by the agent);",
			"                kube's bytes cross the exec stream (API server, kubelet), image's the agent's unix socket.",
			"diag command: Runtime.Exec `head -c 16777216 /dev/zero > " + cmdName + "` in the office (no fsync): only the command crosses.",
			"kube's office is a hostPath volume mounted with subPath, image's a bind mount, of the same directory tree. The file is removed on the host after each run, untimed.",
		},
	}
	api := pair{name: "agent file API WriteFile"}
	byCmd := pair{name: "diag: command `head -c … > f`"}
	for _, m := range []*mode{kb, img} {
		apiHost, cmdHost := filepath.Join(m.spec.OfficeDir, apiName), filepath.Join(m.spec.OfficeDir, cmdName)
		a := &benchkit.Series{
			Name: m.name + " WriteFile",
			Run: func() error {
				cl, err := m.agent(ctx, m.spec)
				if err != nil {
					return err
				}
				return cl.WriteFile(ctx, path.Join(m.spec.OfficeRuntimePath, apiName), bytes.NewReader(data), 0o644)
			},
			After: func() { os.Remove(apiHost) },
		}
		c := &benchkit.Series{
			Name:  m.name + " head -c",
			Run:   func() error { return check(m.rt.Exec(ctx, m.spec, cmd)) },
			After: func() { os.Remove(cmdHost) },
		}
		// One of each, checked on the host: the rows must measure writes
		// that land in the office, whole.
		if err := a.Run(); err != nil {
			return nil, fmt.Errorf("%s: WriteFile: %w", m.name, err)
		}
		if got, err := os.ReadFile(apiHost); err != nil || !bytes.Equal(got, data) {
			return nil, fmt.Errorf("%s: the file written through the agent is not in the office on the host as written (%d bytes, %v)", m.name, len(got), err)
		}
		a.After()
		if err := c.Run(); err != nil {
			return nil, fmt.Errorf("%s: %s: %w", m.name, cmd.Argv[0], err)
		}
		if fi, err := os.Stat(cmdHost); err != nil || fi.Size() != fileSize {
			return nil, fmt.Errorf("%s: the file written by the command is not in the office on the host with %d bytes (%v)", m.name, fileSize, err)
		}
		c.After()
		if m == kb {
			api.kube, byCmd.kube = a, c
		} else {
			api.img, byCmd.img = a, c
		}
	}
	t.rows = []pair{api, byCmd}
	progress("16 MiB writes: warm-up, 2 rounds")
	if err := benchkit.WarmUp(ctx, benchkit.Rounds{N: 2}, t.series()); err != nil {
		return nil, fmt.Errorf("16 MiB write warm-up: %w", err)
	}
	progress("16 MiB writes: %d rounds", rounds)
	err := benchkit.Interleave(ctx, benchkit.Rounds{N: rounds, Label: "16 MiB writes", Progress: progress, KeepGoing: true}, t.series())
	return t, err
}
