package kube_test

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/sandbox/kube"
)

// TestAttack_FillTheDisk: a command writes past the disk ceiling into
// its pod's writable layer. The kubelet evicts the pod (its container's
// ephemeral-storage limit is the ceiling), what it wrote goes with it,
// and the conversation's next command gets a fresh pod with its office
// kept.
func TestAttack_FillTheDisk(t *testing.T) {
	f := newFixture(t)
	spec := f.office(t, "fill-disk")
	spec.DiskCeiling = 32 << 20
	run(t, f.rt, spec, "echo kept > kept.txt", nil)
	pod := f.pod(t, spec)
	var c *corev1.Container
	for i := range pod.Spec.Containers {
		c = &pod.Spec.Containers[i]
	}
	if q := c.Resources.Limits[corev1.ResourceEphemeralStorage]; q.Value() != 32<<20 {
		t.Fatalf("the pod's ephemeral-storage limit is %s; want the ceiling, 32Mi", q.String())
	}
	// The write itself succeeds (the kubelet counts every few seconds);
	// the pod must not outlive the next count by long.
	var out bytes.Buffer
	_, _ = f.rt.Exec(context.Background(), spec, sandbox.ExecRequest{Argv: []string{"mkdir -p /data && head -c 67108864 /dev/zero > /data/fill && sleep 120"}, Dir: "/", Stdout: &out, Stderr: io.Discard, Timeout: 3 * time.Minute})
	deadline := time.Now().Add(3 * time.Minute)
	for {
		p := f.pod(t, spec)
		if p.UID != pod.UID {
			t.Fatalf("the pod was replaced, not evicted: %s", p.Status.Reason)
		}
		// An evicted pod is Failed, or Succeeded when its agent's clean
		// exit on SIGTERM reached the status first (seen under load); the
		// kubelet's event says why either way.
		if p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded {
			if why := evictedFor(t, f, p); !strings.Contains(why, "ephemeral") {
				t.Errorf("the pod ended (%s, %q: %s) and the kubelet's eviction event says %q; want an eviction for ephemeral storage", p.Status.Phase, p.Status.Reason, p.Status.Message, why)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the pod still runs (%s) with 64 MiB written past a 32 MiB ceiling", p.Status.Phase)
		}
		time.Sleep(2 * time.Second)
	}
	if got, _ := run(t, f.rt, spec, "cat kept.txt; ls /data 2>/dev/null; true", nil); got != "kept\n" {
		t.Errorf("after the eviction: %q; want the office's file and no /data", got)
	}
}

// evictedFor returns the messages of the kubelet's Evicted events of pod.
func evictedFor(t *testing.T, f *fixture, pod *corev1.Pod) string {
	t.Helper()
	evs, err := f.cluster.Client.CoreV1().Events(f.namespace).List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.uid=" + string(pod.UID)})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range evs.Items {
		if e.Reason == "Evicted" {
			out = append(out, e.Message)
		}
	}
	return strings.Join(out, "; ")
}

// TestAttack_WithdrawnVaultSecretStays: the vault's last file is removed;
// the re-created pod must not see it, and its Secret must not stay in
// the namespace (where anyone with read access to Secrets, or a later
// pod mounting it by name, would find the withdrawn credential).
func TestAttack_WithdrawnVaultSecretStays(t *testing.T) {
	f := newFixture(t)
	spec := f.office(t, "vault-withdrawn")
	value := secret(t)
	keyFile := filepath.Join(f.state, "vault-withdrawn", "token")
	if err := os.MkdirAll(filepath.Dir(keyFile), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, []byte(value), 0o600); err != nil {
		t.Fatal(err)
	}
	spec.VaultFiles = []sandbox.Mount{{HostPath: keyFile, RuntimePath: "/root/.token", ReadOnly: true}}
	if out, _ := run(t, f.rt, spec, "cat /root/.token", nil); out != value {
		t.Fatalf("the vault file inside: %q", out)
	}
	spec.VaultFiles = nil
	if out, _ := run(t, f.rt, spec, "cat /root/.token 2>/dev/null; true", nil); out != "" {
		t.Errorf("the withdrawn vault file inside the re-created pod: %q", out)
	}
	if _, err := f.cluster.Client.CoreV1().Secrets(f.namespace).Get(context.Background(), kube.SecretName(spec.OfficeKey), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the vault Secret stayed after its last file was withdrawn: %v", err)
	}
}
