package features_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/hutchsandbox/hutch/internal/devcontainer"
	"github.com/hutchsandbox/hutch/internal/devcontainer/features"
	"github.com/hutchsandbox/hutch/internal/errdefs"
)

// nodeFeature is shaped like the published node feature's metadata, with
// a comment and a trailing comma as the reference CLI tolerates.
const nodeFeature = `{
	// The node feature.
	"id": "node",
	"version": "1.6.1",
	"name": "Node.js (via nvm), yarn and pnpm",
	"options": {
		"version": {"type": "string", "proposals": ["lts", "latest", "none", "18"], "default": "lts", "description": "Node.js version"},
		"nodeGypDependencies": {"type": "boolean", "default": true},
		"nvmInstallPath": {"type": "string", "default": "/usr/local/share/nvm"},
		"pnpmVersion": {"type": "string", "enum": ["latest", "none", "8.8.0"], "default": "latest"},
	},
	"containerEnv": {"NVM_DIR": "/usr/local/share/nvm", "PATH": "/usr/local/share/nvm/current/bin:${PATH}"},
	"customizations": {"vscode": {"extensions": ["dbaeumer.vscode-eslint"]}},
	"installsAfter": ["ghcr.io/devcontainers/features/common-utils", "ghcr.io/devcontainers/features/python"],
	"dependsOn": {"ghcr.io/devcontainers/features/common-utils:2": {"installZsh": false, "username": "node"}, "./local-dep": "1.2"},
	"mounts": [{"source": "dind-${devcontainerId}", "target": "/var/lib/docker", "type": "volume"}, "type=bind,source=/tmp,target=/host-tmp,readonly"],
	"init": true,
	"privileged": false,
	"capAdd": ["SYS_PTRACE"],
	"securityOpt": ["seccomp=unconfined"],
	"entrypoint": "/usr/local/share/docker-init.sh",
	"legacyIds": ["nodejs"],
	"postCreateCommand": "nvm --version",
	"postStartCommand": ["node", "--version"],
	"postAttachCommand": {"a": "echo a", "b": ["echo", "b"], "empty": ""},
}`

func TestParseMetadata(t *testing.T) {
	md, err := features.ParseMetadata("ghcr.io/devcontainers/features/node:1", []byte(nodeFeature))
	if err != nil {
		t.Fatal(err)
	}
	origin := "feature ghcr.io/devcontainers/features/node:1"
	want := &features.Metadata{
		ID: "node", Version: "1.6.1", Name: "Node.js (via nvm), yarn and pnpm",
		Options: []features.Option{
			{ID: "version", Type: "string", Description: "Node.js version", Default: "lts", HasDefault: true, Proposals: []string{"lts", "latest", "none", "18"}},
			{ID: "nodeGypDependencies", Type: "boolean", Default: "true", HasDefault: true},
			{ID: "nvmInstallPath", Type: "string", Default: "/usr/local/share/nvm", HasDefault: true},
			{ID: "pnpmVersion", Type: "string", Default: "latest", HasDefault: true, Enum: []string{"latest", "none", "8.8.0"}},
		},
		ContainerEnv: map[string]string{"NVM_DIR": "/usr/local/share/nvm", "PATH": "/usr/local/share/nvm/current/bin:${PATH}"},
		Mounts: []devcontainer.Mount{
			{Type: "volume", Source: "dind-${devcontainerId}", Target: "/var/lib/docker"},
			{Type: "bind", Source: "/tmp", Target: "/host-tmp", ReadOnly: true},
		},
		Init: true, CapAdd: []string{"SYS_PTRACE"}, SecurityOpt: []string{"seccomp=unconfined"},
		Entrypoint:    "/usr/local/share/docker-init.sh",
		InstallsAfter: []string{"ghcr.io/devcontainers/features/common-utils", "ghcr.io/devcontainers/features/python"},
		DependsOn: []devcontainer.Feature{
			{ID: "ghcr.io/devcontainers/features/common-utils:2", Options: map[string]string{"installZsh": "false", "username": "node"}},
			{ID: "./local-dep", Options: map[string]string{"version": "1.2"}},
		},
		Lifecycle: map[string]devcontainer.Lifecycle{
			"postCreateCommand": {Origin: origin, Commands: []devcontainer.Command{{Shell: "nvm --version"}}},
			"postStartCommand":  {Origin: origin, Commands: []devcontainer.Command{{Argv: []string{"node", "--version"}}}},
			"postAttachCommand": {Origin: origin, Commands: []devcontainer.Command{{Name: "a", Shell: "echo a"}, {Name: "b", Argv: []string{"echo", "b"}}}},
		},
		LegacyIDs:      []string{"nodejs"},
		Customizations: json.RawMessage(`{"vscode":{"extensions":["dbaeumer.vscode-eslint"]}}`),
	}
	if diff := cmp.Diff(want, md, cmpopts.IgnoreFields(features.Metadata{}, "Raw")); diff != "" {
		t.Errorf("ParseMetadata (-want +got):\n%s", diff)
	}
	// Raw is plain JSON: the comment and trailing comma are gone, and it
	// holds every property, known or not.
	var raw map[string]any
	if err := json.Unmarshal(md.Raw, &raw); err != nil {
		t.Fatalf("Raw is not JSON: %v\n%s", err, md.Raw)
	}
	if raw["id"] != "node" || raw["entrypoint"] != "/usr/local/share/docker-init.sh" {
		t.Errorf("Raw = %s", md.Raw)
	}
	if o, ok := md.Option("pnpmVersion"); !ok || o.Default != "latest" {
		t.Errorf("Option(pnpmVersion) = %+v, %v", o, ok)
	}
	if _, ok := md.Option("nope"); ok {
		t.Error("Option(nope) found")
	}
}

