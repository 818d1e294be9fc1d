package project_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/hutchsandbox/hutch/internal/devcontainer"
	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/project"
)

const dcDir = proj + "/.devcontainer"

// buildInput is a project whose devcontainer.json (in .devcontainer)
// builds b, with the Dockerfile content df.
func buildInput(t *testing.T, settings string, b devcontainer.Build, df string) project.Input {
	t.Helper()
	in := input(t, settings)
	in.Devcontainer = &devcontainer.Config{Path: dcDir + "/devcontainer.json", Dir: dcDir, Dockerfile: b.Dockerfile, Build: &b, ShutdownAction: "none", WorkspaceFolder: proj}
	in.Dockerfile = []byte(df)
	return in
}

// TestResolve_Build: the build's paths are resolved against the folder
// of devcontainer.json, the context defaulting to that folder; its tag is
// the Recipe's base, so hutch's layers go on top of what it builds.
func TestResolve_Build(t *testing.T) {
	for _, tc := range []struct {
		name                string
		build               devcontainer.Build
		dockerfile, context string
	}{
		{"default context", devcontainer.Build{Dockerfile: "Dockerfile"}, dcDir + "/Dockerfile", dcDir},
		{"context up", devcontainer.Build{Dockerfile: "Dockerfile", Context: ".."}, dcDir + "/Dockerfile", proj},
		{"dockerfile elsewhere", devcontainer.Build{Dockerfile: "../docker/dev.Dockerfile", Context: "../src/"}, proj + "/docker/dev.Dockerfile", proj + "/src"},
		{"absolute inside", devcontainer.Build{Dockerfile: proj + "/Dockerfile", Context: proj}, proj + "/Dockerfile", proj},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sp, err := project.Resolve(buildInput(t, `{}`, tc.build, "FROM debian\n"))
			if err != nil {
				t.Fatal(err)
			}
			b := sp.Build
			if b == nil || b.Dockerfile != tc.dockerfile || b.Context != tc.context {
				t.Fatalf("Build = %+v, want Dockerfile %s, Context %s", b, tc.dockerfile, tc.context)
			}
			if !strings.HasPrefix(b.Tag, project.BuildRepo+":") || sp.Recipe == nil || sp.Recipe.Base != b.Tag || sp.Image != sp.Recipe.Tag() {
				t.Errorf("tag %q, recipe %+v, image %q: want the recipe on the built image", b.Tag, sp.Recipe, sp.Image)
			}
			if string(b.Content) != "FROM debian\n" {
				t.Errorf("Content = %q", b.Content)
			}
		})
	}
}

// TestResolve_BuildTag: the tag follows everything that goes into the
// build as written, and nothing else.
func TestResolve_BuildTag(t *testing.T) {
	base := devcontainer.Build{Dockerfile: "Dockerfile", Args: map[string]string{"V": "1"}, Target: "dev"}
	tag := func(b devcontainer.Build, df string) string {
		t.Helper()
		sp, err := project.Resolve(buildInput(t, `{}`, b, df))
		if err != nil {
			t.Fatal(err)
		}
		return sp.Build.Tag
	}
	first := tag(base, "FROM a\n")
	if again := tag(devcontainer.Build{Dockerfile: "./Dockerfile", Args: map[string]string{"V": "1"}, Target: "dev", Context: "."}, "FROM a\n"); again != first {
		t.Errorf("the same build written otherwise got %s and %s", first, again)
	}
	for name, other := range map[string]string{
		"content": tag(base, "FROM b\n"),
		"args":    tag(devcontainer.Build{Dockerfile: "Dockerfile", Args: map[string]string{"V": "2"}, Target: "dev"}, "FROM a\n"),
		"target":  tag(devcontainer.Build{Dockerfile: "Dockerfile", Args: map[string]string{"V": "1"}}, "FROM a\n"),
		"context": tag(devcontainer.Build{Dockerfile: "Dockerfile", Args: map[string]string{"V": "1"}, Target: "dev", Context: ".."}, "FROM a\n"),
	} {
		if other == first {
			t.Errorf("a change of the %s kept the tag %s", name, first)
		}
	}
	b := project.ImageBuild{Dockerfile: "/p/Dockerfile", Context: "/p"}
	if project.BuildTag("/p", b, []byte("x")) == project.BuildTag("/q", b, []byte("x")) {
		t.Error("two projects got one tag")
	}
}

