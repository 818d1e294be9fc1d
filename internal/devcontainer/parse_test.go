package devcontainer_test

import (
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/hutchsandbox/hutch/internal/devcontainer"
	"github.com/hutchsandbox/hutch/internal/errdefs"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

const (
	path    = "/home/ada/src/api/.devcontainer/devcontainer.json"
	project = "/home/ada/src/api"
)

// vars is a project at /home/ada/src/api with HOME and EMPTY set.
func vars() devcontainer.Vars {
	env := map[string]string{"HOME": "/home/ada", "EMPTY": ""}
	return devcontainer.Vars{
		LocalWorkspaceFolder: project,
		Getenv: func(k string) (string, bool) {
			v, ok := env[k]
			return v, ok
		},
	}
}

func TestParse(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want devcontainer.Config // Path is filled in
	}{
		{
			name: "empty_object",
			in:   `{}`,
		},
		{
			name: "scalars",
			in: `{"name": "api", "image": "golang:1.26", "build": {"dockerfile": "Dockerfile", "context": ".."},
				"workspaceFolder": "/src", "workspaceMount": "type=bind,source=/a,target=/src",
				"containerUser": "root", "remoteUser": "dev", "shutdownAction": "none"}`,
			want: devcontainer.Config{
				Name: "api", Image: "golang:1.26", Dockerfile: "Dockerfile",
				Build:           &devcontainer.Build{Dockerfile: "Dockerfile", Context: ".."},
				WorkspaceFolder: "/src", WorkspaceMount: "type=bind,source=/a,target=/src",
				ContainerUser: "root", RemoteUser: "dev", ShutdownAction: "none",
			},
		},
		{
			name: "legacy_dockerFile",
			in:   `{"dockerFile": "old.Dockerfile"}`,
			want: devcontainer.Config{Dockerfile: "old.Dockerfile", Build: &devcontainer.Build{Dockerfile: "old.Dockerfile"}},
		},
		{
			name: "build_dockerfile_wins_over_legacy_either_order",
			in:   `{"build": {"dockerfile": "new"}, "dockerFile": "old"}`,
			want: devcontainer.Config{Dockerfile: "new", Build: &devcontainer.Build{Dockerfile: "new"}},
		},
		{
			name: "line_and_block_comments",
			in: `// leading line comment
				{
					/* block
					   comment */ "image": "debian", // trailing
					"name": /* inline */ "x"
				}
				// after`,
			want: devcontainer.Config{Image: "debian", Name: "x"},
		},
		{
			name: "comment_markers_inside_strings_are_text",
			in:   `{"image": "reg.example/a//b", "name": "/* not a comment */"}`,
			want: devcontainer.Config{Image: "reg.example/a//b", Name: "/* not a comment */"},
		},
		{
			name: "trailing_commas",
			in:   `{"containerEnv": {"A": "1",}, "mounts": ["target=/x",], "image": "i",}`,
			want: devcontainer.Config{
				Image:        "i",
				ContainerEnv: map[string]string{"A": "1"},
				Mounts:       []devcontainer.Mount{{Type: "volume", Target: "/x"}},
			},
		},
		{
			name: "byte_order_mark",
			in:   "\ufeff{\"image\": \"i\"}",
			want: devcontainer.Config{Image: "i"},
		},
		{
			name: "duplicate_key_last_wins",
			in:   `{"image": "a", "image": "b"}`,
			want: devcontainer.Config{Image: "b"},
		},
		{
			name: "null_scalars_are_unset",
			in:   `{"image": null, "build": null, "containerEnv": null, "mounts": null}`,
		},
		{
			name: "wrong_kinds_are_noted",
			in:   `{"image": 3, "name": true, "build": "Dockerfile", "containerEnv": ["A=1"], "mounts": "target=/x", "remoteUser": {}}`,
			want: devcontainer.Config{Notes: []string{
				"devcontainer.json image: expected a string, got a number",
				"devcontainer.json name: expected a string, got a boolean",
				"devcontainer.json build: expected an object, got a string",
				"devcontainer.json containerEnv: expected an object, got an array",
				"devcontainer.json mounts: expected an array, got a string",
				"devcontainer.json remoteUser: expected a string, got an object",
			}},
		},
		{
			name: "build_dockerfile_wrong_kind",
			in:   `{"build": {"dockerfile": ["a"]}}`,
			want: devcontainer.Config{Notes: []string{"devcontainer.json build.dockerfile: expected a string, got an array"}},
		},
		{
			name: "build_all_fields_and_legacy_context",
			in: `{"build": {"dockerfile": "Dockerfile", "args": {"V": "${localEnv:HOME}", "N": 3}, "target": "dev", "cacheFrom": "x"},
				"context": ".."}`,
			want: devcontainer.Config{
				Dockerfile: "Dockerfile",
				Build:      &devcontainer.Build{Dockerfile: "Dockerfile", Context: "..", Args: map[string]string{"V": "/home/ada"}, Target: "dev"},
				Notes:      []string{"devcontainer.json build.args `N`: expected a string, got a number"},
			},
		},
		{
			name: "build_without_dockerfile_builds_nothing",
			in:   `{"build": {"context": ".."}, "image": "i"}`,
			want: devcontainer.Config{Image: "i"},
		},
		{
			name: "features_in_file_order",
			in: `{"features": {
				"ghcr.io/devcontainers/features/node:1": {"version": "lts", "nodeGypDependencies": false, "n": 3},
				"./local": {},
				"ghcr.io/devcontainers/features/go:1": "1.22",
				"old": true,
				"bad": ["x"],
				"ghcr.io/x/opts:1": {"nested": {"a": 1}, "gone": null},
			}, "overrideFeatureInstallOrder": ["./local", 7]}`,
			want: devcontainer.Config{
				Features: []devcontainer.Feature{
					{ID: "ghcr.io/devcontainers/features/node:1", Options: map[string]string{"version": "lts", "nodeGypDependencies": "false", "n": "3"}},
					{ID: "./local", Options: map[string]string{}},
					{ID: "ghcr.io/devcontainers/features/go:1", Options: map[string]string{"version": "1.22"}},
					{ID: "old", Options: map[string]string{}},
					{ID: "ghcr.io/x/opts:1", Options: map[string]string{}},
				},
				OverrideFeatureInstallOrder: []string{"./local"},
				Notes: []string{
					"devcontainer.json features `bad`: expected an object of options, got an array",
					"devcontainer.json features `ghcr.io/x/opts:1` option `nested`: expected a string, a boolean or a number, got an object",
					"devcontainer.json overrideFeatureInstallOrder: expected strings, got a number",
				},
			},
		},
		{
			name: "lifecycle_three_forms",
			in: `{"postCreateCommand": "npm ci && ${containerWorkspaceFolder}/setup",
				"postStartCommand": ["git", "config", "--global", "safe.directory", "${containerWorkspaceFolder}"],
				"onCreateCommand": {"deps": "make deps", "tools": ["go", "install", "./..."], "none": null, "bad": 1},
				"updateContentCommand": "",
				"postAttachCommand": ["x", 1],
				"initializeCommand": "echo on the host"}`,
			want: devcontainer.Config{Lifecycle: map[string][]devcontainer.Lifecycle{
				"postCreateCommand": {{Origin: "devcontainer.json", Commands: []devcontainer.Command{{Shell: "npm ci && /workspaces/api/setup"}}}},
				"postStartCommand":  {{Origin: "devcontainer.json", Commands: []devcontainer.Command{{Argv: []string{"git", "config", "--global", "safe.directory", "/workspaces/api"}}}}},
				"onCreateCommand": {{Origin: "devcontainer.json", Commands: []devcontainer.Command{
					{Name: "deps", Shell: "make deps"}, {Name: "tools", Argv: []string{"go", "install", "./..."}},
				}}},
				"initializeCommand": {{Origin: "devcontainer.json", Commands: []devcontainer.Command{{Shell: "echo on the host"}}}},
			}, Notes: []string{
				"devcontainer.json onCreateCommand `bad`: expected a string or an array, got a number",
				"devcontainer.json postAttachCommand: expected an array of strings, got a number in it",
			}},
		},
		{
			name: "engine_asks_and_compose",
			in: `{"capAdd": ["SYS_PTRACE"], "securityOpt": ["seccomp=unconfined"], "privileged": true, "init": true,
				"updateRemoteUserUID": false, "dockerComposeFile": ["../docker-compose.yml", "compose.dev.yml"], "service": "app"}`,
			want: devcontainer.Config{
				CapAdd: []string{"SYS_PTRACE"}, SecurityOpt: []string{"seccomp=unconfined"}, Privileged: true, Init: true,
				UpdateRemoteUserUID: "false", ComposeFiles: []string{"../docker-compose.yml", "compose.dev.yml"}, Service: "app",
			},
		},
		{
			name: "compose_file_as_a_string",
			in:   `{"dockerComposeFile": "docker-compose.yml", "privileged": "yes"}`,
			want: devcontainer.Config{ComposeFiles: []string{"docker-compose.yml"}, Notes: []string{"devcontainer.json privileged: expected a boolean, got a string"}},
		},
		{
			name: "env",
			in:   `{"containerEnv": {"B": "2", "A": "1"}, "remoteEnv": {"PATH": "/x:${localEnv:PATH:/usr/bin}", "GONE": null}}`,
			want: devcontainer.Config{
				ContainerEnv: map[string]string{"A": "1", "B": "2"},
				RemoteEnv:    map[string]string{"PATH": "/x:/usr/bin"},
			},
		},
		{
			name: "env_non_strings_noted_in_file_order",
			in:   `{"containerEnv": {"N": 1, "OK": "y", "NULL": null}, "remoteEnv": {"B": false, "A": {"x": 1}, "U": null}}`,
			want: devcontainer.Config{
				ContainerEnv: map[string]string{"OK": "y"},
				Notes: []string{
					"devcontainer.json containerEnv `N`: expected a string, got a number",
					"devcontainer.json containerEnv `NULL`: expected a string, got null",
					"devcontainer.json remoteEnv `B`: expected a string, got a boolean",
					"devcontainer.json remoteEnv `A`: expected a string, got an object",
				},
			},
		},
		{
			name: "ignored_sorted",
			in: `{"runArgs": ["--privileged"], "waitFor": "postCreateCommand", "customizations": {"vscode": {}},
				"forwardPorts": [8080], "userEnvProbe": "none", "unknownKey": 1, "$schema": "x", "appPort": 3000}`,
			want: devcontainer.Config{Ignored: []string{"appPort", "customizations", "forwardPorts", "runArgs", "userEnvProbe", "waitFor"}},
		},
		{
			name: "mount_string_forms",
			in: `{"mounts": [
				"source=/home/ada/.ssh,target=/home/dev/.ssh,type=bind,readonly",
				"target=/cache, src=go-cache ,type=volume,consistency=cached",
				"dst=/data,type=bind,source=/srv/data,ro=false",
				"TYPE=BIND,Source=/a,Destination=/b,RO",
				"source=/a,target=/b,readonly=true",
				"source=/a,target=/b,readonly=0",
				"source=/a,target=/b,ro=FALSE",
				"source=/a,target=/b,readonly=",
				"type=volume,target=/anon",
				"source=named,target=/n",
			]}`,
			want: devcontainer.Config{Mounts: []devcontainer.Mount{
				{Type: "bind", Source: "/home/ada/.ssh", Target: "/home/dev/.ssh", ReadOnly: true},
				{Type: "volume", Source: "go-cache", Target: "/cache"},
				{Type: "bind", Source: "/srv/data", Target: "/data"},
				{Type: "bind", Source: "/a", Target: "/b", ReadOnly: true},
				{Type: "bind", Source: "/a", Target: "/b", ReadOnly: true},
				{Type: "bind", Source: "/a", Target: "/b"},
				{Type: "bind", Source: "/a", Target: "/b"},
				{Type: "bind", Source: "/a", Target: "/b", ReadOnly: true},
				{Type: "volume", Target: "/anon"},
				{Type: "volume", Source: "named", Target: "/n"},
			}},
		},
		{
			name: "mount_object_form",
			in: `{"mounts": [
				{"type": "bind", "source": "${localWorkspaceFolder}/.cache", "target": "/cache"},
				{"type": "volume", "source": "vol", "target": "/v"},
				{"type": "volume", "target": "/anon"},
				{"source": "/abs", "target": "/t"},
			]}`,
			want: devcontainer.Config{Mounts: []devcontainer.Mount{
				{Type: "bind", Source: "/home/ada/src/api/.cache", Target: "/cache"},
				{Type: "volume", Source: "vol", Target: "/v"},
				{Type: "volume", Target: "/anon"},
				{Type: "bind", Source: "/abs", Target: "/t"},
			}},
		},
		{
			name: "bad_mounts_become_notes",
			in: `{"mounts": [
				"source=/a",
				"source=/a,target=relative",
				"type=bind,target=/t",
				"type=tmpfs,target=/tmp",
				"",
				{"type": "bind", "source": "/a"},
				{"type": "bind", "source": 1, "target": "/t"},
				{"type": "npipe", "source": "x", "target": "/t"},
				42,
				null,
				"source=/ok,target=/ok",
			]}`,
			want: devcontainer.Config{
				Mounts: []devcontainer.Mount{{Type: "bind", Source: "/ok", Target: "/ok"}},
				Notes: []string{
					"devcontainer.json mounts `source=/a`: no target",
					"devcontainer.json mounts `source=/a,target=relative`: target `relative` is not an absolute path",
					"devcontainer.json mounts `type=bind,target=/t`: bind mount has no source",
					"devcontainer.json mounts `type=tmpfs,target=/tmp`: unknown type `tmpfs` (bind|volume)",
					"devcontainer.json mounts ``: no target",
					"devcontainer.json mounts `{\"type\":\"bind\",\"source\":\"/a\"}`: no target",
					"devcontainer.json mounts `{\"type\":\"bind\",\"source\":1,\"target\":\"/t\"}`: source is a number, not a string",
					"devcontainer.json mounts `{\"type\":\"npipe\",\"source\":\"x\",\"target\":\"/t\"}`: unknown type `npipe` (bind|volume)",
					"devcontainer.json mounts `42`: expected a string or an object",
					"devcontainer.json mounts `null`: expected a string or an object",
				},
			},
		},
		{
			name: "local_variables",
			in: `{"image": "${localWorkspaceFolderBasename}:dev", "workspaceMount": "source=${localWorkspaceFolder},target=${localWorkspaceFolder},type=bind",
				"workspaceFolder": "${localWorkspaceFolder}"}`,
			want: devcontainer.Config{
				Image:           "api:dev",
				WorkspaceMount:  "source=/home/ada/src/api,target=/home/ada/src/api,type=bind",
				WorkspaceFolder: "/home/ada/src/api",
			},
		},
		{
			name: "container_folder_default",
			in:   `{"containerEnv": {"W": "${containerWorkspaceFolder}", "B": "${containerWorkspaceFolderBasename}"}}`,
			want: devcontainer.Config{ContainerEnv: map[string]string{"W": "/workspaces/api", "B": "api"}},
		},
		{
			name: "container_folder_from_workspaceFolder_set_after_use",
			in: `{"mounts": ["source=cache,target=${containerWorkspaceFolder}/.cache"],
				"containerEnv": {"B": "${containerWorkspaceFolderBasename}"},
				"workspaceFolder": "${localEnv:HOME}/${localWorkspaceFolderBasename}-src"}`,
			want: devcontainer.Config{
				WorkspaceFolder: "/home/ada/api-src",
				ContainerEnv:    map[string]string{"B": "api-src"},
				Mounts:          []devcontainer.Mount{{Type: "volume", Source: "cache", Target: "/home/ada/api-src/.cache"}},
			},
		},
		{
			name: "workspaceFolder_keeps_container_variables",
			in:   `{"workspaceFolder": "${containerWorkspaceFolder}/x", "image": "${containerWorkspaceFolder}"}`,
			want: devcontainer.Config{
				WorkspaceFolder: "${containerWorkspaceFolder}/x",
				Image:           "${containerWorkspaceFolder}/x",
			},
		},
		{
			name: "local_env",
			in: `{"containerEnv": {
				"SET": "${localEnv:HOME}",
				"ALIAS": "${env:HOME}/bin",
				"SET_WITH_DEFAULT": "${localEnv:HOME:/nope}",
				"SET_EMPTY": "x${localEnv:EMPTY:default}x",
				"UNSET": "x${localEnv:NOPE}x",
				"UNSET_DEFAULT": "${localEnv:NOPE:fallback}",
				"DEFAULT_STOPS_AT_COLON": "${localEnv:NOPE:a:b}",
				"TWO": "${localEnv:HOME}${localEnv:HOME}",
			}}`,
			want: devcontainer.Config{ContainerEnv: map[string]string{
				"SET":                    "/home/ada",
				"ALIAS":                  "/home/ada/bin",
				"SET_WITH_DEFAULT":       "/home/ada",
				"SET_EMPTY":              "xx",
				"UNSET":                  "xx",
				"UNSET_DEFAULT":          "fallback",
				"DEFAULT_STOPS_AT_COLON": "a",
				"TWO":                    "/home/ada/home/ada",
			}},
		},
		{
			name: "unknown_variables_kept",
			in: `{"containerEnv": {
				"ID": "${devcontainerId}",
				"CE": "${containerEnv:PATH}",
				"TYPO": "${localWorkspacefolder}",
				"UNCLOSED": "${localWorkspaceFolder",
				"DOLLAR": "$HOME and ${ }",
				"BARE": "${localEnv}",
			}}`,
			want: devcontainer.Config{ContainerEnv: map[string]string{
				"ID":       "${devcontainerId}",
				"CE":       "${containerEnv:PATH}",
				"TYPO":     "${localWorkspacefolder}",
				"UNCLOSED": "${localWorkspaceFolder",
				"DOLLAR":   "$HOME and ${ }",
				"BARE":     "${localEnv}",
			}},
		},
		{
			name: "substituted_values_are_not_rescanned",
			in:   `{"remoteUser": "${localEnv:LOOP}"}`,
			want: devcontainer.Config{RemoteUser: "${localWorkspaceFolder}"},
		},
		{
			name: "users_and_mount_fields_substituted",
			in: `{"containerUser": "${localEnv:NOPE:root}", "remoteUser": "${localWorkspaceFolderBasename}",
				"mounts": ["type=bind,source=${localEnv:HOME}/.gitconfig,target=${containerWorkspaceFolder}/../.gitconfig,readonly"]}`,
			want: devcontainer.Config{
				ContainerUser: "root",
				RemoteUser:    "api",
				Mounts:        []devcontainer.Mount{{Type: "bind", Source: "/home/ada/.gitconfig", Target: "/workspaces/api/../.gitconfig", ReadOnly: true}},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := vars()
			if tt.name == "substituted_values_are_not_rescanned" {
				v.Getenv = func(string) (string, bool) { return "${localWorkspaceFolder}", true }
			}
			got, err := devcontainer.Parse(path, []byte(tt.in), v)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			want := tt.want
			want.Path, want.Dir = path, filepath.Dir(path)
			if diff := cmp.Diff(&want, got); diff != "" {
				t.Errorf("Parse(%s) mismatch (-want +got):\n%s", tt.in, diff)
			}
		})
	}
}

