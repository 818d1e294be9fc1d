package service_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/hutchsandbox/hutch/internal/office"
	"github.com/hutchsandbox/hutch/internal/projection"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/service"
)

// TestDoors: the doors of a list of offices, decided with the global
// settings read once, are what Resolve decides for each.
func TestDoors(t *testing.T) {
	svc := newService(t)
	var addrs []office.Address
	for _, id := range []string{"plain", "set", "group"} {
		a, err := office.NewAddress("web", id)
		if err != nil {
			t.Fatal(err)
		}
		addrs = append(addrs, a)
	}
	if err := svc.SetGlobalDoor(t.Context(), &projection.Setting{DoorPolicy: "trusted", Layout: "conversation", Visibility: "private"}); err != nil {
		t.Fatal(err)
	}
	if err := svc.SetDoor(t.Context(), addrs[1], &projection.Setting{DoorPolicy: "trusted", Layout: "full"}); err != nil {
		t.Fatal(err)
	}
	if err := svc.SetChannelKind(addrs[2], "public_channel"); err != nil {
		t.Fatal(err)
	}
	keys := make([]office.Key, len(addrs))
	for i, a := range addrs {
		keys[i] = a.Key()
	}
	doors, err := svc.Doors(keys, sandbox.KindHost)
	if err != nil {
		t.Fatal(err)
	}
	if len(doors) != len(addrs) {
		t.Fatalf("%d doors for %d offices", len(doors), len(addrs))
	}
	mode := sandbox.Mode{Kind: sandbox.KindHost}
	for i, a := range addrs {
		pol, err := svc.Resolve(a, mode, "")
		if err != nil {
			t.Fatal(err)
		}
		want := service.Door{Decision: pol.Decision, ChannelKind: pol.ChannelKind, Network: pol.Network}
		if diff := cmp.Diff(want, doors[i]); diff != "" {
			t.Errorf("%s (-Resolve +Doors):\n%s", a, diff)
		}
	}
	if doors[1].Decision.Policy != projection.PolicyFull || doors[2].ChannelKind != "public_channel" || doors[0].Decision.Policy == doors[1].Decision.Policy {
		t.Errorf("doors do not tell the offices apart: %+v", doors)
	}
}
