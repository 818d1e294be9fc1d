package project_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/project"
)

func TestCheckProject(t *testing.T) {
	const home = "/home/users/me"
	tests := []struct {
		name, project, home string
		refused             bool
	}{
		{"root", "/", home, true},
		{"depth_one_home", "/home", home, true},
		{"depth_one_users", "/Users", home, true},
		{"depth_one_opt", "/opt", home, true},
		{"home", home, home, true},
		{"home_unclean", "/home/users/me/", home, true},
		{"ancestor_of_home", "/home/users", home, true},
		{"holds_docker_sock", "/var/run", home, true},
		{"holds_rootless_sockets", "/run/user/1000", home, true},
		{"holds_podman_sock", "/run/user/1000/podman", home, true},
		{"under_proc", "/proc/1/root", home, true},
		{"relative", "code/api", home, true},
		{"empty", "", home, true},
		{"project_in_home", "/home/users/me/code/api", home, false},
		{"sibling_of_home", "/home/users/other", home, false},
		{"depth_two_elsewhere", "/srv/api", home, false},
		{"home_prefix_is_not_ancestor", "/home/users/me2", home, false},
		{"unknown_home", "/home/users", "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := project.CheckProject(tc.project, tc.home)
			if tc.refused != (err != nil) {
				t.Fatalf("CheckProject(%q, %q) got %v, want refused=%v", tc.project, tc.home, err, tc.refused)
			}
			if err != nil && !errdefs.IsInvalid(err) {
				t.Errorf("CheckProject(%q) error %v is not ErrInvalid", tc.project, err)
			}
		})
	}
}

// TestCheckProject_Texts pins every refusal text.
func TestCheckProject_Texts(t *testing.T) {
	var b strings.Builder
	for _, p := range []string{"/", "/home", "/home/users/me", "/home/users", "/var/run", "/run/user/1000", "/proc/1/root", "code/api", ""} {
		fmt.Fprintf(&b, "%q:\n  %v\n", p, project.CheckProject(p, "/home/users/me"))
	}
	golden(t, "check_project", b.String())
}
