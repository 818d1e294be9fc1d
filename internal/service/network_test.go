package service_test

import (
	"strings"
	"testing"

	"github.com/hutchsandbox/hutch/internal/netpolicy"
	"github.com/hutchsandbox/hutch/internal/office"
	"github.com/hutchsandbox/hutch/internal/projection"
	"github.com/hutchsandbox/hutch/internal/sandbox"
)

// TestNetwork_Admission: a conversation's sandbox.network is enforced by
// the modes that can and refused by the ones that cannot, never run with
// more network than it asked for.
func TestNetwork_Admission(t *testing.T) {
	svc := newService(t)
	addr, err := office.NewAddress("web", "net")
	if err != nil {
		t.Fatal(err)
	}
	// A trusted door, so that host and container refuse for the network
	// and not for the office.
	if err := svc.SetDoor(t.Context(), addr, &projection.Setting{DoorPolicy: "trusted", Layout: "full"}); err != nil {
		t.Fatal(err)
	}
	allow := "github.com"
	if err := svc.SetNetwork(&addr, "allowlist", &allow); err != nil {
		t.Fatal(err)
	}
	image := sandbox.Mode{Kind: sandbox.KindImage, Target: "x"}
	pol, err := svc.Resolve(addr, image, "")
	if err != nil {
		t.Fatal(err)
	}
	if pol.Refusal != nil || pol.Network.Mode != netpolicy.ModeAllowlist || strings.Join(pol.Network.Allow, ",") != "github.com" {
		t.Errorf("image mode: refusal %v, network %+v", pol.Refusal, pol.Network)
	}
	if p := svc.EgressPolicy(string(addr.Key()), sandbox.KindImage); !p.Allows("github.com", 443) || p.Allows("example.com", 443) {
		t.Errorf("EgressPolicy does not hold the allowlist: %+v", p)
	}
	for _, kind := range []sandbox.Kind{sandbox.KindHost, sandbox.KindContainer} {
		pol, err := svc.Resolve(addr, sandbox.Mode{Kind: kind, Target: "c"}, "u")
		if err != nil {
			t.Fatal(err)
		}
		want := "cannot enforce sandbox.network allowlist"
		if pol.Refusal == nil || !strings.Contains(pol.Refusal.Error(), want) {
			t.Errorf("%s: refusal %v, want one containing %q", kind, pol.Refusal, want)
		}
	}
	// A microVM has no route of its own: open is refused there.
	if err := svc.SetNetwork(&addr, "open", nil); err != nil {
		t.Fatal(err)
	}
	pol, err = svc.Resolve(addr, sandbox.Mode{Kind: sandbox.KindGondolin, Target: "default"}, "")
	if err != nil {
		t.Fatal(err)
	}
	if pol.Refusal == nil || !strings.Contains(pol.Refusal.Error(), "cannot enforce sandbox.network open") {
		t.Errorf("gondolin with open: refusal %v", pol.Refusal)
	}
	// Cleared, the conversation falls back to the global setting.
	if err := svc.SetNetwork(nil, "none", nil); err != nil {
		t.Fatal(err)
	}
	if err := svc.SetNetwork(&addr, "", nil); err != nil {
		t.Fatal(err)
	}
	n, err := svc.Network(addr, image)
	if err != nil {
		t.Fatal(err)
	}
	if n.Mode != netpolicy.ModeNone || n.Origin != "global" {
		t.Errorf("after clearing: %+v", n)
	}
	if err := svc.SetNetwork(&addr, "wide", nil); err == nil {
		t.Error("an unknown policy was stored")
	}
	bad := "https://github.com"
	if err := svc.SetNetwork(&addr, "allowlist", &bad); err == nil {
		t.Error("a malformed allowlist was stored")
	}
}
