package features_test

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/hutchsandbox/hutch/internal/devcontainer/features"
	"github.com/hutchsandbox/hutch/internal/errdefs"
)

// resolved makes a planned feature of files (written to a folder of the
// test's) with the options given.
func resolved(t *testing.T, id string, files map[string]string, options map[string]string) *features.Resolved {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		mode := os.FileMode(0o644)
		if strings.HasSuffix(name, ".sh") {
			mode = 0o755
		}
		if err := os.WriteFile(p, []byte(body), mode); err != nil {
			t.Fatal(err)
		}
	}
	md, err := features.ParseMetadata(id, []byte(files["devcontainer-feature.json"]))
	if err != nil {
		t.Fatal(err)
	}
	env, _, err := features.OptionEnv(id, md, options)
	if err != nil {
		t.Fatal(err)
	}
	_, hasInstall := files["install.sh"]
	return &features.Resolved{
		Ref: mustRef(t, id), Options: options, Env: env,
		Fetched: &features.Fetched{Dir: dir, Metadata: md, HasInstall: hasInstall},
	}
}

func TestDockerfile(t *testing.T) {
	node := resolved(t, "ghcr.io/devcontainers/features/node:1", map[string]string{
		"devcontainer-feature.json": `{"id": "node", "options": {"version": {"type": "string", "default": "lts"}},
			"containerEnv": {"NVM_DIR": "/usr/local/share/nvm", "PATH": "/usr/local/share/nvm/current/bin:${PATH}", "Q": "say \"hi\" \\ $(id) ` + "`id`" + `"},
			"postCreateCommand": "nvm use", "mounts": ["type=volume,source=x-${devcontainerId},target=/x"], "privileged": true, "customizations": {"vscode": {"extensions": ["a"]}}}`,
		"install.sh": "#!/bin/sh\n",
	}, map[string]string{"version": "20"})
	meta := resolved(t, "./meta-only", map[string]string{
		"devcontainer-feature.json": `{"id": "meta-only", "containerEnv": {"ONLY": "env"}, "init": true}`,
	}, nil)
	b := features.Build{
		Base: "mcr.microsoft.com/devcontainers/base:bookworm", ImageUser: "vscode",
		BaseMetadata:   []json.RawMessage{json.RawMessage(`{"remoteUser": "vscode"}`)},
		ConfigMetadata: []json.RawMessage{json.RawMessage(`{"postStartCommand": "echo $HOME"}`)},
	}
	got, err := features.Dockerfile([]*features.Resolved{node, meta}, b)
	if err != nil {
		t.Fatal(err)
	}
	want := `FROM mcr.microsoft.com/devcontainers/base:bookworm
# Written by hutch: the devcontainer.json's features, one layer each.
USER root

# ghcr.io/devcontainers/features/node:1
COPY features/0-node /tmp/dev-container-features/0-node
ENV NVM_DIR="/usr/local/share/nvm"
ENV PATH="/usr/local/share/nvm/current/bin:${PATH}"
ENV Q="say \"hi\" \\ $(id) ` + "`id`" + `"
RUN set -e; cd /tmp/dev-container-features/0-node; chmod -R 0755 . 2>/dev/null || :; set -a; . ./devcontainer-features.env; set +a; if [ -x ./install.sh ]; then ./install.sh; else /bin/sh ./install.sh; fi; cd /; rm -rf /tmp/dev-container-features/0-node; rmdir /tmp/dev-container-features 2>/dev/null || :

# ./meta-only
ENV ONLY="env"

LABEL devcontainer.metadata="[{\"remoteUser\":\"vscode\"},{\"id\":\"ghcr.io/devcontainers/features/node:1\",\"postCreateCommand\":\"nvm use\",\"privileged\":true,\"mounts\":[\"type=volume,source=x-\${devcontainerId},target=/x\"],\"customizations\":{\"vscode\":{\"extensions\":[\"a\"]}}},{\"id\":\"./meta-only\",\"init\":true},{\"postStartCommand\":\"echo \$HOME\"}]"
USER vscode
`
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Dockerfile (-want +got):\n%s", diff)
	}

	label, err := features.MetadataLabelValue([]*features.Resolved{node, meta}, b)
	if err != nil {
		t.Fatal(err)
	}
	var entries []map[string]any
	if err := json.Unmarshal([]byte(label), &entries); err != nil {
		t.Fatalf("label is not a JSON array: %v\n%s", err, label)
	}
	if len(entries) != 4 || entries[1]["id"] != "ghcr.io/devcontainers/features/node:1" || entries[2]["init"] != true {
		t.Errorf("label entries = %v", entries)
	}
	if _, ok := entries[1]["containerEnv"]; ok {
		t.Error("the label repeats containerEnv, which the image's environment holds")
	}

	// No features, no users: an empty label, no USER at the end.
	got, err = features.Dockerfile(nil, features.Build{Base: "sha256:" + strings.Repeat("a", 64)})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(got, "\nLABEL devcontainer.metadata=\"[]\"\n") {
		t.Errorf("Dockerfile without features:\n%s", got)
	}
}

