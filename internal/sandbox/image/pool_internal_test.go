package image

import (
	"testing"

	"github.com/hutchsandbox/hutch/internal/sandbox"
)

// TestPoolFits: a member's Point takes one path component per mount, in
// /workspace; anything else, and vault files (their targets lie anywhere
// in the runtime's tree), starts cold.
func TestPoolFits(t *testing.T) {
	office := sandbox.Mount{HostPath: "/ws/v1-web-a", RuntimePath: "/workspace/v1-web-a"}
	base := sandbox.Spec{OfficeKey: "v1-web-a", OfficeRuntimePath: "/workspace/v1-web-a", Mounts: []sandbox.Mount{office}}
	with := func(change func(*sandbox.Spec)) sandbox.Spec {
		s := base
		s.Mounts = append([]sandbox.Mount(nil), base.Mounts...)
		change(&s)
		return s
	}
	for _, tc := range []struct {
		name string
		spec sandbox.Spec
		want bool
	}{
		{"the office alone", base, true},
		{"the office and MEMORY.md", with(func(s *sandbox.Spec) {
			s.Mounts = append(s.Mounts, sandbox.Mount{HostPath: "/ws/MEMORY.md", RuntimePath: "/workspace/MEMORY.md", ReadOnly: true})
		}), true},
		{"the whole workspace (full door)", with(func(s *sandbox.Spec) { s.Mounts = []sandbox.Mount{{HostPath: "/ws", RuntimePath: "/workspace"}} }), false},
		{"a mount deeper down", with(func(s *sandbox.Spec) {
			s.Mounts = append(s.Mounts, sandbox.Mount{HostPath: "/ws/shared", RuntimePath: "/workspace/v1-web-a/shared"})
		}), false},
		{"a mount elsewhere", with(func(s *sandbox.Spec) {
			s.Mounts = append(s.Mounts, sandbox.Mount{HostPath: "/x", RuntimePath: "/extra"})
		}), false},
		{"a dot-dot name", with(func(s *sandbox.Spec) {
			s.Mounts = append(s.Mounts, sandbox.Mount{HostPath: "/x", RuntimePath: "/workspace/.."})
		}), false},
		{"a trailing slash", with(func(s *sandbox.Spec) { s.Mounts[0].RuntimePath += "/" }), false},
		{"vault files", with(func(s *sandbox.Spec) {
			s.VaultFiles = []sandbox.Mount{{HostPath: "/v/.netrc", RuntimePath: "/root/.netrc", ReadOnly: true}}
		}), false},
		{"no mounts", with(func(s *sandbox.Spec) { s.Mounts = nil }), false},
		{"an office outside /workspace", with(func(s *sandbox.Spec) { s.OfficeRuntimePath = "/home/a" }), false},
	} {
		if got := poolFits(tc.spec); got != tc.want {
			t.Errorf("%s: poolFits = %t, want %t", tc.name, got, tc.want)
		}
	}
}
