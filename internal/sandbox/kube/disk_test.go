package kube_test

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/hutchsandbox/hutch/internal/sandbox"
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
		if p.Status.Phase == corev1.PodFailed {
			if p.Status.Reason != "Evicted" || !strings.Contains(p.Status.Message, "ephemeral") {
				t.Errorf("the pod failed with %q: %s; want an eviction for ephemeral storage", p.Status.Reason, p.Status.Message)
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
