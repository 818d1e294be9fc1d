package project_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/project"
)

const home = "/home/me"

func TestParseMount(t *testing.T) {
	bind := func(src, dst string, ro bool) project.Mount {
		return project.Mount{Type: project.MountBind, Source: src, Target: dst, ReadOnly: ro}
	}
	tests := []struct {
		name, raw string
		want      project.Mount
	}{
		{"bare_path_mounts_at_itself", "/data", bind("/data", "/data", false)},
		{"source_target", "/data:/mnt/data", bind("/data", "/mnt/data", false)},
		{"read_only", "/data:/mnt/data:ro", bind("/data", "/mnt/data", true)},
		{"read_write", "/data:/mnt/data:rw", bind("/data", "/mnt/data", false)},
		{"mode_case_insensitive", "/data:/mnt/data:RO", bind("/data", "/mnt/data", true)},
		{"parts_trimmed", "  /data : /mnt/data : ro ", bind("/data", "/mnt/data", true)},
		{"paths_cleaned", "/data/../srv//x/:/mnt/./x/", bind("/srv/x", "/mnt/x", false)},
		{"tilde_source", "~/.gitconfig:/etc/gitconfig:ro", bind("/home/me/.gitconfig", "/etc/gitconfig", true)},
		{"tilde_both_sides", "~/.gitconfig:~/.gitconfig:ro", bind("/home/me/.gitconfig", "/sandbox/home/.gitconfig", true)},
		{"bare_tilde_path_lands_in_sandbox_home", "~/.config/gh", bind("/home/me/.config/gh", "/sandbox/home/.config/gh", false)},
		{"bare_tilde_is_home", "~", bind("/home/me", "/sandbox/home", false)},
		{"volume", "cache:/root/.cache", project.Mount{Type: project.MountVolume, Source: "cache", Target: "/root/.cache"}},
		{"volume_read_only", "go-mod.v2:/go/pkg/mod:ro", project.Mount{Type: project.MountVolume, Source: "go-mod.v2", Target: "/go/pkg/mod", ReadOnly: true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := project.ParseMount(tc.raw, home)
			if err != nil {
				t.Fatalf("ParseMount(%q) error: %v", tc.raw, err)
			}
			if got != tc.want {
				t.Errorf("ParseMount(%q) got %+v, want %+v", tc.raw, got, tc.want)
			}
		})
	}
}

// TestParseMount_Errors pins the text of every malformed entry.
func TestParseMount_Errors(t *testing.T) {
	var b strings.Builder
	for _, raw := range []string{
		"", "   ", "/a:/b:ro:x", ":/b", "/a:", "/a:relative", "/a:/b:rx", "/a:/b:",
		"cache", "./rel:/b", "foo/bar:/b", "~other/x:/b", "-v:/b",
	} {
		_, err := project.ParseMount(raw, home)
		if err == nil {
			t.Errorf("ParseMount(%q) got no error", raw)
			continue
		}
		if !errdefs.IsInvalid(err) {
			t.Errorf("ParseMount(%q) error %v is not ErrInvalid", raw, err)
		}
		fmt.Fprintf(&b, "%q:\n  %v\n", raw, err)
	}
	_, err := project.ParseMount("~/.ssh:/x", "")
	fmt.Fprintf(&b, "%q with no home:\n  %v\n", "~/.ssh:/x", err)
	golden(t, "parse_mount_errors", b.String())
}

