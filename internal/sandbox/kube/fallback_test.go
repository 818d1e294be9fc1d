package kube

import (
	"context"
	"log/slog"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/hutchsandbox/hutch/internal/agentbin"
	"github.com/hutchsandbox/hutch/internal/sandbox"
)

// TestBoost_RecreateWhenNoInPlaceResize: on a cluster that refuses the
// pods/resize subresource (older than in-place resize, or with it turned
// off), a boost replaces the pod with one of the same spec and the boosted
// limits, keeps the boost in its annotations, and says it re-created it.
// A real cluster cannot be made to refuse on demand, so this runs against
// client-go's fake clientset, where the API server's answer is scripted.
func TestBoost_RecreateWhenNoInPlaceResize(t *testing.T) {
	o := owner{stateDir: "/var/lib/hutch", officeKey: "v1-web-boost-0123456789abcdef", platform: "web", conv: "boost"}
	d := desired{Namespace: "ns", Image: "busybox:1", AgentImage: "hutch-agent:sha-0", Agent: "abc", WorkDir: "/workspace/x", Hardening: hardeningVersion}
	pod := buildPod(o, d, "/ws", "abc", d.fingerprint(), sandbox.Limits{CPUs: 0.5, MemoryBytes: 1 << 30})
	if _, why := sandbox.RecreatedFrom(pod.Annotations); why != "" {
		t.Fatalf("a new pod says it was re-created: %q", why)
	}
	pod.UID = "old"
	pod.Status.Phase = corev1.PodRunning
	cs := fake.NewClientset(pod)
	cs.PrependReactor("update", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() == "resize" {
			return true, nil, apierrors.NewNotFound(schema.GroupResource{Resource: "pods/resize"}, pod.Name)
		}
		return false, nil, nil
	})
	// The fake makes no kubelet: a created pod runs at once, with a new UID.
	cs.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		p := a.(k8stesting.CreateAction).GetObject().(*corev1.Pod)
		p.UID = "new"
		p.Status.Phase = corev1.PodRunning
		return false, nil, nil
	})
	rt, err := New(Config{
		Cluster:    &Cluster{Client: clientsetAPI{cs}, Namespace: "ns"},
		StateDir:   o.stateDir,
		Workspace:  "/ws",
		AgentImage: d.AgentImage,
		Agent:      agentbin.Binary{Path: "/hutch", SHA256: "abc"},
		Log:        slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	before := time.Now().Add(-time.Second)
	st, err := rt.Boost(context.Background(), o.officeKey, sandbox.Limits{CPUs: 2, MemoryBytes: 4 << 30})
	if err != nil {
		t.Fatal(err)
	}
	// It says when and why it was re-created.
	const why = "the cluster could not resize it in place"
	if st.RecreatedBecause != why || st.Recreated.Before(before) || st.Recreated.After(time.Now()) {
		t.Errorf("status: re-created %v because %q, want about now because %q", st.Recreated, st.RecreatedBecause, why)
	}
	if st.LimitsApplied != sandbox.LimitsAppliedRecreated || st.AppliedNote() == "" || !st.Boosted || st.ID != "new" {
		t.Errorf("status: %+v", st)
	}
	got, err := cs.CoreV1().Pods("ns").Get(context.Background(), pod.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if l := podLimits(got); l.CPUs != 2 || l.MemoryBytes != 4<<30 {
		t.Errorf("the new pod's limits: %+v", l)
	}
	if got.Annotations[sandbox.LabelRecreatedBecause] != why || got.Annotations[sandbox.LabelRecreatedAt] == "" {
		t.Errorf("the new pod's re-creation annotations: %+v", got.Annotations)
	}
	if got.Annotations[annotationBoost] == "" || got.Spec.InitContainers[0].Image != d.AgentImage {
		t.Errorf("the new pod is not the old one's spec with the boost: %+v", got.Annotations)
	}
	// The base limits of the next command do not undo the boost.
	if eff := effective(sandbox.Limits{CPUs: 0.5, MemoryBytes: 1 << 30}, got); eff.CPUs != 2 {
		t.Errorf("effective limits after the re-create: %+v", eff)
	}
}