// TestDockerfile_Hostile: nothing a feature's metadata or the caller
// gives adds an instruction. Each Dockerfile line must start with one of
// the instructions hutch writes.
func TestDockerfile_Hostile(t *testing.T) {
	evil := resolved(t, "./evil", map[string]string{
		"devcontainer-feature.json": `{"id": "evil", "containerEnv": {"A": "\" \\\nRUN touch /pwned", "B": "x\\", "C": "\\\"; RUN evil"},
			"customizations": {"x": "\nRUN touch /pwned \" $(id) \\"}, "postCreateCommand": "\"; RUN evil #"}`,
		"install.sh": "#!/bin/sh\n",
	}, map[string]string{"o": "\nRUN touch /pwned"})
	_, err := features.Dockerfile([]*features.Resolved{evil}, features.Build{Base: "busybox"})
	if err == nil || !errdefs.IsInvalid(err) || !strings.Contains(err.Error(), "feature ./evil: containerEnv A holds a line break or a NUL byte, which a Dockerfile's ENV cannot carry") {
		t.Fatalf("Dockerfile with a line break in containerEnv: %v", err)
	}
	delete(evil.Metadata.ContainerEnv, "A")
	got, err := features.Dockerfile([]*features.Resolved{evil}, features.Build{Base: "busybox"})
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(strings.TrimSuffix(got, "\n"), "\n") {
		if line != "" && !startsWithAny(line, "FROM ", "USER ", "COPY ", "ENV ", "RUN ", "LABEL ", "# ") {
			t.Errorf("unexpected line %q in:\n%s", line, got)
		}
	}
	for _, want := range []string{`ENV B="x\\"`, `ENV C="\\\"; RUN evil"`} {
		if !strings.Contains(got, want+"\n") {
			t.Errorf("Dockerfile lacks %s:\n%s", want, got)
		}
	}
	if strings.Count(got, "\nRUN ") != 1 || strings.Count(got, "\nENV ") != 2 {
		t.Errorf("instructions were added:\n%s", got)
	}
}

