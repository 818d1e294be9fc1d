package kube_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hutchsandbox/hutch/internal/agentbin"
	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/office"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/sandbox/kube"
	"github.com/hutchsandbox/hutch/internal/sandbox/sandboxtest"
	"github.com/hutchsandbox/hutch/internal/testenv"
)

// testLimits keep a test pod small: the node has two CPUs, and the suite
// runs a dozen pods at once (requests are a quarter of these).
var testLimits = sandbox.Limits{CPUs: 0.2, MemoryBytes: 128 << 20}

type fixture struct {
	cluster   testenv.KubeCluster
	namespace string
	img       string
	agent     agentbin.Binary
	agentRef  string
	state, ws string
	rt        *kube.Runtime
	events    atomic.Int64 // "created" events of every runtime made here
}

// newFixture makes a namespace of its own (deleted at the end), the
// busybox and agent images on the node, and a runtime.
func newFixture(t *testing.T) *fixture {
	t.Helper()
	cluster := testenv.Kube(t)
	cli := testenv.Docker(t)
	f := &fixture{cluster: cluster, img: testenv.BusyboxImage(t, cli)}
	cluster.LoadDockerImage(t, cli, f.img)
	f.agent, f.agentRef = cluster.AgentImage(t)
	b := make([]byte, 4)
	rand.Read(b)
	f.namespace = "hutch-test-" + hex.EncodeToString(b)
	ctx := context.Background()
	sweepNamespaces(t, cluster)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.namespace, Labels: map[string]string{testNamespaceLabel: "true"}}}
	if _, err := cluster.Client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cluster.Client.CoreV1().Namespaces().Delete(context.Background(), f.namespace, metav1.DeleteOptions{})
	})
	f.state = filepath.Join(t.TempDir(), "state")
	f.ws = filepath.Join(t.TempDir(), "ws")
	for _, d := range []string{f.state, f.ws} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	f.rt = f.runtime(t)
	return f
}

// testNamespaceLabel marks the namespaces these tests make.
const testNamespaceLabel = "hutch-test"

// sweepNamespaces deletes test namespaces older than an hour: what a
// killed test run (a timeout, Ctrl-C) left, since no run lasts that long.
func sweepNamespaces(t *testing.T, cluster testenv.KubeCluster) {
	t.Helper()
	list, err := cluster.Client.CoreV1().Namespaces().List(context.Background(), metav1.ListOptions{LabelSelector: testNamespaceLabel + "=true"})
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range list.Items {
		if time.Since(ns.CreationTimestamp.Time) > time.Hour && ns.DeletionTimestamp == nil {
			t.Logf("deleting namespace %s, left by an earlier run", ns.Name)
			_ = cluster.Client.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{})
		}
	}
}

// runtime makes another Runtime over the same installation, as a second
// hutch process (or replica) would.
func (f *fixture) runtime(t *testing.T) *kube.Runtime {
	t.Helper()
	return f.runtimeWith(t, nil)
}

// runtimeWith is runtime with its config changed by change first.
func (f *fixture) runtimeWith(t *testing.T, change func(*kube.Config)) *kube.Runtime {
	t.Helper()
	cl, err := kube.Connect(f.cluster.Kubeconfig, f.namespace)
	if err != nil {
		t.Fatal(err)
	}
	cfg := kube.Config{
		Cluster:    cl,
		Image:      f.img,
		StateDir:   f.state,
		Workspace:  f.ws,
		AgentImage: f.agentRef,
		Agent:      f.agent,
		Log:        slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Event: func(e string) {
			if e == "created" {
				f.events.Add(1)
			}
		},
	}
	if change != nil {
		change(&cfg)
	}
	rt, err := kube.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rt.Close)
	return rt
}

// office makes an office directory and the spec of its conversation.
func (f *fixture) office(t *testing.T, id string) sandbox.Spec {
	t.Helper()
	addr, err := office.NewAddress("web", id)
	if err != nil {
		t.Fatal(err)
	}
	key := string(addr.Key())
	dir := filepath.Join(f.ws, key)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	return sandbox.Spec{
		OfficeKey:         key,
		Platform:          "web",
		ConversationID:    id,
		OfficeDir:         dir,
		OfficeRuntimePath: "/workspace/" + key,
		Mounts:            []sandbox.Mount{{HostPath: dir, RuntimePath: "/workspace/" + key}},
		Limits:            testLimits,
	}
}

