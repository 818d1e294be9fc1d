package devcontainer_test

import (
	"testing"

	"github.com/hutchsandbox/hutch/internal/devcontainer"
)

// TestID pins ${devcontainerId} to values the reference algorithm gives
// (computed with Node: JSON.stringify with sorted keys, SHA-256, BigInt
// in base 32, padded to 52), including characters Go's JSON encoder
// would escape and JavaScript's does not.
func TestID(t *testing.T) {
	tests := []struct {
		labels map[string]string
		want   string
	}{
		{
			// Checked against the reference CLI itself: the id it gave a
			// container labelled so.
			map[string]string{
				"devcontainer.local_folder": "/tmp/dc1",
				"devcontainer.config_file":  "/tmp/dc1/.devcontainer/devcontainer.json",
			},
			"08b2rn2g1uvptejnr4l3mg9mrheuro35g9g0a973b4pm2jrf8be1",
		},
		{
			map[string]string{
				"devcontainer.local_folder": "/home/ada/src/api",
				"devcontainer.config_file":  "/home/ada/src/api/.devcontainer/devcontainer.json",
			},
			"1k9rr7tcks5pq43dtrparfgvpjqn3cmd0q5cl34tt1pe5mvgbbir",
		},
		{
			map[string]string{
				"devcontainer.local_folder": "/a<b>&c\u2028é",
				"devcontainer.config_file":  `/x"y`,
			},
			"1v9hsmkq0gve54nqu9p997cbm8l2k9e2hr5kv6a3f5sl1n2erqjm",
		},
	}
	for _, tt := range tests {
		if got := devcontainer.ID(tt.labels); got != tt.want {
			t.Errorf("ID(%v) = %s, want %s", tt.labels, got, tt.want)
		}
	}
}

func TestParse_DevcontainerID(t *testing.T) {
	v := vars()
	in := []byte(`{"mounts": ["source=claude-${devcontainerId},target=/home/node/.claude,type=volume"]}`)
	c, err := devcontainer.Parse(path, in, v)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Mounts[0].Source; got != "claude-${devcontainerId}" {
		t.Errorf("without an id the variable is kept, got %q", got)
	}
	v.DevcontainerID = "0abc"
	if c, err = devcontainer.Parse(path, in, v); err != nil {
		t.Fatal(err)
	}
	if got := c.Mounts[0].Source; got != "claude-0abc" {
		t.Errorf("Source = %q, want claude-0abc", got)
	}
}

func TestExpandContainerEnv(t *testing.T) {
	env := map[string]string{"PATH": "/usr/local/go/bin:/usr/bin", "EMPTY": ""}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	tests := map[string]string{
		"${containerEnv:PATH}:/workspaces/x/bin": "/usr/local/go/bin:/usr/bin:/workspaces/x/bin",
		"${containerEnv:NOPE}":                   "",
		"${containerEnv:NOPE:fallback}":          "fallback",
		"x${containerEnv:EMPTY:d}x":              "xx",
		"${localEnv:HOME} ${containerEnv}":       "${localEnv:HOME} ${containerEnv}",
		"${containerEnv:PATH":                    "${containerEnv:PATH",
	}
	for in, want := range tests {
		if got := devcontainer.ExpandContainerEnv(in, lookup); got != want {
			t.Errorf("ExpandContainerEnv(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestParse_MountedWorkspaceFolder: where the caller mounts the project
// is what ${containerWorkspaceFolder} means, whatever the file's
// workspaceFolder says; the file's own value is kept for the caller to
// compare.
func TestParse_MountedWorkspaceFolder(t *testing.T) {
	v := vars()
	v.ContainerWorkspaceFolder = project
	c, err := devcontainer.Parse(path, []byte(`{"workspaceFolder": "/workspace",
		"mounts": ["source=nm,target=${containerWorkspaceFolder}/node_modules,type=volume"],
		"containerEnv": {"B": "${containerWorkspaceFolderBasename}"}}`), v)
	if err != nil {
		t.Fatal(err)
	}
	if c.WorkspaceFolder != "/workspace" || c.Mounts[0].Target != project+"/node_modules" || c.ContainerEnv["B"] != "api" {
		t.Errorf("got workspaceFolder %q, mount target %q, basename %q", c.WorkspaceFolder, c.Mounts[0].Target, c.ContainerEnv["B"])
	}
}