// TestResolve_BuildRefusals: a Dockerfile or context outside the project,
// and a Dockerfile that is not there, are refused with what to fix.
func TestResolve_BuildRefusals(t *testing.T) {
	var out []string
	for _, tc := range []struct {
		build devcontainer.Build
		df    []byte
		class error
	}{
		{devcontainer.Build{Dockerfile: "../../Dockerfile"}, []byte("FROM x\n"), errdefs.ErrInvalid},
		{devcontainer.Build{Dockerfile: "Dockerfile", Context: "../.."}, []byte("FROM x\n"), errdefs.ErrInvalid},
		{devcontainer.Build{Dockerfile: "/etc/Dockerfile"}, []byte("FROM x\n"), errdefs.ErrInvalid},
		{devcontainer.Build{Dockerfile: "Dockerfile", Context: "/"}, []byte("FROM x\n"), errdefs.ErrInvalid},
		{devcontainer.Build{Dockerfile: ".."}, []byte("FROM x\n"), errdefs.ErrInvalid},
		{devcontainer.Build{Dockerfile: "Dockerfile"}, nil, errdefs.ErrNotFound},
	} {
		in := buildInput(t, `{}`, tc.build, "")
		in.Dockerfile = tc.df
		_, err := project.Resolve(in)
		if !errors.Is(err, tc.class) {
			t.Errorf("%+v: err = %v, want class %v", tc.build, err, tc.class)
			continue
		}
		out = append(out, err.Error())
	}
	golden(t, "resolve_build_refusals", strings.Join(out, "\n")+"\n")
}

// TestResolve_BuildNotes: what the user is told about a build: an image
// named beside it is not used (the reference CLI builds), args that look
// like secrets end up in the image's history, and sandbox-image wins over
// the build.
func TestResolve_BuildNotes(t *testing.T) {
	in := buildInput(t, `{}`, devcontainer.Build{Dockerfile: "Dockerfile", Args: map[string]string{"NPM_TOKEN": "x", "VARIANT": "22", "GH_AUTH": "y"}}, "FROM node\n")
	in.Devcontainer.Image = "node:22"
	sp, err := project.Resolve(in)
	if err != nil {
		t.Fatal(err)
	}
	notes := sp.Notes
	in = buildInput(t, `{"sandbox-image": "ghcr.io/me/agents:1"}`, devcontainer.Build{Dockerfile: "../../outside/Dockerfile"}, "")
	in.Dockerfile = nil
	sp, err = project.Resolve(in)
	if err != nil {
		t.Fatalf("with sandbox-image set the build is not resolved, nor refused: %v", err)
	}
	if sp.Build != nil || sp.Image != "ghcr.io/me/agents:1" {
		t.Errorf("sandbox-image and a build: Build %+v, Image %q", sp.Build, sp.Image)
	}
	golden(t, "resolve_build_notes", strings.Join(append(notes, sp.Notes...), "\n")+"\n")
}

// TestResolve_UserOrigin: the setting the container's user came from,
// which the error for an image without that user names.
func TestResolve_UserOrigin(t *testing.T) {
	dc := func(remote, container string) *devcontainer.Config {
		return &devcontainer.Config{Path: dcDir + "/devcontainer.json", RemoteUser: remote, ContainerUser: container, ShutdownAction: "none", WorkspaceFolder: proj}
	}
	for _, tc := range []struct {
		settings string
		dc       *devcontainer.Config
		want     string
	}{
		{`{"sandbox-user": "node"}`, dc("vscode", ""), "sandbox-user in "},
		{`{}`, dc("vscode", "root"), "remoteUser in " + dcDir + "/devcontainer.json"},
		{`{}`, dc("", "node"), "containerUser in " + dcDir + "/devcontainer.json"},
		{`{}`, dc("", ""), ""},
		{`{}`, nil, ""},
	} {
		in := input(t, tc.settings)
		in.Devcontainer = tc.dc
		sp, err := project.Resolve(in)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(sp.UserOrigin, tc.want) || (tc.want == "") != (sp.UserOrigin == "") {
			t.Errorf("%s %+v: UserOrigin %q, want %q", tc.settings, tc.dc, sp.UserOrigin, tc.want)
		}
	}
}