func TestParse_NilGetenvAndNoFolder(t *testing.T) {
	got, err := devcontainer.Parse("d.json", []byte(`{"image": "${localEnv:HOME:x}${localWorkspaceFolderBasename}", "containerEnv": {"W": "${containerWorkspaceFolder}"}}`), devcontainer.Vars{})
	if err != nil {
		t.Fatal(err)
	}
	want := &devcontainer.Config{Path: "d.json", Image: "x", ContainerEnv: map[string]string{"W": "/workspaces"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Parse mismatch (-want +got):\n%s", diff)
	}
}

func TestParse_Errors(t *testing.T) {
	const multi = `{
  // a comment
  "name": "api",
  "image": "debian",
  "mounts": ["a" "b"],
}`
	tests := []struct {
		name string
		in   string
		want string
	}{
		{"empty", ``, "d.json: line 1, column 1: parsing value: unexpected EOF"},
		{"line_1", `{"image": tru}`, "d.json: line 1, column 11: invalid literal: tru"},
		{"line_5", multi, `d.json: line 5, column 18: invalid character '"' after array value (expecting ',' or ']')`},
		{"line_after_block_comment", "{\n/*\n\n*/\n\"a\": 1\n\"b\": 2}", `d.json: line 6, column 1: invalid character '"' after object value (expecting ',' or '}')`},
		{"unterminated_object", "{\n\"a\": 1,\n", "d.json: line 3, column 1: parsing value: unexpected EOF"},
		{"unterminated_comment", "{\n/* x", "d.json: line 2, column 1: parsing comment: unexpected EOF"},
		{"double_comma", `{"a": 1,,}`, "d.json: line 1, column 9: invalid character ',' at start of value"},
		{"after_top_level", "{}\n{}", "d.json: line 2, column 1: invalid character '{' after top-level value"},
		{"too_deep", "{\"a\":\n" + strings.Repeat("[", 2_000_000), "d.json: line 2, column 1000: nested deeper than 1000 levels"},
		{"too_deep_objects", strings.Repeat(`{"a":`, 1001), "d.json: line 1, column 5001: nested deeper than 1000 levels"},
		{"array", `[{"image": "x"}]`, "d.json: expected a { ... } object"},
		{"string", `"image"`, "d.json: expected a { ... } object"},
		{"null", `null`, "d.json: expected a { ... } object"},
		{"commented_out", `// {}`, "d.json: line 1, column 6: parsing value: unexpected EOF"},
		{"eof_on_last_line_without_newline", "{\n\"a\": 1", "d.json: line 2, column 7: parsing object after value: unexpected EOF"},
		{"eof_on_last_line_with_newline", "{\n\"a\": 1\n", "d.json: line 3, column 1: parsing object after value: unexpected EOF"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := devcontainer.Parse("d.json", []byte(tt.in), vars())
			if err == nil {
				t.Fatalf("Parse(%q) = %+v, want error %q", tt.in, got, tt.want)
			}
			if err.Error() != tt.want {
				t.Errorf("Parse(%q) error got %q, want %q", tt.in, err, tt.want)
			}
			if !errors.Is(err, errdefs.ErrInvalid) {
				t.Errorf("Parse(%q) error %v is not of class ErrInvalid", tt.in, err)
			}
		})
	}
}