func TestParseMetadata_Notes(t *testing.T) {
	tests := []struct {
		name  string
		in    string
		notes []string
	}{
		{"missing_id", `{"version": "1"}`, []string{"feature f: devcontainer-feature.json id: missing; the spec requires the feature's id"}},
		{"wrong_kinds", `{"id": 1, "init": "yes", "capAdd": "SYS_ADMIN", "containerEnv": {"A": 1}, "options": {"x": "y", "": {}}}`, []string{
			"feature f: devcontainer-feature.json id: expected a string, got a number",
			"feature f: devcontainer-feature.json init: expected a boolean, got a string",
			"feature f: devcontainer-feature.json capAdd: expected an array of strings, got a string",
			"feature f: devcontainer-feature.json containerEnv `A`: expected a string, got a number; it is left out",
			"feature f: devcontainer-feature.json options.x: expected an object, got a string; the option is left out",
			"feature f: devcontainer-feature.json options: an option has an empty id; it is left out",
			"feature f: devcontainer-feature.json id: missing; the spec requires the feature's id",
		}},
		{"bad_option_type", `{"id": "f", "options": {"n": {"type": "number", "default": 3}}}`, []string{
			`feature f: devcontainer-feature.json options.n.type: "number" is not one of the spec's types (string, boolean); its value is passed as text`,
		}},
		{"bad_mount", `{"id": "f", "mounts": [{"source": "x"}, "type=tmpfs,target=/x", 3]}`, []string{
			"feature f: devcontainer-feature.json mounts `{\"source\":\"x\"}`: no target; it is left out",
			"feature f: devcontainer-feature.json mounts `\"type=tmpfs,target=/x\"`: unknown type \"tmpfs\" (bind|volume); it is left out",
			"feature f: devcontainer-feature.json mounts `3`: expected a string or an object, got a number; it is left out",
		}},
		{"bad_lifecycle", `{"id": "f", "onCreateCommand": 3, "postCreateCommand": {"x": 1}}`, []string{
			"feature f: devcontainer-feature.json onCreateCommand: expected a string or an array, got a number; it is left out",
			`feature f: devcontainer-feature.json postCreateCommand: command "x": expected a string or an array, got a number; it is left out`,
		}},
		{"bad_lifecycle_argv", `{"id": "f", "onCreateCommand": ["a", null], "postCreateCommand": {"x": "ok", "y": ["b", 1]}}`, []string{
			"feature f: devcontainer-feature.json onCreateCommand: expected an array of strings, got null in it; it is left out",
			`feature f: devcontainer-feature.json postCreateCommand: command "y": expected an array of strings, got a number in it; it is left out`,
		}},
		{"bad_depends_on", `{"id": "f", "dependsOn": {"ghcr.io/a/b:1": [1], "ghcr.io/a/c:1": {"o": {}}}}`, []string{
			"feature f: devcontainer-feature.json dependsOn `ghcr.io/a/b:1`: expected an object of options, got an array; its defaults are used",
			"feature f: devcontainer-feature.json dependsOn `ghcr.io/a/c:1` option o: expected a string or a boolean, got an object; it is left out",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			md, err := features.ParseMetadata("f", []byte(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.notes, md.Notes); diff != "" {
				t.Errorf("notes (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseMetadata_Errors(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"not_json", `{"id": `, "feature f: devcontainer-feature.json: "},
		{"array", `[1]`, "feature f: devcontainer-feature.json: expected a { ... } object"},
		{"deep", strings.Repeat("[", 5000) + strings.Repeat("]", 5000), "nested deeper than 200 levels"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := features.ParseMetadata("f", []byte(tt.in))
			if err == nil || !strings.Contains(err.Error(), tt.want) || !errdefs.IsInvalid(err) {
				t.Fatalf("ParseMetadata: %v, want an invalid error containing %q", err, tt.want)
			}
		})
	}
}

func FuzzParseMetadata(f *testing.F) {
	f.Add([]byte(nodeFeature))
	f.Add([]byte(`{"id":"x","options":{"a":{"default":true}},"dependsOn":{"./y":"1"}}`))
	f.Add([]byte(`/* c */ {"mounts": ["type=bind,src=/a,dst=/b"], "postCreateCommand": {"x": ["a"]}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		md, err := features.ParseMetadata("f", data)
		if err != nil {
			if !errdefs.IsInvalid(err) {
				t.Fatalf("error of class %s: %v", errdefs.Code(err), err)
			}
			return
		}
		if !json.Valid(md.Raw) {
			t.Fatalf("Raw is not JSON: %q", md.Raw)
		}
		for _, m := range md.Mounts {
			if m.Target == "" || m.Target[0] != '/' {
				t.Fatalf("mount without an absolute target: %+v", m)
			}
		}
	})
}
