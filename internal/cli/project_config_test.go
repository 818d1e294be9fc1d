package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hutchsandbox/hutch/internal/devcontainer"
	"github.com/hutchsandbox/hutch/internal/engine"
	"github.com/hutchsandbox/hutch/internal/project"
	"github.com/hutchsandbox/hutch/internal/testenv"
)

// writeDevcontainer writes the project's .devcontainer/devcontainer.json.
func writeDevcontainer(t *testing.T, proj, content string) string {
	t.Helper()
	dc := filepath.Join(proj, ".devcontainer", "devcontainer.json")
	if err := os.MkdirAll(filepath.Dir(dc), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dc, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return dc
}

// configJSON runs project config --json.
func configJSON(t *testing.T, e *env, args ...string) projectConfig {
	t.Helper()
	var c projectConfig
	out := e.ok(append(args, "config", "--json")...)
	if err := json.Unmarshal([]byte(out), &c); err != nil {
		t.Fatalf("config --json printed %s: %v", out, err)
	}
	return c
}

// TestProjectConfig_TrustDecides: an untrusted file is shown as not
// applied, with the note and what applies without it; once trusted, its
// user, environment, mounts and lifecycle commands are shown with where
// each came from, and values sandbox-env sets are hidden.
func TestProjectConfig_TrustDecides(t *testing.T) {
	e, proj, cfg := projectEnv(t)
	e.extra["GREETING"] = "hello from the host"
	dc := writeDevcontainer(t, proj, `{
  // An image no engine has: nothing to merge.
  "image": "hutch-test-absent-image:0",
  "remoteUser": "dev",
  "containerEnv": {"A": "1", "TOKEN": "from-the-file"},
  "remoteEnv": {"GREETING": "${localEnv:GREETING}", "P": "${containerEnv:PATH}:/x"},
  "mounts": ["source=cache-${devcontainerId},target=/cache,type=volume"],
  "initializeCommand": "make host-things",
  "postCreateCommand": {"deps": "make deps", "argv": ["echo", "a b"]},
}`)
	settings := `{"sandbox-env": ["TOKEN=s3cret"]}`
	if err := os.WriteFile(filepath.Join(cfg, "settings.json"), []byte(settings), 0o600); err != nil {
		t.Fatal(err)
	}

	c := configJSON(t, e, "project", "-C", proj)
	if c.Applied || c.ConfigFile != dc || c.User == "dev" || len(c.Lifecycle) > 0 {
		t.Errorf("untrusted file applied: %+v", c)
	}
	wantNote := dc + " is new or changed since you last approved it, so it is not applied (agents can edit the project). Read it, then run `hutch project trust` to apply it."
	if len(c.Notes) == 0 || c.Notes[0] != wantNote {
		t.Errorf("untrusted: notes %q, want first %q", c.Notes, wantNote)
	}

	e.ok("project", "-C", proj, "trust")
	c = configJSON(t, e, "project", "-C", proj)
	if !c.Applied || c.User != "dev" || c.UserFrom != "remoteUser in "+dc || c.Workdir != proj {
		t.Errorf("trusted: applied %v, user %q from %q, workdir %q", c.Applied, c.User, c.UserFrom, c.Workdir)
	}
	if c.Base != "hutch-test-absent-image:0" || !strings.HasPrefix(c.Image, "hutch-sandbox:") {
		t.Errorf("image %q on %q", c.Image, c.Base)
	}
	env := map[string]string{}
	for _, v := range c.Env {
		env[v.Name] = v.Value
	}
	if env["A"] != "1" || env["TOKEN"] != "…" || env["HOME"] != project.HomeTarget {
		t.Errorf("container env %v: want A=1, TOKEN hidden (sandbox-env), HOME=%s", c.Env, project.HomeTarget)
	}
	remote := map[string]string{}
	for _, v := range c.RemoteEnv {
		remote[v.Name] = v.Value
	}
	if remote["GREETING"] != "hello from the host" || remote["P"] != "${containerEnv:PATH}:/x" {
		t.Errorf("remoteEnv %v", c.RemoteEnv)
	}
	id := devcontainer.ID(map[string]string{project.LabelLocalFolder: proj, project.LabelConfigFile: dc})
	origins := map[string]string{}
	for _, m := range c.Mounts {
		origins[m.Target] = m.Origin + " " + m.Type + " " + m.Source
	}
	for target, want := range map[string]string{
		proj:                "hutch: the project bind " + proj,
		project.HomeTarget:  "hutch: the home volume volume " + project.HomeVolume(project.ContainerName(proj)),
		project.RelayTarget: "hutch: the relay directory bind ",
		"/cache":            dc + " volume cache-" + id,
	} {
		if got := origins[target]; !strings.HasPrefix(got, want) {
			t.Errorf("mount at %s: %q, want %q…", target, got, want)
		}
	}
	if _, ok := c.Lifecycle["initializeCommand"]; ok {
		t.Error("initializeCommand is shown as run")
	}
	post := c.Lifecycle["postCreateCommand"]
	if len(post) != 1 || post[0].Origin != "devcontainer.json" || len(post[0].Commands) != 2 || post[0].Commands[1].Argv[1] != "a b" {
		t.Errorf("postCreateCommand %+v", post)
	}
	out := e.ok("project", "-C", proj, "config")
	for _, want := range []string{
		"User      dev, from remoteUser in " + dc + "\n",
		"  TOKEN=…\n",
		"  GREETING=hello from the host\n",
		"  postCreateCommand deps (devcontainer.json): make deps\n",
		"  postCreateCommand argv (devcontainer.json): echo 'a b'\n",
		"has an initializeCommand, which runs on the host",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("config lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "s3cret") || strings.Contains(e.ok("project", "-C", proj, "config", "--json"), "s3cret") {
		t.Error("config printed a value sandbox-env sets")
	}
}

// TestProjectConfig_Refused: a file the sandbox refuses (here for the
// engine socket) is shown as not applied, with the refusal, and what
// applies without it.
func TestProjectConfig_Refused(t *testing.T) {
	e, proj, _ := projectEnv(t)
	dc := writeDevcontainer(t, proj, `{"image": "debian:12", "remoteUser": "dev", "mounts": ["source=/var/run/docker.sock,target=/var/run/docker.sock,type=bind"]}`)
	e.ok("project", "-C", proj, "trust")
	c := configJSON(t, e, "project", "-C", proj)
	if c.Applied || c.User == "dev" {
		t.Errorf("refused file applied: %+v", c)
	}
	want := dc + " is not applied: Refusing to mount /var/run/docker.sock at /var/run/docker.sock: it is a container engine socket"
	if len(c.Notes) == 0 || !strings.HasPrefix(c.Notes[0], want) {
		t.Errorf("notes %q, want first %q…", c.Notes, want)
	}
	if out := e.ok("project", "-C", proj, "config"); !strings.Contains(out, "Config    "+dc+" (not applied: see the notes)\n") {
		t.Errorf("text form:\n%s", out)
	}
}

// TestProjectConfig_NoFile: without a devcontainer.json, config shows
// the sandbox of the settings alone and where it looked.
func TestProjectConfig_NoFile(t *testing.T) {
	e, proj, _ := projectEnv(t)
	c := configJSON(t, e, "project", "-C", proj)
	if c.ConfigFile != "" || c.Applied || c.Metadata.Merged || c.UserFrom != "your uid:gid (no remoteUser, containerUser or sandbox-user sets one)" {
		t.Errorf("no file: %+v", c)
	}
	if out := e.ok("project", "-C", proj, "config"); !strings.Contains(out, "Config    (none: looked for .devcontainer/devcontainer.json, .devcontainer.json, .devcontainer/devcontainer.jsonc)\n") {
		t.Errorf("text form:\n%s", out)
	}
}

// TestProjectConfig_MergesImageMetadata: with the engine, the label of
// the image the sandbox would use is merged as up merges it, and what
// came from it says so.
func TestProjectConfig_MergesImageMetadata(t *testing.T) {
	docker := testenv.Docker(t)
	ctx := context.Background()
	ref := testenv.Name(t) + ":1"
	label := `[{"remoteUser": "imguser", "remoteEnv": {"FROM_IMAGE": "yes"}, "containerEnv": {"BAKED": "in"}, ` +
		`"mounts": [{"type": "volume", "source": "img-${devcontainerId}", "target": "/img"}], "postStartCommand": "echo from the image"}]`
	// Quoted as the Dockerfile reads a LABEL: $ would be expanded.
	quoted := `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, `$`, `\$`).Replace(label) + `"`
	dockerfile := fmt.Sprintf("FROM %s\nLABEL %s=%s\n", testenv.BusyboxImage(t, docker), devcontainer.MetadataLabel, quoted)
	if err := engine.BuildDockerfile(ctx, docker, []byte(dockerfile), ref, nil, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { testenv.RemoveImage(t, docker, ref) })

	e, proj, _ := projectEnv(t)
	dc := writeDevcontainer(t, proj, `{"image": "`+ref+`", "postStartCommand": "echo from the file"}`)
	e.ok("project", "-C", proj, "trust")
	c := configJSON(t, e, "project", "-C", proj)
	if !c.Metadata.Merged || c.Metadata.Image != ref {
		t.Fatalf("metadata not merged: %+v", c.Metadata)
	}
	if c.User != "imguser" || c.UserFrom != devcontainer.ImageOrigin {
		t.Errorf("user %q from %q", c.User, c.UserFrom)
	}
	if len(c.RemoteEnv) != 1 || c.RemoteEnv[0] != (project.EnvVar{Name: "FROM_IMAGE", Value: "yes"}) {
		t.Errorf("remoteEnv %v", c.RemoteEnv)
	}
	for _, v := range c.Env {
		if v.Name == "BAKED" {
			t.Errorf("the image's containerEnv is given to the container again: %v", c.Env)
		}
	}
	id := devcontainer.ID(map[string]string{project.LabelLocalFolder: proj, project.LabelConfigFile: dc})
	found := false
	for _, m := range c.Mounts {
		if m.Target == "/img" {
			found = true
			if m.Origin != devcontainer.ImageOrigin || m.Source != "img-"+id {
				t.Errorf("the image's mount: %+v", m)
			}
		}
	}
	if !found {
		t.Errorf("the image's mount is missing: %+v", c.Mounts)
	}
	post := c.Lifecycle["postStartCommand"]
	if len(post) != 2 || post[0].Origin != devcontainer.ImageOrigin || post[1].Origin != "devcontainer.json" {
		t.Errorf("postStartCommand %+v: want the image's, then the file's", post)
	}
	if out := e.ok("project", "-C", proj, "config"); !strings.Contains(out, "Metadata  The devcontainer.metadata label of "+ref+" is merged under the file, as hutch project up merges it.\n") {
		t.Errorf("text form:\n%s", out)
	}
}

// TestProjectConfig_TextGolden pins the text form.
func TestProjectConfig_TextGolden(t *testing.T) {
	c := projectConfig{
		Project: "/home/u/code/api", ConfigFile: "/home/u/code/api/.devcontainer/devcontainer.json", Applied: true,
		Image: "", Base: "hutch-devcontainer:89ab",
		Build: &project.ImageBuild{Dockerfile: "/home/u/code/api/.devcontainer/Dockerfile", Context: "/home/u/code/api", Args: map[string]string{"VARIANT": "bookworm", "NODE": "22"}, Target: "dev", Tag: "hutch-devcontainer:89ab"},
		Features: &project.Features{Base: "hutch-devcontainer:89ab", File: "/home/u/code/api/.devcontainer/devcontainer.json", Dir: "/home/u/code/api/.devcontainer",
			List: []devcontainer.Feature{{ID: "ghcr.io/devcontainers/features/node:1", Options: map[string]string{"version": "22"}}, {ID: "./local", Options: map[string]string{}}}},
		User: "vscode", UserFrom: "remoteUser in /home/u/code/api/.devcontainer/devcontainer.json",
		Workdir:   "/home/u/code/api",
		Env:       []project.EnvVar{{Name: "A", Value: "1"}, {Name: "TOKEN", Value: "…"}, {Name: "HOME", Value: "/sandbox/home"}},
		RemoteEnv: []project.EnvVar{{Name: "PATH", Value: "/home/u/code/api/bin:${containerEnv:PATH}"}},
		Mounts: []configMount{
			{Mount: project.Mount{Type: "bind", Source: "/home/u/code/api", Target: "/home/u/code/api"}, Origin: "hutch: the project"},
			{Mount: project.Mount{Type: "volume", Source: "hutch-sbx-api-0123abcd-home", Target: "/sandbox/home"}, Origin: "hutch: the home volume"},
			{Mount: project.Mount{Type: "bind", Source: "/home/u/.gitconfig", Target: "/home/vscode/.gitconfig", ReadOnly: true}, Origin: "/home/u/code/api/.devcontainer/devcontainer.json"},
		},
		Lifecycle: map[string][]devcontainer.Lifecycle{
			"postCreateCommand": {{Origin: devcontainer.ImageOrigin, Commands: []devcontainer.Command{{Shell: "echo image"}}}, {Origin: "devcontainer.json", Commands: []devcontainer.Command{{Name: "deps", Argv: []string{"npm", "ci"}}}}},
			"onCreateCommand":   {{Origin: "devcontainer.json", Commands: []devcontainer.Command{{Shell: "make setup"}}}},
		},
		Metadata: configMetadata{Status: "hutch-devcontainer:89ab is not there yet, so its devcontainer.metadata label is not merged here; hutch project up merges it once the image is built."},
		Notes:    []string{"A note.", "A note with a snippet:\n  \"a\": 1"},
	}
	var b strings.Builder
	if err := printConfig(&b, c); err != nil {
		t.Fatal(err)
	}
	golden(t, filepath.Join("testdata", "project_config.golden"), b.String())
}