func TestParse_DoesNotModifyInput(t *testing.T) {
	in := []byte("{// c\n\"image\": \"i\",}")
	orig := string(in)
	if _, err := devcontainer.Parse("d.json", in, vars()); err != nil {
		t.Fatal(err)
	}
	if string(in) != orig {
		t.Errorf("Parse changed its input to %q", in)
	}
}

func TestConfig_IdentityMapped(t *testing.T) {
	tests := []struct {
		name            string
		workspaceFolder string
		project         string
		want            bool
	}{
		{"same", "/home/ada/src/api", "/home/ada/src/api", true},
		{"cleaned", "/home/ada/src/api/", "/home/ada//src/./api", true},
		{"default_location", "/workspaces/api", "/home/ada/src/api", false},
		{"unset", "", "/home/ada/src/api", false},
		{"unset_and_empty_project", "", "", false},
		{"parent", "/home/ada/src", "/home/ada/src/api", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &devcontainer.Config{WorkspaceFolder: tt.workspaceFolder}
			if got := c.IdentityMapped(tt.project); got != tt.want {
				t.Errorf("Config{WorkspaceFolder: %q}.IdentityMapped(%q) got %v, want %v", tt.workspaceFolder, tt.project, got, tt.want)
			}
		})
	}
}

func TestConfig_IdentityMappedFromParse(t *testing.T) {
	// The snippet hutch's docs recommend.
	in := `{"workspaceMount": "source=${localWorkspaceFolder},target=${localWorkspaceFolder},type=bind",
		"workspaceFolder": "${localWorkspaceFolder}", "shutdownAction": "none"}`
	c, err := devcontainer.Parse(path, []byte(in), vars())
	if err != nil {
		t.Fatal(err)
	}
	if !c.IdentityMapped(project) {
		t.Errorf("IdentityMapped(%q) = false for workspaceFolder %q, want true", project, c.WorkspaceFolder)
	}
}