func startsWithAny(s string, prefixes ...string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

func TestDockerfile_Refuses(t *testing.T) {
	env := func(k, v string) *features.Resolved {
		f := resolved(t, "./f", map[string]string{"devcontainer-feature.json": `{"id": "f"}`, "install.sh": ""}, nil)
		f.Metadata.ContainerEnv = map[string]string{k: v}
		return f
	}
	tests := []struct {
		name     string
		features []*features.Resolved
		build    features.Build
		want     string
	}{
		{"no_base", nil, features.Build{}, `the base image "" is not an image reference`},
		{"base_with_space", nil, features.Build{Base: "busybox AS x"}, `the base image "busybox AS x" is not an image reference`},
		{"base_with_newline", nil, features.Build{Base: "busybox\nRUN evil"}, "is not an image reference"},
		{"base_with_variable", nil, features.Build{Base: "${X}"}, "is not an image reference"},
		{"user_with_newline", nil, features.Build{Base: "busybox", ImageUser: "root\nRUN evil"}, `the base image's user "root\nRUN evil" is not a user name or id`},
		{"env_name_with_dash", []*features.Resolved{env("MY-VAR", "x")}, features.Build{Base: "busybox"}, `feature ./f: containerEnv "MY-VAR" is not a valid environment variable name`},
		{"env_name_with_equals", []*features.Resolved{env("A=B C", "x")}, features.Build{Base: "busybox"}, `containerEnv "A=B C" is not a valid environment variable name`},
		{"env_name_digit", []*features.Resolved{env("1A", "x")}, features.Build{Base: "busybox"}, `"1A" is not a valid`},
		{"env_value_cr", []*features.Resolved{env("A", "x\ry")}, features.Build{Base: "busybox"}, "containerEnv A holds a line break"},
		{"env_value_nul", []*features.Resolved{env("A", "x\x00y")}, features.Build{Base: "busybox"}, "containerEnv A holds a line break or a NUL byte"},
		{"bad_base_metadata", nil, features.Build{Base: "busybox", BaseMetadata: []json.RawMessage{json.RawMessage(`[1]`)}}, "a devcontainer.metadata entry is not a JSON object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := features.Dockerfile(tt.features, tt.build)
			if err == nil || !errdefs.IsInvalid(err) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Dockerfile: %v, want an invalid error containing %q", err, tt.want)
			}
		})
	}
}

func TestWriteContext(t *testing.T) {
	f := resolved(t, "ghcr.io/x/f/tool:1", map[string]string{
		"devcontainer-feature.json": `{"id": "tool", "options": {"v": {"type": "string", "default": "1"}}}`,
		"install.sh":                "#!/bin/sh\necho hi\n",
		"bin/tool.sh":               "tool",
		// A feature's own env file is replaced by hutch's.
		"devcontainer-features.env": "EVIL=$(touch /pwned)\n",
	}, map[string]string{"v": "it's $(2)"})
	meta := resolved(t, "./meta", map[string]string{"devcontainer-feature.json": `{"id": "meta"}`}, nil)
	dir := t.TempDir()
	b := features.Build{Base: "busybox", Users: features.Users{ContainerUser: "root", RemoteUser: "dev", ContainerUserHome: "/root", RemoteUserHome: "/home/dev"}}
	dockerfile, err := features.WriteContext(dir, []*features.Resolved{f, meta}, b)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"Dockerfile":                                dockerfile,
		"features/":                                 "",
		"features/0-tool/":                          "",
		"features/0-tool/bin/":                      "",
		"features/0-tool/bin/tool.sh":               "tool",
		"features/0-tool/devcontainer-feature.json": `{"id": "tool", "options": {"v": {"type": "string", "default": "1"}}}`,
		"features/0-tool/install.sh":                "#!/bin/sh\necho hi\n",
		"features/0-tool/devcontainer-features.env": "# Written by hutch: the environment of this feature's install.sh.\n" +
			"_CONTAINER_USER='root'\n_REMOTE_USER='dev'\n_CONTAINER_USER_HOME='/root'\n_REMOTE_USER_HOME='/home/dev'\nV='it'\\''s $(2)'\n",
	}
	if diff := cmp.Diff(want, files(t, dir)); diff != "" {
		t.Errorf("context (-want +got):\n%s", diff)
	}
	if fi, err := os.Stat(filepath.Join(dir, "features/0-tool/install.sh")); err != nil || fi.Mode().Perm()&0o111 == 0 {
		t.Errorf("install.sh lost its execute bit: %v %v", fi.Mode(), err)
	}

	// The archive holds the same, with fixed owners and times.
	var buf bytes.Buffer
	if err := features.TarContext(dir, &buf); err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(&buf)
	got := map[string]string{}
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if hdr.Uid != 0 || hdr.Gid != 0 || hdr.ModTime.Unix() != 0 {
			t.Errorf("%s: uid %d gid %d mtime %v", hdr.Name, hdr.Uid, hdr.Gid, hdr.ModTime)
		}
		body, _ := io.ReadAll(tr)
		got[hdr.Name] = string(body)
		if hdr.Name == "features/0-tool/install.sh" && hdr.Mode != 0o755 {
			t.Errorf("install.sh has mode %o in the archive", hdr.Mode)
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("archive (-want +got):\n%s", diff)
	}
}
