package projection_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/hutchsandbox/hutch/internal/projection"
)

func TestPlan(t *testing.T) {
	const (
		root = "/srv/ws"
		key  = "v1-slack-general-0123456789abcdef"
	)
	office := projection.Mount{Role: projection.RoleOffice, Type: projection.EntryDir, HostPath: "/srv/ws/" + key, RuntimePath: "/workspace/" + key}
	support := func(ro bool) []projection.Mount {
		return []projection.Mount{
			office,
			{Role: projection.RoleMemory, Type: projection.EntryFile, HostPath: "/srv/ws/MEMORY.md", RuntimePath: "/workspace/MEMORY.md", ReadOnly: ro},
			{Role: projection.RoleSkills, Type: projection.EntryDir, HostPath: "/srv/ws/skills", RuntimePath: "/workspace/skills"},
			{Role: projection.RoleEvents, Type: projection.EntryDir, HostPath: "/srv/ws/events", RuntimePath: "/workspace/events"},
		}
	}
	tests := []struct {
		name        string
		p           projection.Policy
		root        string
		runtimeRoot string
		want        []projection.Mount
	}{
		{"isolated", projection.PolicyIsolated, root, projection.RuntimeRoot, []projection.Mount{office}},
		{"shared_public", projection.PolicySharedPublic, root, projection.RuntimeRoot, support(false)},
		{"shared_private", projection.PolicySharedPrivate, root, projection.RuntimeRoot, support(true)},
		{"full", projection.PolicyFull, root, projection.RuntimeRoot, []projection.Mount{
			{Role: projection.RoleRoot, Type: projection.EntryDir, HostPath: "/srv/ws", RuntimePath: "/workspace"},
		}},
		{"full_ignores_visibility", projection.Policy{DoorPolicy: projection.DoorTrusted, Layout: projection.LayoutFull, Visibility: projection.VisibilityPrivate}, root, projection.RuntimeRoot, []projection.Mount{
			{Role: projection.RoleRoot, Type: projection.EntryDir, HostPath: "/srv/ws", RuntimePath: "/workspace"},
		}},
		{"trailing_slashes_cleaned", projection.PolicyIsolated, root + "/", projection.RuntimeRoot + "/", []projection.Mount{office}},
		{"unnormalized_trusted_conversation_is_narrowest", projection.Policy{DoorPolicy: projection.DoorTrusted, Layout: projection.LayoutConversation}, root, projection.RuntimeRoot, []projection.Mount{office}},
		{"zero_policy_is_narrowest", projection.Policy{}, root, projection.RuntimeRoot, []projection.Mount{office}},
		{"host_identity_isolated", projection.PolicyIsolated, root, root, []projection.Mount{
			{Role: projection.RoleOffice, Type: projection.EntryDir, HostPath: "/srv/ws/" + key, RuntimePath: "/srv/ws/" + key},
		}},
		{"host_identity_full", projection.PolicyFull, root, root, []projection.Mount{
			{Role: projection.RoleRoot, Type: projection.EntryDir, HostPath: "/srv/ws", RuntimePath: "/srv/ws"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := projection.Plan(tt.p, tt.root, key, tt.runtimeRoot)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Plan(%v) mismatch (-want +got):\n%s", tt.p, diff)
			}
		})
	}
}