func TestCheckMount(t *testing.T) {
	bind := func(src, dst string) project.Mount {
		return project.Mount{Type: project.MountBind, Source: src, Target: dst}
	}
	tests := []struct {
		name    string
		m       project.Mount
		refused bool
	}{
		{"docker_sock", bind("/var/run/docker.sock", "/var/run/docker.sock"), true},
		{"docker_sock_run", bind("/run/docker.sock", "/var/run/docker.sock"), true},
		{"docker_sock_unclean", bind("/var/run/../run/docker.sock", "/x.sock"), true},
		{"podman_sock", bind("/run/podman/podman.sock", "/var/run/docker.sock"), true},
		{"podman_sock_var_run", bind("/var/run/podman/podman.sock", "/p.sock"), true},
		{"rootless_podman_dir_entry", bind("/run/user/1000/podman/podman.sock", "/p.sock"), true},
		{"rootless_podman_other_name", bind("/run/user/1000/podman/api.sock", "/p.sock"), true},
		{"rootless_docker", bind("/run/user/1000/docker.sock", "/d.sock"), true},
		{"docker_desktop", bind("/home/me/.docker/run/docker.sock", "/d.sock"), true},
		{"docker_sock_anywhere", bind("/srv/engine/docker.sock", "/d.sock"), true},
		{"podman_machine_sock", bind("/home/me/.local/share/containers/podman/machine/podman-machine-default-api.sock", "/d.sock"), true},
		{"containerd_sock", bind("/run/containerd/containerd.sock", "/c.sock"), true},
		{"dir_holding_docker_sock", bind("/var/run", "/var/run"), true},
		{"dir_holding_rootless_sockets", bind("/run/user/1000", "/run/user/1000"), true},
		{"dir_holding_podman_sock", bind("/run/podman", "/run/podman"), true},
		{"docker_desktop_dir", bind("/home/me/.docker", "/sandbox/home/.docker"), true},
		{"root", bind("/", "/host"), true},
		{"home", bind("/home/me", "/sandbox/home"), true},
		{"home_unclean", bind("/home/me/", "/h"), true},
		{"ancestor_of_home", bind("/home", "/h"), true},
		{"depth_one", bind("/etc", "/host-etc"), true},
		{"proc", bind("/proc/1/root", "/host"), true},
		{"relative_source", bind("rel", "/x"), true},
		{"target_root", bind("/home/me/code/lib", "/"), true},
		{"volume_target_root", project.Mount{Type: project.MountVolume, Source: "v", Target: "/"}, true},
		{"relative_target", bind("/home/me/code/lib", "lib"), true},
		{"unknown_type", project.Mount{Type: "tmpfs", Target: "/tmp"}, true},
		{"gitconfig", bind("/home/me/.gitconfig", "/sandbox/home/.gitconfig"), false},
		{"project_elsewhere", bind("/home/me/code/lib", "/home/me/code/lib"), false},
		{"depth_two", bind("/srv/data", "/srv/data"), false},
		{"sock_not_engine", bind("/run/user/1000/ssh-agent.sock", "/ssh.sock"), false},
		{"docker_config_file", bind("/home/me/.docker/config.json", "/sandbox/home/.docker/config.json"), false},
		{"named_volume", project.Mount{Type: project.MountVolume, Source: "docker.sock", Target: "/cache"}, false},
		{"anonymous_volume", project.Mount{Type: project.MountVolume, Target: "/cache"}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := project.CheckMount(tc.m, home)
			if tc.refused != (err != nil) {
				t.Fatalf("CheckMount(%+v) got %v, want refused=%v", tc.m, err, tc.refused)
			}
			if err != nil && !errdefs.IsInvalid(err) {
				t.Errorf("CheckMount(%+v) error %v is not ErrInvalid", tc.m, err)
			}
		})
	}
}

// TestCheckMount_Texts pins every refusal text.
func TestCheckMount_Texts(t *testing.T) {
	var b strings.Builder
	for _, m := range []project.Mount{
		{Type: project.MountBind, Source: "/var/run/docker.sock", Target: "/var/run/docker.sock"},
		{Type: project.MountBind, Source: "/var/run", Target: "/var/run"},
		{Type: project.MountBind, Source: "/run/user/1000", Target: "/x"},
		{Type: project.MountBind, Source: "/", Target: "/host"},
		{Type: project.MountBind, Source: "/home/me", Target: "/sandbox/home", ReadOnly: true},
		{Type: project.MountBind, Source: "/home", Target: "/home"},
		{Type: project.MountBind, Source: "/etc", Target: "/etc"},
		{Type: project.MountBind, Source: "/proc/1/root", Target: "/host"},
		{Type: project.MountBind, Source: "rel", Target: "/x"},
		{Type: project.MountBind, Source: "/srv/x", Target: "/"},
		{Type: project.MountVolume, Source: "v", Target: "rel"},
		{Type: project.MountVolume, Target: "/"},
		{Type: "tmpfs", Target: "/tmp"},
	} {
		fmt.Fprintf(&b, "%+v:\n  %v\n", m, project.CheckMount(m, home))
	}
	golden(t, "check_mount", b.String())
}