func TestFind(t *testing.T) {
	tests := []struct {
		name    string
		present []string
		want    string
		wantOK  bool
	}{
		{"none", nil, "", false},
		{"all", devcontainer.Candidates, ".devcontainer/devcontainer.json", true},
		{"root_file_before_jsonc", []string{".devcontainer/devcontainer.jsonc", ".devcontainer.json"}, ".devcontainer.json", true},
		{"jsonc_only", []string{".devcontainer/devcontainer.jsonc"}, ".devcontainer/devcontainer.jsonc", true},
		{"unrelated", []string{".devcontainer/python/devcontainer.json"}, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var asked []string
			exists := func(rel string) bool {
				asked = append(asked, rel)
				for _, p := range tt.present {
					if p == rel {
						return true
					}
				}
				return false
			}
			got, ok := devcontainer.Find(exists)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("Find with %v got (%q, %v), want (%q, %v)", tt.present, got, ok, tt.want, tt.wantOK)
			}
			if !tt.wantOK && !cmp.Equal(asked, devcontainer.Candidates) {
				t.Errorf("Find asked %v, want every candidate in order %v", asked, devcontainer.Candidates)
			}
		})
	}
}

// TestParse_Golden parses a realistic file and pins the whole Config.
func TestParse_Golden(t *testing.T) {
	in, err := os.ReadFile(filepath.Join("testdata", "devcontainer.json"))
	if err != nil {
		t.Fatal(err)
	}
	v := vars()
	env := map[string]string{"HOME": "/home/ada", "GOPROXY": "https://proxy.golang.org"}
	v.Getenv = func(k string) (string, bool) {
		val, ok := env[k]
		return val, ok
	}
	c, err := devcontainer.Parse(path, in, v)
	if err != nil {
		t.Fatal(err)
	}
	got, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	golden := filepath.Join("testdata", "devcontainer.golden")
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("Parse(testdata/devcontainer.json) mismatch (-want +got):\n%s", diff)
	}
}

