package kube

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/sandbox"
)

func TestSubPath(t *testing.T) {
	for _, c := range []struct {
		host, want string
		ok         bool
	}{
		{"/ws/v1-web-a-0123", "v1-web-a-0123", true},
		{"/ws/shared/MEMORY.md", "shared/MEMORY.md", true},
		{"/ws", "", true},
		{"/wsx/a", "", false},
		{"/etc", "", false},
		{"/ws/../etc", "", false},
	} {
		got, err := subPath("/ws", c.host)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("subPath(%q) = %q, %v; want %q ok=%v", c.host, got, err, c.want, c.ok)
		}
		if err != nil && !errdefs.IsInvalid(err) {
			t.Errorf("subPath(%q): error class: %v", c.host, err)
		}
	}
	_, err := subPath("/ws", "/etc")
	if want := "kube mode mounts only what lies under the workspace root /ws (the volume every node reaches); /etc is outside it"; err == nil || err.Error() != want {
		t.Errorf("error text:\n got %v\nwant %s", err, want)
	}
}

func vaultFixture(t *testing.T) []sandbox.Mount {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "token"), []byte("s3cret"), 0o600); err != nil {
		t.Fatal(err)
	}
	ssh := filepath.Join(dir, "ssh")
	if err := os.MkdirAll(filepath.Join(ssh, "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string]string{"id_ed25519": "private", "sub/config": "Host *"} {
		if err := os.WriteFile(filepath.Join(ssh, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return []sandbox.Mount{
		{HostPath: filepath.Join(dir, "token"), RuntimePath: "/root/.token"},
		{HostPath: ssh, RuntimePath: "/root/.ssh"},
	}
}

func testDesired(t *testing.T) (owner, desired) {
	t.Helper()
	mounts, err := planMounts("/ws", []sandbox.Mount{
		{HostPath: "/ws/v1-web-a-0123", RuntimePath: "/workspace/v1-web-a-0123"},
		{HostPath: "/ws/MEMORY.md", RuntimePath: "/workspace/MEMORY.md", ReadOnly: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	vault, err := planVault(vaultFixture(t))
	if err != nil {
		t.Fatal(err)
	}
	o := owner{stateDir: "/var/lib/hutch", officeKey: "v1-web-a-0123", platform: "web", conv: "a"}
	return o, desired{Namespace: "ns", Image: "busybox:1", AgentImage: "hutch-agent:sha-0123", Agent: "abc", WorkDir: "/workspace/v1-web-a-0123", Mounts: mounts, Vault: vault, Hardening: hardeningVersion}
}

// TestBuildPod pins what a pod is made with: hardening, the agent's
// delivery, the projection as subPath mounts, the vault from the Secret.
func TestBuildPod(t *testing.T) {
	o, d := testDesired(t)
	pod := buildPod(o, d, "/ws", "abc", d.fingerprint(), sandbox.Limits{CPUs: 0.5, MemoryBytes: 1 << 30})
	spec := pod.Spec
	if pod.Name != "hutch-v1-web-a-0123" || pod.Namespace != "ns" {
		t.Errorf("name %s/%s", pod.Namespace, pod.Name)
	}
	if *spec.AutomountServiceAccountToken || *spec.EnableServiceLinks || spec.RestartPolicy != corev1.RestartPolicyNever || spec.HostNetwork || spec.HostPID {
		t.Errorf("pod hardening: %+v", spec)
	}
	if len(spec.InitContainers) != 1 || !slices.Equal(spec.InitContainers[0].Command, []string{"/hutch", "agent", "--install-to", "/hutch-bin/hutch", "--sha256", "abc"}) || spec.InitContainers[0].Image != "hutch-agent:sha-0123" {
		t.Errorf("init container: %+v", spec.InitContainers)
	}
	c := spec.Containers[0]
	if !slices.Equal(c.Command, []string{"/hutch/bin/hutch", "agent", "--init", "--listen", "/hutch/run/agent.sock"}) || c.WorkingDir != "/workspace/v1-web-a-0123" || c.ImagePullPolicy != corev1.PullIfNotPresent {
		t.Errorf("container: %+v", c)
	}
	sc := c.SecurityContext
	if *sc.AllowPrivilegeEscalation || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || slices.Contains(sc.Capabilities.Add, "SYS_ADMIN") || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("security context: %+v", sc)
	}
	var got []string
	for _, m := range c.VolumeMounts {
		got = append(got, m.Name+":"+m.MountPath+":"+m.SubPath+":"+map[bool]string{true: "ro", false: "rw"}[m.ReadOnly])
	}
	want := []string{
		"hutch-agent:/hutch/bin::ro",
		"hutch-run:/hutch/run::rw",
		"workspace:/workspace/v1-web-a-0123:v1-web-a-0123:rw",
		"workspace:/workspace/MEMORY.md:MEMORY.md:ro",
		"hutch-vault:/root/.token:v0:ro",
		"hutch-vault:/root/.ssh:v1:ro",
	}
	if !slices.Equal(got, want) {
		t.Errorf("mounts:\n got %q\nwant %q", got, want)
	}
	for _, v := range spec.Volumes {
		switch v.Name {
		case volWorkspace:
			if v.HostPath == nil || v.HostPath.Path != "/ws" {
				t.Errorf("workspace volume: %+v", v)
			}
		case volVault:
			s := v.Secret
			if s == nil || s.SecretName != "hutch-vault-v1-web-a-0123" || *s.DefaultMode != 0o600 {
				t.Errorf("vault volume: %+v", v)
			}
			var paths []string
			for _, it := range s.Items {
				paths = append(paths, it.Path)
			}
			slices.Sort(paths)
			if !slices.Equal(paths, []string{"v0", "v1/id_ed25519", "v1/sub/config"}) {
				t.Errorf("vault items: %q", paths)
			}
		}
	}
	// No vault value anywhere in the pod.
	data, _ := json.Marshal(pod)
	for _, secret := range []string{"s3cret", "private", "Host *"} {
		if strings.Contains(string(data), secret) {
			t.Errorf("the pod spec holds a vault value %q", secret)
		}
	}
	// The Secret does.
	sec, err := buildSecret(o, d)
	if err != nil {
		t.Fatal(err)
	}
	if string(sec.Data["v0"]) != "s3cret" || len(sec.Data) != 3 || sec.Annotations[annotationVault] != d.vaultDigest() {
		t.Errorf("secret: %v", sec.Annotations)
	}
	// A claim replaces the hostPath.
	d.Storage = Storage{Claim: "hutch-workspace"}
	pod = buildPod(o, d, "/ws", "abc", "fp", sandbox.Limits{CPUs: 1, MemoryBytes: 1 << 30})
	for _, v := range pod.Spec.Volumes {
		if v.Name == volWorkspace && (v.PersistentVolumeClaim == nil || v.PersistentVolumeClaim.ClaimName != "hutch-workspace" || v.HostPath != nil) {
			t.Errorf("claim volume: %+v", v)
		}
	}
}

// TestFingerprint: what the pod is made from moves the fingerprint;
// limits (resized in place) do not.
func TestFingerprint(t *testing.T) {
	_, d := testDesired(t)
	base := d.fingerprint()
	changes := map[string]func(*desired){
		"image":         func(d *desired) { d.Image = "busybox:2" },
		"agent":         func(d *desired) { d.Agent = "def" },
		"read-only":     func(d *desired) { d.Mounts[0].ReadOnly = true },
		"vault content": func(d *desired) { d.Vault[0].Digest = "other" },
		"runtime class": func(d *desired) { d.RuntimeClass = "gvisor" },
		"node selector": func(d *desired) { d.NodeSelector = map[string]string{"pool": "sandbox"} },
		"storage":       func(d *desired) { d.Storage = Storage{Claim: "c"} },
	}
	for name, change := range changes {
		_, c := testDesired(t)
		change(&c)
		if c.fingerprint() == base {
			t.Errorf("%s does not change the fingerprint", name)
		}
	}
	_, c := testDesired(t)
	slices.Reverse(c.Mounts)
	if c.fingerprint() != base {
		t.Error("mount order changes the fingerprint")
	}
}

func TestResources(t *testing.T) {
	r := resources(sandbox.Limits{CPUs: 0.5, MemoryBytes: 1 << 30})
	if r.Limits.Cpu().MilliValue() != 500 || r.Requests.Cpu().MilliValue() != 125 ||
		r.Limits.Memory().Value() != 1<<30 || r.Requests.Memory().Value() != 1<<28 {
		t.Errorf("resources: %+v", r)
	}
	if got := limitsOf(r); !sameLimits(got, sandbox.Limits{CPUs: 0.5, MemoryBytes: 1 << 30}) {
		t.Errorf("limitsOf = %+v", got)
	}
}

func TestPlanVault_TooBig(t *testing.T) {
	p := filepath.Join(t.TempDir(), "big")
	if err := os.WriteFile(p, make([]byte, maxSecretBytes+1), 0o600); err != nil {
		t.Fatal(err)
	}
	vault, err := planVault([]sandbox.Mount{{HostPath: p, RuntimePath: "/big"}})
	if err != nil {
		t.Fatalf("planning a big vault (nothing read yet): %v", err)
	}
	_, err = buildSecret(owner{officeKey: "v1-web-big-0123456789abcdef"}, desired{Vault: vault})
	if !errdefs.IsInvalid(err) || !strings.Contains(err.Error(), "kube mode projects them from one Secret") {
		t.Errorf("err = %v", err)
	}
}

func TestPodReason(t *testing.T) {
	done := corev1.ContainerStatus{Name: installName, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}}}
	for _, c := range []struct {
		name string
		st   corev1.PodStatus
		want string
	}{
		{"evicted", corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted", Message: "The node was low on resource: memory.", InitContainerStatuses: []corev1.ContainerStatus{done}},
			"Evicted: The node was low on resource: memory."},
		{"unschedulable", corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Message: "0/1 nodes are available: 1 Insufficient cpu."}}},
			"PodScheduled: 0/1 nodes are available: 1 Insufficient cpu."},
		{"pulling", corev1.PodStatus{Phase: corev1.PodPending, InitContainerStatuses: []corev1.ContainerStatus{done}, ContainerStatuses: []corev1.ContainerStatus{{Name: containerName, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}}}},
			"sandbox ContainerCreating "},
		{"agent died", corev1.PodStatus{Phase: corev1.PodFailed, InitContainerStatuses: []corev1.ContainerStatus{done}, ContainerStatuses: []corev1.ContainerStatus{{Name: containerName, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled"}}}}},
			"sandbox exited 137 (OOMKilled) "},
	} {
		if got := podReason(&corev1.Pod{Status: c.st}); got != c.want {
			t.Errorf("%s: podReason = %q, want %q", c.name, got, c.want)
		}
	}
}
