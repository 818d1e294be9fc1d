package kube

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hutchsandbox/hutch/internal/agent"
	"github.com/hutchsandbox/hutch/internal/engine"
	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/sandbox"
)

// A relaying pod (sandbox.network allowlist or none, or placeholder
// secrets under any policy) reaches the network only through hutch's
// egress proxy, which runs in the hutch process. The agent that serves
// this process's exec stream listens on a loopback port inside the pod
// (its commands' HTTPS_PROXY) and relays each connection over that
// stream, where the office's proxy (egress.Relays) decides on it.
//
// Under a proxied policy the pod is labelled hutch.egress=proxied, and
// the namespace's NetworkPolicy egressPolicyName selects such pods with
// no egress rule: the network plugin drops every packet they send, DNS
// included, so a process that ignores HTTPS_PROXY, resolves names itself
// or sends raw TCP or UDP gets nowhere. The exec stream is no connection
// of the pod's: it reaches the agent through the kubelet and the
// container runtime. Without that policy in place hutch runs no proxied
// pod. Under open with placeholders the pod keeps its network (labelled
// relayed), and commands are pointed at the same proxy so that
// placeholders get substituted.
const (
	// labelEgress marks a relaying pod: egressProxied or egressRelayed.
	labelEgress   = "hutch.egress"
	egressProxied = "proxied"
	egressRelayed = "relayed"

	// egressCAPath is where the agent writes the office's egress CA
	// certificate (given in its argv: a pod cannot bind-mount a host
	// file), in the pod's writable run dir.
	egressCAPath = runDir + "/egress-ca.pem"
	// egressPort is the first loopback port the agent's relay listens on.
	// Each exec stream into a pod is an agent of its own (one per hutch
	// process, and a new one after a reconnect while the last may still be
	// going), so a stream that finds it taken takes the next, up to
	// egressPorts ports; its commands get its own port as their proxy.
	egressPort  = 3128
	egressPorts = 16
)

// relays reports whether spec's pod goes out through hutch's proxy.
func relays(spec sandbox.Spec) bool {
	return spec.Network.Proxied() || spec.Placeholders
}

// egressOf is the hutch.egress label of spec's pod: "" when it does not
// relay.
func egressOf(spec sandbox.Spec) string {
	switch {
	case spec.Network.Proxied():
		return egressProxied
	case spec.Placeholders:
		return egressRelayed
	}
	return ""
}

// egressCA returns the office's CA certificate, refusing a relaying spec
// when this runtime was configured without a proxy.
func (r *Runtime) egressCA(officeKey string) ([]byte, error) {
	if r.cfg.Egress == nil || r.cfg.EgressCA == nil {
		return nil, errdefs.New(errdefs.ErrFailedPrecondition,
			"This conversation's sandbox.network (or its placeholder secrets) needs hutch's egress proxy, which this kube-mode runtime was made without; run it through hutch exec, hutch serve or the daemon")
	}
	ca, err := r.cfg.EgressCA(officeKey)
	if err != nil {
		return nil, err
	}
	return ca.CertPEM(), nil
}

// egressDesired fills d's egress fields for spec: the label and a digest
// of the CA the pod trusts, so a new CA re-creates it.
func (r *Runtime) egressDesired(spec sandbox.Spec, d *desired) error {
	d.Egress = egressOf(spec)
	if d.Egress == "" {
		return nil
	}
	pem, err := r.egressCA(spec.OfficeKey)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(pem)
	d.EgressCA = hex.EncodeToString(sum[:8])
	return nil
}

// egressArgs are the agent's arguments for a relaying pod's exec stream,
// its relay listening on port.
func (r *Runtime) egressArgs(officeKey string, port int) ([]string, error) {
	pem, err := r.egressCA(officeKey)
	if err != nil {
		return nil, err
	}
	return []string{
		"--egress", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		"--egress-ca", egressCAPath,
		"--egress-ca-pem", base64.StdEncoding.EncodeToString(pem),
	}, nil
}

// dialRelaying starts a relaying pod's agent on the first free egress
// port.
func (r *Runtime) dialRelaying(ctx context.Context, key string) (net.Conn, error) {
	var err error
	for port := egressPort; port < egressPort+egressPorts; port++ {
		var args []string
		if args, err = r.egressArgs(key, port); err != nil {
			return nil, err
		}
		var c net.Conn
		if c, err = r.dial(ctx, key, args...); err == nil || !strings.Contains(err.Error(), "address already in use") {
			return c, err
		}
	}
	return nil, fmt.Errorf("pod %s: every egress port from %d to %d is taken by other exec streams' agents: %w", PodName(key), egressPort, egressPort+egressPorts-1, err)
}