func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		``,
		`{}`,
		`[]`,
		"{// c\n\"image\": \"i\", /* b */}",
		`{"mounts": ["type=bind,source=/a,target=/b,ro", {"type": "volume", "target": "/v"}, 1, ""]}`,
		`{"containerEnv": {"A": "${localEnv:A:d}", "B": 1}, "remoteEnv": {"C": null}}`,
		`{"workspaceFolder": "${containerWorkspaceFolder}${localWorkspaceFolder}", "image": "${", "name": "${}"}`,
		`{"build": {"dockerfile": 1}, "dockerFile": "x", "features": {}, "runArgs": [],}`,
		"\ufeff{\"a\": \"\xff\"}",
		`{"a": "[[[{{{", "b": /* [[[ */ 1, // [[[
		"c": [[[]]]}`,
		`{"a": 1 "b": 2}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		const p = "fuzz/devcontainer.json"
		c, err := devcontainer.Parse(p, data, vars())
		if err != nil {
			if !strings.HasPrefix(err.Error(), p+": ") {
				t.Errorf("Parse error %q does not start with the path", err)
			}
			if c != nil {
				t.Errorf("Parse returned a Config with error %v", err)
			}
			return
		}
		if c == nil || c.Path != p {
			t.Fatalf("Parse returned %+v with no error", c)
		}
		for _, m := range c.Mounts {
			if (m.Type != "bind" && m.Type != "volume") || !strings.HasPrefix(m.Target, "/") {
				t.Errorf("Parse accepted mount %+v", m)
			}
		}
	})
}

func TestParse_DepthLimit(t *testing.T) {
	deep := func(n int) string { return `{"a":` + strings.Repeat("[", n-1) + strings.Repeat("]", n-1) + "}" }
	if _, err := devcontainer.Parse("d.json", []byte(deep(1000)), vars()); err != nil {
		t.Errorf("Parse of 1000 levels: %v", err)
	}
	if _, err := devcontainer.Parse("d.json", []byte(deep(1001)), vars()); err == nil {
		t.Errorf("Parse of 1001 levels succeeded, want an error")
	}
	// Brackets in strings and comments do not count.
	brackets := strings.Repeat("[", 2000)
	in := `{"a": "` + brackets + `", /* ` + brackets + ` */ "b": "\"` + brackets + `"} // ` + brackets
	if _, err := devcontainer.Parse("d.json", []byte(in), vars()); err != nil {
		t.Errorf("Parse with brackets in strings and comments: %v", err)
	}
}
