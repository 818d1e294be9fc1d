package project_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/hutchsandbox/hutch/internal/devcontainer"
	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/project"
)

const proj = "/home/me/code/api"

// input is the Input of a project with the settings file data and no
// devcontainer, on rootful Docker.
func input(t *testing.T, data string) project.Input {
	t.Helper()
	s, notes := parseSettings(t, data)
	if len(notes) != 0 {
		t.Fatalf("settings notes %q", notes)
	}
	return project.Input{
		Project: proj, Home: home, HostUID: 1000, HostGID: 1000,
		Settings: project.Effective(s, proj), Flavor: project.FlavorDocker,
		RelayDir: "/home/me/.hutch/relay/api",
	}
}

// apiDevcontainer is a devcontainer.json as the parser hands it over.
func apiDevcontainer() *devcontainer.Config {
	return &devcontainer.Config{
		Path:            proj + "/.devcontainer/devcontainer.json",
		Image:           "mcr.microsoft.com/devcontainers/go:1-1.23-bookworm",
		WorkspaceFolder: "/workspaces/api",
		ContainerEnv:    map[string]string{"GOFLAGS": "-mod=mod", "EDITOR": "vim", "HOME": "/home/vscode"},
		RemoteEnv:       map[string]string{"EDITOR": "nano", "PATH": "${containerEnv:PATH}:/go/bin", "bad-name": "x"},
		ContainerUser:   "root",
		RemoteUser:      "vscode",
		Mounts: []devcontainer.Mount{
			{Type: "volume", Source: "api-gomod", Target: "/go/pkg/mod"},
			{Type: "bind", Source: "/home/me/.cache/api//", Target: "/cache/"},
			{Type: "volume", Target: "/home/me/code/api/node_modules"},
		},
		Ignored:  []string{"customizations", "forwardPorts"},
		Features: []devcontainer.Feature{{ID: "ghcr.io/devcontainers/features/go:1", Options: map[string]string{}}},
		CapAdd:   []string{"SYS_PTRACE"},
		Lifecycle: map[string][]devcontainer.Lifecycle{
			"postCreateCommand": {{Origin: "devcontainer.json", Commands: []devcontainer.Command{{Shell: "go mod download"}}}},
			"initializeCommand": {{Origin: "devcontainer.json", Commands: []devcontainer.Command{{Shell: "./hack/prepare-host"}}}},
			"postAttachCommand": {{Origin: "devcontainer.json", Commands: []devcontainer.Command{{Argv: []string{"git", "status"}}}}},
		},
		Notes: []string{proj + "/.devcontainer/devcontainer.json: mounts entry 4: no target; it is not applied."},
	}
}