// egressPolicyName is the NetworkPolicy that cuts this installation's
// proxied pods off from the network.
func (r *Runtime) egressPolicyName() string {
	return "hutch-" + installation(r.cfg.StateDir) + "-no-egress"
}

// egressPolicy is that NetworkPolicy: it selects this installation's
// pods labelled proxied and allows them no egress at all.
func (r *Runtime) egressPolicy() *networkingv1.NetworkPolicy {
	labels := r.installationLabels()
	sel := maps.Clone(labels)
	sel[labelEgress] = egressProxied
	return &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: r.egressPolicyName(), Namespace: r.cluster.Namespace, Labels: labels},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: sel},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
		},
	}
}

// installationLabels are the labels of everything this installation
// makes in the namespace.
func (r *Runtime) installationLabels() map[string]string {
	return map[string]string{
		engine.LabelManaged: "true",
		engine.LabelMode:    string(sandbox.KindKube),
		labelInstallation:   installation(r.cfg.StateDir),
	}
}

// deniesEgress reports whether np holds proxied pods to no egress: it
// selects them (and no more narrowly than want does) and has the Egress
// type and no egress rule.
func deniesEgress(np, want *networkingv1.NetworkPolicy) bool {
	return maps.Equal(np.Spec.PodSelector.MatchLabels, want.Spec.PodSelector.MatchLabels) &&
		len(np.Spec.PodSelector.MatchExpressions) == 0 &&
		slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeEgress) &&
		len(np.Spec.Egress) == 0
}

// ensureEgressPolicy makes sure the NetworkPolicy that denies proxied
// pods all egress is in the namespace, making it when it is missing. It
// runs before a proxied pod is made and before this process first uses
// one, and refuses (nothing runs) when it cannot tell or cannot make it:
// a proxied pod without it would have the cluster's open network.
func (r *Runtime) ensureEgressPolicy(ctx context.Context) error {
	want := r.egressPolicy()
	nps := r.cluster.Client.NetworkPolicies(r.cluster.Namespace)
	refuse := func(verb string, err error) error {
		return errdefs.New(errdefs.ErrFailedPrecondition, fmt.Sprintf(
			"kube mode runs a conversation whose sandbox.network is allowlist or none only behind NetworkPolicy %s in namespace %s, which denies its pod every connection but hutch's proxy; hutch could not %s it (%s). hutch's credentials need get and create on networkpolicies (networking.k8s.io) in that namespace. Nothing ran.",
			want.Name, want.Namespace, verb, firstLine(err)))
	}
	for range maxEnsureRounds {
		np, err := nps.Get(ctx, want.Name, getOpts)
		if apierrors.IsNotFound(err) {
			_, err = nps.Create(ctx, want, metav1.CreateOptions{})
			switch {
			case err == nil:
				r.log.Info("made the NetworkPolicy that denies proxied pods all egress", "namespace", want.Namespace, "policy", want.Name)
				return nil
			case apierrors.IsAlreadyExists(err):
				continue // another replica made it: check theirs
			case apierrors.IsForbidden(err), apierrors.IsUnauthorized(err):
				return refuse("create", err)
			}
			return classify(err, "create networkpolicy "+want.Name)
		}
		if apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
			return refuse("read", err)
		}
		if err != nil {
			return classify(err, "networkpolicy "+want.Name)
		}
		if !deniesEgress(np, want) {
			return errdefs.New(errdefs.ErrFailedPrecondition, fmt.Sprintf(
				"NetworkPolicy %s in namespace %s no longer denies proxied pods all egress (changed by hand?); hutch runs no conversation whose sandbox.network is allowlist or none until it does. Delete it, and hutch makes it again.",
				want.Name, want.Namespace))
		}
		return nil
	}
	return errdefs.New(errdefs.ErrUnavailable, "NetworkPolicy "+want.Name+" kept changing under hutch; try again")
}

// relay keeps the office's relay pump running on cl: the connections the
// pod's commands make reach the office's proxy while this process holds
// its exec stream. The office's lock is held.
func (r *Runtime) relay(s *session, cl *agent.Client) {
	s.egress.Run(cl, r.cfg.Egress.Handler(s.Key), r.log.With("office_key", s.Key))
}
