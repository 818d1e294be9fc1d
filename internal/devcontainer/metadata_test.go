package devcontainer_test

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/hutchsandbox/hutch/internal/devcontainer"
)

// A label modelled on the official images': a base entry, a feature's
// and the image's own, as the reference CLI writes them.
const label = `[
 {"id": "ghcr.io/devcontainers/features/common-utils:2", "containerEnv": {"A": "base"}},
 {"id": "ghcr.io/devcontainers/features/go:1", "containerEnv": {"GOPATH": "/go", "PATH": "/usr/local/go/bin:/go/bin:${PATH}"},
  "capAdd": ["SYS_PTRACE"], "securityOpt": ["seccomp=unconfined"], "init": true,
  "mounts": [{"source": "dind-var-lib-docker-${devcontainerId}", "target": "/var/lib/docker", "type": "volume"}],
  "postCreateCommand": "echo from-go"},
 {"remoteUser": "vscode", "containerEnv": {"A": "image"}, "image": "ignored", "workspaceFolder": "/ignored",
  "customizations": {"vscode": {}}, "onCreateCommand": ["bash", "-c", "echo ${containerWorkspaceFolder}"]},
 "a string",
 {"remoteEnv": {"X": 1}}
]`

func TestParseMetadata(t *testing.T) {
	v := vars()
	v.DevcontainerID = "id0"
	entries, notes := devcontainer.ParseMetadata(label, v)
	wantNotes := []string{
		"the image's devcontainer.metadata entry 4 is a string, not an object; it is skipped.",
		"the image's devcontainer.metadata remoteEnv `X`: expected a string, got a number",
	}
	if diff := cmp.Diff(wantNotes, notes); diff != "" {
		t.Errorf("notes (-want +got):\n%s", diff)
	}
	if len(entries) != 4 {
		t.Fatalf("got %d entries, want 4", len(entries))
	}
	if got := entries[1].Mounts; len(got) != 1 || got[0].Source != "dind-var-lib-docker-id0" {
		t.Errorf("mounts of the feature entry: %+v", got)
	}
	if got := entries[2].Image; got != "" {
		t.Errorf("an image's metadata set image %q; only the file may", got)
	}

	file, err := devcontainer.Parse(path, []byte(`{"image": "mcr.microsoft.com/devcontainers/go:1", "containerEnv": {"A": "file"},
		"remoteUser": "root", "capAdd": ["NET_ADMIN", "SYS_PTRACE"],
		"mounts": ["source=mine,target=/var/lib/docker,type=volume"], "postCreateCommand": "make"}`), v)
	if err != nil {
		t.Fatal(err)
	}
	got := devcontainer.Merge(append(entries, file)...)
	want := *file
	want.RemoteUser = "root"
	want.ContainerEnv = map[string]string{"A": "file", "GOPATH": "/go", "PATH": "/usr/local/go/bin:/go/bin:${PATH}"}
	want.CapAdd = []string{"SYS_PTRACE", "NET_ADMIN"}
	want.SecurityOpt = []string{"seccomp=unconfined"}
	want.Init = true
	want.Mounts = []devcontainer.Mount{{Type: "volume", Source: "mine", Target: "/var/lib/docker"}}
	want.Lifecycle = map[string][]devcontainer.Lifecycle{
		"onCreateCommand": {{Origin: devcontainer.ImageOrigin, Commands: []devcontainer.Command{{Argv: []string{"bash", "-c", "echo /workspaces/api"}}}}},
		"postCreateCommand": {
			{Origin: "the feature ghcr.io/devcontainers/features/go:1 (in the image's devcontainer.metadata)", Commands: []devcontainer.Command{{Shell: "echo from-go"}}},
			{Origin: "devcontainer.json", Commands: []devcontainer.Command{{Shell: "make"}}},
		},
	}
	if diff := cmp.Diff(&want, got); diff != "" {
		t.Errorf("Merge (-want +got):\n%s", diff)
	}
	// The file's entry is not modified by the merge.
	if file.ContainerEnv["GOPATH"] != "" || len(file.Lifecycle["postCreateCommand"]) != 1 {
		t.Errorf("Merge modified its input: %+v", file)
	}
	// The image's user stands when the file sets none.
	file.RemoteUser = ""
	if got := devcontainer.Merge(append(entries, file)...).RemoteUser; got != "vscode" {
		t.Errorf("RemoteUser = %q, want the image's vscode", got)
	}
}

func TestParseMetadata_Malformed(t *testing.T) {
	for in, want := range map[string]string{
		`{"remoteUser": `: "the image's devcontainer.metadata is not JSON; it is not applied.",
		`"x"`:             "the image's devcontainer.metadata is neither an array nor an object; it is not applied.",
	} {
		entries, notes := devcontainer.ParseMetadata(in, vars())
		if len(entries) != 0 || len(notes) != 1 || notes[0] != want {
			t.Errorf("ParseMetadata(%q) = %v, %q; want no entries and %q", in, entries, notes, want)
		}
	}
	if entries, notes := devcontainer.ParseMetadata(`[1,`, vars()); len(entries) != 0 || len(notes) != 1 {
		t.Errorf("ParseMetadata of a broken array = %v, %q", entries, notes)
	}
	if entries, notes := devcontainer.ParseMetadata(`  `, vars()); entries != nil || notes != nil {
		t.Errorf("an empty label gave %v, %v", entries, notes)
	}
}

func FuzzParseMetadata(f *testing.F) {
	f.Add(label)
	f.Add(`{"remoteUser": "a"}`)
	f.Add(`[{"mounts": [1, "target=/x"]}, null]`)
	f.Fuzz(func(t *testing.T, in string) {
		entries, _ := devcontainer.ParseMetadata(in, vars())
		merged := devcontainer.Merge(entries...)
		if merged != nil && (merged.Image != "" || merged.Build != nil || len(merged.Features) != 0) {
			t.Errorf("an image's metadata set the file's keys: %+v", merged)
		}
	})
}

// An image's label names the feature a lifecycle command came from; one
// whose id holds a direction override (which would make the line read
// as if it came from elsewhere) or a control character is not named.
func TestParseMetadata_HostileFeatureID(t *testing.T) {
	for _, id := range []string{"ghcr.io/x/evil\u202e:1", "a\u2066b", "a\x1b[2Kb", "a\u0085b"} {
		label := `[{"id": ` + quote(id) + `, "postStartCommand": "true"}]`
		entries, _ := devcontainer.ParseMetadata(label, vars())
		if len(entries) != 1 || len(entries[0].Lifecycle["postStartCommand"]) != 1 {
			t.Fatalf("%q: entries %+v", id, entries)
		}
		if got := entries[0].Lifecycle["postStartCommand"][0].Origin; got != devcontainer.ImageOrigin {
			t.Errorf("%q: origin %q, want %q", id, got, devcontainer.ImageOrigin)
		}
	}
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