func (f *fixture) pod(t *testing.T, spec sandbox.Spec) *corev1.Pod {
	t.Helper()
	p, err := f.cluster.Client.CoreV1().Pods(f.namespace).Get(context.Background(), kube.PodName(spec.OfficeKey), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// waitNoPod waits until the office has no pod (deletion is graceful).
func (f *fixture) waitNoPod(t *testing.T, spec sandbox.Spec) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		_, err := f.cluster.Client.CoreV1().Pods(f.namespace).Get(context.Background(), kube.PodName(spec.OfficeKey), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pod %s still exists after a minute (err %v)", kube.PodName(spec.OfficeKey), err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func run(t *testing.T, rt sandbox.Runtime, spec sandbox.Spec, cmd string, env map[string]string) (string, sandbox.ExecResult) {
	t.Helper()
	var out, errb bytes.Buffer
	res, err := rt.Exec(context.Background(), spec, sandbox.ExecRequest{Argv: []string{cmd}, Env: env, Stdout: &out, Stderr: &errb, Timeout: 2 * time.Minute})
	if err != nil {
		t.Fatalf("Exec(%q): %v", cmd, err)
	}
	if res.ExitCode != 0 && res.Message() == "" {
		t.Fatalf("Exec(%q) exit %d: %s%s", cmd, res.ExitCode, out.String(), errb.String())
	}
	return out.String(), res
}

func TestConformance(t *testing.T) {
	f := newFixture(t)
	var n atomic.Int64
	sandboxtest.Run(t, sandboxtest.Harness{New: func(t *testing.T) (sandbox.Runtime, sandbox.Spec) {
		return f.rt, f.office(t, "conformance-"+strconv.FormatInt(n.Add(1), 10))
	}})
}

// TestFiles runs the files suite: file operations reach the pod (its
// agent, over the exec stream), never the daemon's own filesystem. The
// checks work in directories of their own and share one pod; the mounts
// check, last, re-creates it with mounts of its own.
func TestFiles(t *testing.T) {
	f := newFixture(t)
	spec := f.office(t, "files")
	sandboxtest.RunFiles(t, sandboxtest.Harness{New: func(t *testing.T) (sandbox.Runtime, sandbox.Spec) {
		return f.rt, spec
	}})
}

// TestIsolation: a pod sees its own office and nothing else of the
// workspace; a MEMORY.md projected read-only (shared-support private)
// cannot be written, not even by root.
func TestIsolation(t *testing.T) {
	f := newFixture(t)
	a, b := f.office(t, "iso-a"), f.office(t, "iso-b")
	if err := os.WriteFile(filepath.Join(b.OfficeDir, "b-only.txt"), []byte("b"), 0o600); err != nil {
		t.Fatal(err)
	}
	mem := filepath.Join(f.ws, "MEMORY.md")
	if err := os.WriteFile(mem, []byte("shared memory\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	a.Mounts = append(a.Mounts, sandbox.Mount{HostPath: mem, RuntimePath: "/workspace/MEMORY.md", ReadOnly: true})
	out, _ := run(t, f.rt, a, `ls /workspace; echo ---; cat /workspace/MEMORY.md; echo hi > a.txt; (echo x >> /workspace/MEMORY.md) 2>/dev/null && echo WROTE; ls /workspace/`+b.OfficeKey+` 2>/dev/null; true`, nil)
	if strings.Contains(out, b.OfficeKey) || strings.Contains(out, "b-only") {
		t.Errorf("office a sees office b:\n%s", out)
	}
	if !strings.Contains(out, "shared memory") || strings.Contains(out, "WROTE") {
		t.Errorf("MEMORY.md must be readable and read-only:\n%s", out)
	}
	if data, _ := os.ReadFile(mem); string(data) != "shared memory\n" {
		t.Errorf("MEMORY.md changed on the host: %q", data)
	}
	if data, err := os.ReadFile(filepath.Join(a.OfficeDir, "a.txt")); err != nil || string(data) != "hi\n" {
		t.Errorf("a write in the office did not reach the workspace: %q, %v", data, err)
	}
	// Mounts that are not on the workspace volume cannot reach a pod.
	c := f.office(t, "iso-c")
	c.Mounts = append(c.Mounts, sandbox.Mount{HostPath: "/etc", RuntimePath: "/host-etc"})
	_, err := f.rt.Exec(context.Background(), c, sandbox.ExecRequest{Argv: []string{"true"}})
	if err == nil || !strings.Contains(err.Error(), "/etc is outside it") {
		t.Errorf("a mount outside the workspace: err = %v", err)
	}
}

func secret(t *testing.T) string {
	b := make([]byte, 12)
	rand.Read(b)
	return "hutch-secret-" + hex.EncodeToString(b)
}

// TestVault: vault env reaches only the command it was given to, no value
// is in the pod spec (or anything else the pod shows), vault files are
// read-only and owner-only, and a rotated file re-creates the pod.
func TestVault(t *testing.T) {
	f := newFixture(t)
	spec := f.office(t, "vault")
	envValue, fileValue := secret(t), secret(t)
	vaultDir := filepath.Join(f.state, "vault")
	if err := os.MkdirAll(vaultDir, 0o700); err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(vaultDir, "token")
	if err := os.WriteFile(keyFile, []byte(fileValue), 0o600); err != nil {
		t.Fatal(err)
	}
	spec.VaultFiles = []sandbox.Mount{{HostPath: keyFile, RuntimePath: "/root/.token", ReadOnly: true}}

	out, _ := run(t, f.rt, spec, `echo "env=$API_TOKEN"; cat /root/.token; echo; stat -c %a /root/.token; (echo x > /root/.token) 2>/dev/null && echo WROTE; true`, map[string]string{"API_TOKEN": envValue})
	if !strings.Contains(out, "env="+envValue) || !strings.Contains(out, fileValue) || !strings.Contains(out, "600") || strings.Contains(out, "WROTE") {
		t.Errorf("vault in the command:\n%s", out)
	}
	out, _ = run(t, f.rt, spec, `echo "env=$API_TOKEN"; cat /proc/1/environ | tr '\0' '\n' | grep -c API_TOKEN || true`, nil)
	if strings.Contains(out, envValue) || !strings.Contains(out, "env=\n") {
		t.Errorf("vault env outlived its command:\n%s", out)
	}
	pod := f.pod(t, spec)
	data, _ := json.Marshal(pod)
	if bytes.Contains(data, []byte(envValue)) || bytes.Contains(data, []byte(fileValue)) {
		t.Errorf("a vault value is in the pod object")
	}
	if _, err := f.cluster.Client.CoreV1().Secrets(f.namespace).Get(context.Background(), kube.SecretName(spec.OfficeKey), metav1.GetOptions{}); err != nil {
		t.Fatalf("the vault Secret: %v", err)
	}

	// Rotate: the next command runs in a new pod that sees the new file.
	rotated := secret(t)
	if err := os.WriteFile(keyFile, []byte(rotated), 0o600); err != nil {
		t.Fatal(err)
	}
	out, _ = run(t, f.rt, spec, `cat /root/.token`, nil)
	if out != rotated {
		t.Errorf("after rotation the file holds %q, want the new value", out)
	}
	if got := f.pod(t, spec); got.UID == pod.UID {
		t.Errorf("a rotated vault file did not re-create the pod")
	}
	// A stop takes the credentials out of the cluster with the pod.
	if err := f.rt.Stop(context.Background(), spec.OfficeKey); err != nil {
		t.Fatal(err)
	}
	if _, err := f.cluster.Client.CoreV1().Secrets(f.namespace).Get(context.Background(), kube.SecretName(spec.OfficeKey), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the vault Secret outlived a stop: %v", err)
	}
}

// TestPodDeletedBehindHutch: a pod deleted by someone else, at once, is
// made again by the next command, and the office's files are there.
func TestPodDeletedBehindHutch(t *testing.T) {
	f := newFixture(t)
	spec := f.office(t, "deleted")
	run(t, f.rt, spec, "echo kept > kept.txt", nil)
	old := f.pod(t, spec)
	zero := int64(0)
	if err := f.cluster.Client.CoreV1().Pods(f.namespace).Delete(context.Background(), old.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	out, _ := run(t, f.rt, spec, "cat kept.txt", nil)
	if out != "kept\n" {
		t.Errorf("after the pod was deleted: %q", out)
	}
	if f.pod(t, spec).UID == old.UID {
		t.Error("the deleted pod is still the one used")
	}
}

// TestIdleStop: an idle stop deletes the pod and keeps the office; the
// next command makes a new pod.
func TestIdleStop(t *testing.T) {
	f := newFixture(t)
	spec := f.office(t, "idle")
	run(t, f.rt, spec, "echo kept > kept.txt", nil)
	st, err := f.rt.Status(context.Background(), spec.OfficeKey)
	if err != nil || st.State != sandbox.StateRunning {
		t.Fatalf("status before: %+v, %v", st, err)
	}
	stopped, err := f.rt.StopIdle(context.Background(), 0)
	if err != nil || len(stopped) != 1 || stopped[0] != spec.OfficeKey {
		t.Fatalf("StopIdle = %v, %v", stopped, err)
	}
	f.waitNoPod(t, spec)
	if st, err := f.rt.Status(context.Background(), spec.OfficeKey); err != nil || st.State != sandbox.StateMissing {
		t.Errorf("status after idle stop: %+v, %v", st, err)
	}
	if data, err := os.ReadFile(filepath.Join(spec.OfficeDir, "kept.txt")); err != nil || string(data) != "kept\n" {
		t.Errorf("office after idle stop: %q, %v", data, err)
	}
	out, _ := run(t, f.rt, spec, "cat kept.txt", nil)
	if out != "kept\n" {
		t.Errorf("after idle stop: %q", out)
	}
}

// TestReplicasRace: two hutch replicas (two runtimes, nothing shared but
// the cluster) running the first commands of one new conversation at once
// make one pod, and both commands run in it.
func TestReplicasRace(t *testing.T) {
	f := newFixture(t)
	spec := f.office(t, "race")
	replicas := []*kube.Runtime{f.rt, f.runtime(t)}
	var wg sync.WaitGroup
	outs := make([]string, 2*len(replicas))
	for i := range outs {
		wg.Go(func() {
			var out bytes.Buffer
			res, err := replicas[i%2].Exec(context.Background(), spec, sandbox.ExecRequest{Argv: []string{"cat /proc/sys/kernel/hostname"}, Stdout: &out})
			if err != nil || res.ExitCode != 0 {
				t.Errorf("replica %d: %+v, %v", i%2, res, err)
			}
			outs[i] = out.String()
		})
	}
	wg.Wait()
	if n := f.events.Load(); n != 1 {
		t.Errorf("%d pods were created, want 1", n)
	}
	for _, o := range outs[1:] {
		if o != outs[0] {
			t.Errorf("commands ran in different pods: %q", outs)
			break
		}
	}
}

// TestBoost: a boost resizes the running pod in place (same pod, new
// cgroup limits), and a stop ends it.
func TestBoost(t *testing.T) {
	f := newFixture(t)
	spec := f.office(t, "boost")
	run(t, f.rt, spec, "true", nil)
	before := f.pod(t, spec)
	st, err := f.rt.Boost(context.Background(), spec.OfficeKey, sandbox.Limits{CPUs: 1, MemoryBytes: 256 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if !st.Boosted || st.Limits.CPUs != 1 || st.Limits.MemoryBytes != 256<<20 {
		t.Errorf("status after boost: %+v", st)
	}
	if got := f.pod(t, spec); got.UID != before.UID {
		t.Errorf("the boost re-created the pod; this cluster resizes in place")
	}
	// The container's own cgroup, v2 or v1 (the CPU quota is per 100 ms).
	out, _ := run(t, f.rt, spec, `if [ -f /sys/fs/cgroup/cpu.max ]; then cut -d' ' -f1 /sys/fs/cgroup/cpu.max; cat /sys/fs/cgroup/memory.max; else cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us /sys/fs/cgroup/memory/memory.limit_in_bytes; fi`, nil)
	if out != "100000\n268435456\n" {
		t.Errorf("cgroup limits after the boost (CPU quota, memory):\n%s", out)
	}
	// A command keeps the boost (the base limits do not undo it).
	if st, _ := f.rt.Status(context.Background(), spec.OfficeKey); !st.Boosted || st.Limits.CPUs != 1 {
		t.Errorf("status after a command: %+v", st)
	}
	if err := f.rt.Stop(context.Background(), spec.OfficeKey); err != nil {
		t.Fatal(err)
	}
	f.waitNoPod(t, spec)
	run(t, f.rt, spec, "true", nil)
	if st, _ := f.rt.Status(context.Background(), spec.OfficeKey); st.Boosted || st.Limits.CPUs != testLimits.CPUs {
		t.Errorf("status after stop and a command: %+v", st)
	}
}

// TestReconcile: at start, pods of offices hutch knows are adopted; pods
// (and Secrets) of offices it cannot account for are deleted.
func TestReconcile(t *testing.T) {
	f := newFixture(t)
	keep, drop := f.office(t, "rec-keep"), f.office(t, "rec-drop")
	run(t, f.rt, keep, "true", nil)
	run(t, f.rt, drop, "true", nil)
	rep, err := f.runtime(t).Reconcile(context.Background(), func(k string) bool { return k == keep.OfficeKey })
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Adopted) != 1 || rep.Adopted[0] != keep.OfficeKey || len(rep.Removed) != 1 || rep.Removed[0] != drop.OfficeKey {
		t.Errorf("report: %+v", rep)
	}
	f.waitNoPod(t, drop)
	f.pod(t, keep)
}

// TestIdleStop_OtherReplicaUsedIt: a replica's idle stop leaves alone a
// pod another replica used within the idle time.
func TestIdleStop_OtherReplicaUsedIt(t *testing.T) {
	f := newFixture(t)
	spec := f.office(t, "idle-replicas")
	a, b := f.rt, f.runtime(t)
	run(t, a, spec, "true", nil)
	uid := f.pod(t, spec).UID
	time.Sleep(2500 * time.Millisecond)
	run(t, b, spec, "true", nil)
	stopped, err := a.StopIdle(context.Background(), 2*time.Second)
	if err != nil || len(stopped) != 0 {
		t.Fatalf("StopIdle = %v, %v; want nothing stopped", stopped, err)
	}
	if got := f.pod(t, spec); got.UID != uid || got.DeletionTimestamp != nil {
		t.Errorf("the pod another replica used was stopped")
	}
	// Once nobody used it for the idle time, it goes.
	time.Sleep(2500 * time.Millisecond)
	if stopped, err := a.StopIdle(context.Background(), 2*time.Second); err != nil || len(stopped) != 1 {
		t.Errorf("StopIdle later = %v, %v; want the pod stopped", stopped, err)
	}
}

// TestEvicted: a pod the node ended (evicted: phase Failed) is made again
// by the next command.
func TestEvicted(t *testing.T) {
	f := newFixture(t)
	spec := f.office(t, "evicted")
	run(t, f.rt, spec, "echo kept > kept.txt", nil)
	pod := f.pod(t, spec)
	pod.Status.Phase = corev1.PodFailed
	pod.Status.Reason = "Evicted"
	pod.Status.Message = "The node was low on resource: memory."
	if _, err := f.cluster.Client.CoreV1().Pods(f.namespace).UpdateStatus(context.Background(), pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	out, _ := run(t, f.rt, spec, "cat kept.txt", nil)
	if out != "kept\n" {
		t.Errorf("after the eviction: %q", out)
	}
	if got := f.pod(t, spec); got.UID == pod.UID {
		t.Error("the evicted pod is still the one used")
	}
}

// TestUsage reads a pod's resource use through its agent while a command
// spins, from this replica and from one that never ran a command there;
// reading counts as no use, so an idle stop still takes the pod.
func TestUsage(t *testing.T) {
	f := newFixture(t)
	spec := f.office(t, "usage")
	spec.Limits = sandbox.Limits{CPUs: 0.5, MemoryBytes: 128 << 20}
	run(t, f.rt, spec, "true", nil)
	pod := f.pod(t, spec)
	ctx := context.Background()
	wait := sandboxtest.Spin(t, f.rt, spec, 4*time.Second)
	time.Sleep(500 * time.Millisecond)
	other := f.runtime(t)
	for name, rt := range map[string]*kube.Runtime{"this replica": f.rt, "another replica": other} {
		// Held to half a CPU; allow for a busy machine, not for nonsense.
		cpu, b := sandboxtest.CPUShare(t, rt, spec.OfficeKey, time.Second)
		if cpu < 0.05 || cpu > 0.6 {
			t.Errorf("%s: CPU use %.3f, the later reading %+v; want up to 0.5", name, cpu, b)
		}
		if b.Instance != string(pod.UID) || b.Memory == 0 || b.MemoryLimit != 128<<20 || b.Pids < 2 {
			t.Errorf("%s: usage %+v, want pod %s's, a 128 MiB limit, the loop's processes", name, b, pod.UID)
		}
	}
	wait()
	// Reads leave the pod's last use as it was, in the pod and in this
	// process: this replica's idle stop takes it right after.
	before := f.pod(t, spec).Annotations
	if _, err := other.Usage(ctx, spec.OfficeKey); err != nil {
		t.Fatal(err)
	}
	if after := f.pod(t, spec).Annotations; !maps.Equal(before, after) {
		t.Errorf("reading the use changed the pod's annotations:\n%v\n%v", before, after)
	}
	time.Sleep(time.Second)
	for _, rt := range []*kube.Runtime{f.rt, other} {
		if _, err := rt.Usage(ctx, spec.OfficeKey); err != nil {
			t.Fatal(err)
		}
	}
	if stopped, err := f.rt.StopIdle(ctx, time.Second); err != nil || len(stopped) != 1 {
		t.Fatalf("StopIdle after reads = %v, %v; want the pod stopped", stopped, err)
	}
	f.waitNoPod(t, spec)
	if _, err := f.rt.Usage(ctx, spec.OfficeKey); !errdefs.IsNotFound(err) {
		t.Errorf("usage without a pod: %v, want NotFound", err)
	}
}
