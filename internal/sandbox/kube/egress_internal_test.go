package kube

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/hutchsandbox/hutch/internal/agentbin"
	"github.com/hutchsandbox/hutch/internal/egress"
	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/netpolicy"
	"github.com/hutchsandbox/hutch/internal/sandbox"
)

// egressRuntime is a runtime over client-go's fake clientset (the API
// server's answers scripted), with an egress proxy unless bare.
func egressRuntime(t *testing.T, cs *fake.Clientset, bare bool) *Runtime {
	t.Helper()
	cfg := Config{
		Cluster:    &Cluster{Client: clientsetAPI{cs}, Namespace: "ns"},
		Image:      "busybox:1",
		StateDir:   "/var/lib/hutch",
		Workspace:  "/ws",
		AgentImage: "hutch-agent:sha-0",
		Agent:      agentbin.Binary{Path: "/hutch", SHA256: "abc"},
		Log:        slog.New(slog.DiscardHandler),
	}
	if !bare {
		dir := t.TempDir()
		cfg.Egress = &egress.Relays{}
		cfg.EgressCA = func(string) (*egress.CA, error) { return egress.LoadOrCreateCA(dir) }
	}
	rt, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return rt
}

func proxiedSpec() sandbox.Spec {
	return sandbox.Spec{OfficeKey: "v1-web-egress-0123456789abcdef", Platform: "web", ConversationID: "egress",
		OfficeRuntimePath: "/workspace/x", Network: netpolicy.ModeAllowlist}
}

func forbid() k8stesting.ReactionFunc {
	return func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "networking.k8s.io", Resource: "networkpolicies"}, "", nil)
	}
}

// TestEgress_RefusedWithoutPolicy: when hutch cannot read or make the
// NetworkPolicy that cuts proxied pods off, a proxied conversation's
// command is refused, naming the permission, and no pod is made.
func TestEgress_RefusedWithoutPolicy(t *testing.T) {
	for _, verb := range []string{"get", "create"} {
		t.Run(verb, func(t *testing.T) {
			cs := fake.NewClientset()
			cs.PrependReactor(verb, "networkpolicies", forbid())
			rt := egressRuntime(t, cs, false)
			_, err := rt.Exec(context.Background(), proxiedSpec(), sandbox.ExecRequest{Argv: []string{"true"}})
			if !errdefs.IsFailedPrecondition(err) || !strings.Contains(err.Error(), "need get and create on networkpolicies") || !strings.Contains(err.Error(), "Nothing ran") {
				t.Errorf("Exec: %v; want the refusal naming the permission", err)
			}
			pods, _ := cs.CoreV1().Pods("ns").List(context.Background(), metav1.ListOptions{})
			if len(pods.Items) != 0 {
				t.Errorf("a pod was made: %s", pods.Items[0].Name)
			}
		})
	}
}

// TestEgress_PolicyChangedByHand: a no-egress policy that lets proxied
// pods out (an egress rule added by hand) is refused, not trusted.
func TestEgress_PolicyChangedByHand(t *testing.T) {
	cs := fake.NewClientset()
	rt := egressRuntime(t, cs, false)
	np := rt.egressPolicy()
	np.Spec.Egress = []networkingv1.NetworkPolicyEgressRule{{}}
	if _, err := cs.NetworkingV1().NetworkPolicies("ns").Create(context.Background(), np, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err := rt.Exec(context.Background(), proxiedSpec(), sandbox.ExecRequest{Argv: []string{"true"}})
	if !errdefs.IsFailedPrecondition(err) || !strings.Contains(err.Error(), "no longer denies proxied pods all egress") {
		t.Errorf("Exec: %v; want the refusal", err)
	}
}

// TestEgress_RefusedWithoutProxy: a runtime made without the egress
// proxy refuses relaying conversations (proxied, or with placeholders).
func TestEgress_RefusedWithoutProxy(t *testing.T) {
	rt := egressRuntime(t, fake.NewClientset(), true)
	for _, spec := range []sandbox.Spec{proxiedSpec(), {OfficeKey: "v1-web-ph-0123456789abcdef", OfficeRuntimePath: "/workspace/x", Placeholders: true}} {
		_, err := rt.Exec(context.Background(), spec, sandbox.ExecRequest{Argv: []string{"true"}})
		if !errdefs.IsFailedPrecondition(err) || !strings.Contains(err.Error(), "needs hutch's egress proxy") {
			t.Errorf("Exec(network %s, placeholders %v): %v", spec.Network, spec.Placeholders, err)
		}
	}
}

// TestEgress_PodSpec: the label selects a proxied pod for the policy;
// open, proxied and relayed pods have three fingerprints; the CA is in
// no pod spec (the agent gets it over the exec stream).
func TestEgress_PodSpec(t *testing.T) {
	rt := egressRuntime(t, fake.NewClientset(), false)
	o := owner{stateDir: "/var/lib/hutch", officeKey: "v1-web-egress-0123456789abcdef"}
	fps := map[string]string{}
	for _, spec := range []sandbox.Spec{
		{OfficeKey: o.officeKey, OfficeRuntimePath: "/workspace/x"},
		{OfficeKey: o.officeKey, OfficeRuntimePath: "/workspace/x", Network: netpolicy.ModeNone},
		{OfficeKey: o.officeKey, OfficeRuntimePath: "/workspace/x", Placeholders: true},
	} {
		d, err := rt.desired(spec)
		if err != nil {
			t.Fatal(err)
		}
		pod := buildPod(o, d, "/ws", "abc", d.fingerprint(), sandbox.Limits{CPUs: 1, MemoryBytes: 1 << 30})
		if got := pod.Labels[labelEgress]; got != egressOf(spec) {
			t.Errorf("label %q, want %q", got, egressOf(spec))
		}
		if strings.Contains(strings.Join(pod.Spec.Containers[0].Command, " "), "egress") {
			t.Errorf("the pod's command carries egress flags: %v", pod.Spec.Containers[0].Command)
		}
		fps[d.fingerprint()] = egressOf(spec)
	}
	if len(fps) != 3 {
		t.Errorf("fingerprints: %v; want one per network", fps)
	}
	// A plain pod's fingerprint is what it was before egress existed: no
	// upgrade re-creates every pod.
	d, _ := rt.desired(sandbox.Spec{OfficeKey: o.officeKey, OfficeRuntimePath: "/workspace/x"})
	if d.Egress != "" || d.EgressCA != "" {
		t.Errorf("a plain pod's egress fields: %q %q", d.Egress, d.EgressCA)
	}
	np := rt.egressPolicy()
	if !deniesEgress(np, np) || np.Spec.PodSelector.MatchLabels[labelEgress] != egressProxied {
		t.Errorf("the policy hutch makes: %+v", np.Spec)
	}
}