func render(t *testing.T, sp project.Spec) string {
	t.Helper()
	b, err := json.MarshalIndent(sp, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return string(b) + "\n"
}

// TestResolve pins whole specs: what each combination of settings,
// devcontainer.json and engine makes.
func TestResolve(t *testing.T) {
	tests := []struct {
		name  string
		in    func(t *testing.T) project.Input
		extra func(t *testing.T, sp project.Spec)
	}{
		{"settings_only", func(t *testing.T) project.Input {
			return input(t, `{"sandbox-enabled": true}`)
		}, nil},
		{"settings_full", func(t *testing.T) project.Input {
			return input(t, `{
				"sandbox-packages": ["jq"], "sandbox-agents": ["claude", "codex"], "sandbox-setup": ["pip install uv"],
				"sandbox-mount": ["~/.gitconfig:~/.gitconfig:ro", "gocache:/sandbox/home/.cache/go-build"],
				"sandbox-env": ["FOO=bar", "EMPTY=", "BAD", "1X=2"],
				"sandbox-memory": "8g", "sandbox-cpus": "2.3"
			}`)
		}, nil},
		{"devcontainer", func(t *testing.T) project.Input {
			in := input(t, `{"sandbox-env": ["EDITOR=code", "FOO=bar"], "sandbox-mount": ["/srv/cache:/cache:ro"]}`)
			in.Devcontainer = apiDevcontainer()
			return in
		}, func(t *testing.T, sp project.Spec) {
			if got, want := sp.Recipe.Base, "mcr.microsoft.com/devcontainers/go:1-1.23-bookworm"; got != want {
				t.Errorf("Recipe.Base got %q, want the devcontainer image %q", got, want)
			}
		}},
		{"devcontainer_home_from_settings", func(t *testing.T) project.Input {
			in := input(t, `{"sandbox-env": ["HOME=/home/vscode"], "sandbox-user": "host", "sandbox-base": "ubuntu:24.04"}`)
			dc := apiDevcontainer()
			dc.Image = ""
			dc.Dockerfile = "Dockerfile"
			dc.Build = &devcontainer.Build{Dockerfile: "Dockerfile"}
			in.Dockerfile = []byte("FROM ubuntu:24.04\n")
			dc.ShutdownAction = "stopContainer"
			dc.Mounts, dc.Ignored, dc.Notes, dc.Features, dc.CapAdd, dc.Lifecycle = nil, nil, nil, nil, nil, nil
			in.Devcontainer = dc
			return in
		}, nil},
		{"devcontainer_quiet", func(t *testing.T) project.Input {
			in := input(t, `{}`)
			in.Devcontainer = &devcontainer.Config{
				Path: proj + "/.devcontainer.json", Image: "node:22-bookworm", ContainerUser: "node", ShutdownAction: "None",
			}
			return in
		}, nil},
		{"sandbox_image_verbatim", func(t *testing.T) project.Input {
			in := input(t, `{"sandbox-image": "ghcr.io/me/agents:latest", "sandbox-packages": ["jq"]}`)
			in.Devcontainer = &devcontainer.Config{Path: proj + "/.devcontainer.json", Image: "node:22", ShutdownAction: "none"}
			return in
		}, func(t *testing.T, sp project.Spec) {
			if sp.Recipe != nil || sp.Image != "ghcr.io/me/agents:latest" {
				t.Errorf("got image %q recipe %+v, want the sandbox-image and no recipe", sp.Image, sp.Recipe)
			}
		}},
		{"podman_rootless", func(t *testing.T) project.Input {
			in := input(t, `{"sandbox-user": "host"}`)
			in.Flavor, in.Rootless, in.RelayDir = project.FlavorPodman, true, ""
			return in
		}, func(t *testing.T, sp project.Spec) {
			if !sp.UsernsKeepID || sp.ExtraHosts != nil {
				t.Errorf("got keep-id %v extra hosts %q, want keep-id and no extra hosts", sp.UsernsKeepID, sp.ExtraHosts)
			}
		}},
		{"podman_rootless_root", func(t *testing.T) project.Input {
			in := input(t, `{"sandbox-user": "root"}`)
			in.Flavor, in.Rootless = project.FlavorPodman, true
			return in
		}, func(t *testing.T, sp project.Spec) {
			if sp.UsernsKeepID || sp.User != "0:0" {
				t.Errorf("got user %q keep-id %v, want 0:0 without keep-id", sp.User, sp.UsernsKeepID)
			}
		}},
		{"network_none", func(t *testing.T) project.Input {
			return input(t, `{"sandbox-network": "none"}`)
		}, nil},
		{"network_allowlist", func(t *testing.T) project.Input {
			return input(t, `{"sandbox-network": "allowlist", "sandbox-network-allow": "github.com, *.npmjs.org", "sandbox-env": ["NO_PROXY=localhost,.internal"]}`)
		}, func(t *testing.T, sp project.Spec) {
			if sp.Network != "none" || sp.ExtraHosts != nil || !sp.Policy().Allows("registry.npmjs.org", 443) || sp.Policy().Allows("example.com", 443) {
				t.Errorf("network %q, extra hosts %q, policy %+v", sp.Network, sp.ExtraHosts, sp.Policy())
			}
		}},
		{"network_allowlist_empty", func(t *testing.T) project.Input {
			return input(t, `{"sandbox-network": "allowlist"}`)
		}, nil},
		{"network_host", func(t *testing.T) project.Input {
			return input(t, `{"sandbox-network": "HOST", "sandbox-user": "node:node"}`)
		}, nil},
		{"network_unknown_and_bad_user", func(t *testing.T) project.Input {
			in := input(t, `{}`)
			in.Settings.Network = "bus"
			in.Settings.User = "me; rm -rf"
			in.HostUID, in.HostGID = -1, -1
			return in
		}, nil},
		{"mount_dedupe", func(t *testing.T) project.Input {
			in := input(t, `{"sandbox-mount": ["/srv/a:/data", "/srv/b:/data:ro", "myhome:/sandbox/home", "/srv/c:/cache"]}`)
			in.Devcontainer = &devcontainer.Config{
				Path: proj + "/.devcontainer/devcontainer.json", ShutdownAction: "none",
				Mounts: []devcontainer.Mount{{Type: "bind", Source: "/srv/dc", Target: "/cache"}, {Type: "volume", Source: "x", Target: "/data"}},
			}
			return in
		}, func(t *testing.T, sp project.Spec) {
			targets := map[string]bool{}
			for _, m := range sp.Mounts {
				if targets[m.Target] {
					t.Errorf("two mounts target %s", m.Target)
				}
				targets[m.Target] = true
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sp, err := project.Resolve(tc.in(t))
			if err != nil {
				t.Fatalf("Resolve: %v", err)
			}
			if tc.extra != nil {
				tc.extra(t, sp)
			}
			if sp.PidsLimit != 4096 {
				t.Errorf("PidsLimit got %d, want 4096", sp.PidsLimit)
			}
			if n := len(sp.Env); n == 0 || sp.Env[n-1].Name != "HOME" && !strings.Contains(fmt.Sprint(sp.Env), "HOME=") {
				t.Errorf("Env %v sets no HOME", sp.Env)
			}
			golden(t, "resolve_"+tc.name, render(t, sp))
		})
	}
}

func TestResolve_HashFollowsTheShape(t *testing.T) {
	a, err := project.Resolve(input(t, `{"sandbox-memory": "4g"}`))
	if err != nil {
		t.Fatal(err)
	}
	again, _ := project.Resolve(input(t, `{"sandbox-memory": "4g", "sandbox-enabled": true, "sandbox-persist": false}`))
	if a.Hash != again.Hash || a.Labels["hutch.spec"] != a.Hash {
		t.Errorf("settings that do not shape the container changed the hash: %s, %s (label %s)", a.Hash, again.Hash, a.Labels["hutch.spec"])
	}
	for _, data := range []string{
		`{"sandbox-memory": "8g"}`, `{"sandbox-memory": "4g", "sandbox-packages": ["jq"]}`,
		`{"sandbox-memory": "4g", "sandbox-env": ["A=1"]}`, `{"sandbox-memory": "4g", "sandbox-network": "host"}`,
		`{"sandbox-memory": "4g", "sandbox-mount": ["/srv/x"]}`, `{"sandbox-memory": "4g", "sandbox-user": "root"}`,
		`{"sandbox-memory": "4g", "sandbox-network": "allowlist"}`,
	} {
		b, err := project.Resolve(input(t, data))
		if err != nil {
			t.Fatal(err)
		}
		if b.Hash == a.Hash {
			t.Errorf("settings %s did not change the hash", data)
		}
	}
}

// TestResolve_HashIgnoresTheAllowlist: what the proxy reads per
// connection (the hosts, and allowlist against none) never asks for a
// new container; open against either does, and so does a container of
// network none made before the relay.
func TestResolve_HashIgnoresTheAllowlist(t *testing.T) {
	hash := func(data string) string {
		sp, err := project.Resolve(input(t, data))
		if err != nil {
			t.Fatal(err)
		}
		return sp.Hash
	}
	a := hash(`{"sandbox-network": "allowlist", "sandbox-network-allow": "github.com"}`)
	for _, data := range []string{
		`{"sandbox-network": "allowlist", "sandbox-network-allow": "github.com,*.npmjs.org"}`,
		`{"sandbox-network": "allowlist"}`,
		`{"sandbox-network": "none", "sandbox-network-allow": "example.com"}`,
	} {
		if h := hash(data); h != a {
			t.Errorf("settings %s changed the hash: %s, want %s", data, h, a)
		}
	}
	if hash(`{}`) == a || hash(`{"sandbox-network": "bridge"}`) != hash(`{}`) {
		t.Error("open and allowlist share a hash, or bridge and open do not")
	}
	// The hash of a none container before there were policies.
	if a == "b4f722a521cbe6d9" {
		t.Error("a proxied spec has the hash of a none container without the relay")
	}
}

// TestResolve_AdoptEditor: sandbox-devcontainer decides whether an
// editor's running container for the project is entered; off is off
// for devcontainer.json and the editor's container alike.
func TestResolve_AdoptEditor(t *testing.T) {
	for data, want := range map[string]bool{
		`{}`:                              true,
		`{"sandbox-devcontainer": true}`:  true,
		`{"sandbox-devcontainer": false}`: false,
	} {
		sp, err := project.Resolve(input(t, data))
		if err != nil {
			t.Fatal(err)
		}
		if sp.AdoptEditor != want {
			t.Errorf("settings %s: AdoptEditor %v, want %v", data, sp.AdoptEditor, want)
		}
	}
}

// TestResolve_Refusals pins the errors: a refused mount stops the
// bring-up and names where it came from.
func TestResolve_Refusals(t *testing.T) {
	dcWith := func(m devcontainer.Mount) func(*project.Input) {
		return func(in *project.Input) {
			in.Devcontainer = &devcontainer.Config{Path: proj + "/.devcontainer/devcontainer.json", Mounts: []devcontainer.Mount{m}}
		}
	}
	tests := []struct {
		name     string
		settings string
		change   func(*project.Input)
	}{
		{"docker_sock_from_settings", `{"sandbox-mount": ["/var/run/docker.sock:/var/run/docker.sock"]}`, nil},
		{"podman_sock_from_settings", `{"sandbox-mount": ["/run/user/1000/podman/podman.sock:/run/docker.sock"]}`, nil},
		{"docker_sock_from_devcontainer", `{}`, dcWith(devcontainer.Mount{Type: "bind", Source: "/var/run/docker.sock", Target: "/var/run/docker.sock"})},
		{"podman_sock_from_devcontainer", `{}`, dcWith(devcontainer.Mount{Type: "bind", Source: "/run/podman/podman.sock", Target: "/var/run/docker.sock"})},
		{"home_from_settings", `{"sandbox-mount": ["~"]}`, nil},
		{"home_from_project_override", `{"projects": {"/home/me/code/api": {"sandbox-mount": ["/home/me:/host-home:ro"]}}}`, nil},
		{"root_from_devcontainer", `{}`, dcWith(devcontainer.Mount{Type: "bind", Source: "/", Target: "/host"})},
		{"target_root_from_settings", `{"sandbox-mount": ["/srv/x:/"]}`, nil},
		{"over_the_project", `{"sandbox-mount": ["/srv/other:/home/me/code/api"]}`, nil},
		{"over_the_relay", `{}`, dcWith(devcontainer.Mount{Type: "volume", Source: "r", Target: "/sandbox/relay/"})},
		{"malformed_settings_mount", `{"sandbox-mount": ["/srv/x:/y:rx"]}`, nil},
		{"project_is_home", `{}`, func(in *project.Input) { in.Project = home }},
		{"project_is_depth_one", `{}`, func(in *project.Input) { in.Project = "/opt" }},
		{"bad_sandbox_image", `{}`, func(in *project.Input) { in.Settings.Image = "x y" }},
	}
	var b strings.Builder
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := input(t, tc.settings)
			if tc.change != nil {
				tc.change(&in)
			}
			_, err := project.Resolve(in)
			if err == nil {
				t.Fatal("Resolve got no error")
			}
			if !errdefs.IsInvalid(err) {
				t.Errorf("Resolve error %v is not ErrInvalid", err)
			}
			fmt.Fprintf(&b, "%s:\n  %v\n", tc.name, err)
		})
	}
	golden(t, "resolve_refusals", b.String())
}

func TestGatewayHost(t *testing.T) {
	for flavor, want := range map[string]string{"docker": "host.docker.internal", "podman": "host.containers.internal", "": "host.docker.internal"} {
		if got := project.GatewayHost(flavor); got != want {
			t.Errorf("GatewayHost(%q) got %q, want %q", flavor, got, want)
		}
	}
}
