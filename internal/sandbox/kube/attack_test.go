package kube_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/sandbox/kube"
	"github.com/hutchsandbox/hutch/internal/sandbox/sandboxtest"
)

// TestAttack_CrossPodReach: a conversation's pod cannot connect to
// another's, though pods share the cluster's network. The NetworkPolicy
// hutch makes admits no ingress to its pods; this shows a cluster
// enforcing it (hack/kube-up runs kube-network-policies for that) keeps
// the attacker out. On a cluster whose network plugin ignores
// NetworkPolicy it fails: there pods reach each other by IP.
func TestAttack_CrossPodReach(t *testing.T) {
	f := newFixture(t)
	victim := f.office(t, "victim-pod")
	attacker := f.office(t, "attacker-pod")
	sandboxtest.CrossReach(t, f.rt, victim, attacker, func() string {
		p, err := f.cluster.Client.CoreV1().Pods(f.namespace).Get(context.Background(), kube.PodName(victim.OfficeKey), metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		if err != nil {
			return ""
		}
		return p.Status.PodIP
	}, " (does the cluster enforce NetworkPolicy?)")
}

// TestAttack_MountSourceLinked: a conversation whose door grants the
// whole workspace moves another office away and puts a link to a third
// conversation's office in its place. The kubelet follows links that
// stay inside the volume, so without hutch's check the victim's pod
// would get the third office. The victim's first command must be
// refused before anything runs, and the third office stays unread.
func TestAttack_MountSourceLinked(t *testing.T) {
	f := newFixture(t)
	attacker := f.office(t, "attacker-full")
	attacker.Mounts = []sandbox.Mount{{HostPath: f.ws, RuntimePath: "/workspace"}}
	victim := f.office(t, "victim-linked")
	third := f.office(t, "third-office")
	if err := os.WriteFile(filepath.Join(third.OfficeDir, "diary"), []byte("third's secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, _ := run(t, f.rt, attacker, "mv /workspace/"+victim.OfficeKey+" /workspace/moved && ln -s "+third.OfficeDir+" /workspace/"+victim.OfficeKey+" && echo planted", nil); out != "planted\n" {
		t.Fatalf("the attacker's plant: %q", out)
	}
	var out bytes.Buffer
	_, err := f.rt.Exec(context.Background(), victim, sandbox.ExecRequest{Argv: []string{"cat diary"}, Stdout: &out, Stderr: io.Discard, Timeout: 2 * time.Minute})
	if !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), "is a symbolic link") || !strings.Contains(err.Error(), "Nothing ran") {
		t.Errorf("the victim's first command through a linked office: %v (stdout %q); want the refusal", err, out.String())
	}
	if strings.Contains(out.String(), "third's secret") {
		t.Errorf("the victim's pod read the third conversation's office: %q", out.String())
	}
}
