package project_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/hutchsandbox/hutch/internal/project"
)

// nameVectors were computed with an independent implementation of the
// algorithm (Python: FNV-1a 64 over the UTF-8 bytes, "%016x"[:8];
// str.isascii/isalnum for the slug). They pin container names: a change
// here makes hutch lose track of every existing project sandbox.
var nameVectors = []struct {
	name, project, hash, slug, container string
}{
	{"plain", "/home/me/code/api", "0a1ef490", "api", "hutch-sbx-api-0a1ef490"},
	{"trailing_slash_hashes_differently", "/home/me/code/api/", "4db60e2c", "api", "hutch-sbx-api-4db60e2c"},
	{"unicode_last_component", "/srv/src/\u00dcn\u00efcode Projekt", "30c0abe4", "n-code-projekt", "hutch-sbx-n-code-projekt-30c0abe4"},
	{"cjk_only", "/home/me/code/日本語", "bd3ea353", "project", "hutch-sbx-project-bd3ea353"},
	{"long_component_cut_to_24", "/home/me/code/a-very-long-project-name-that-keeps-going", "d158b3e8", "a-very-long-project-name", "hutch-sbx-a-very-long-project-name-d158b3e8"},
	{"cut_after_trim_keeps_trailing_dash", "/p/abcdefghijklmnopqrstuvw-xyz", "ac3a3f85", "abcdefghijklmnopqrstuvw-", "hutch-sbx-abcdefghijklmnopqrstuvw--ac3a3f85"},
	{"punctuation_only", "/x/___", "eab9ed00", "project", "hutch-sbx-project-eab9ed00"},
	{"capitals_dots_underscores", "/Users/Me/Code/My.App_v2", "c08f4658", "my-app-v2", "hutch-sbx-my-app-v2-c08f4658"},
	{"root", "/", "af63a24c", "project", "hutch-sbx-project-af63a24c"},
}

func TestNames_Vectors(t *testing.T) {
	for _, v := range nameVectors {
		t.Run(v.name, func(t *testing.T) {
			if got := project.Hash(v.project); got != v.hash {
				t.Errorf("Hash(%q) got %q, want %q", v.project, got, v.hash)
			}
			if got := project.Slug(v.project); got != v.slug {
				t.Errorf("Slug(%q) got %q, want %q", v.project, got, v.slug)
			}
			if got := project.ContainerName(v.project); got != v.container {
				t.Errorf("ContainerName(%q) got %q, want %q", v.project, got, v.container)
			}
		})
	}
}

func TestHomeVolume(t *testing.T) {
	if got, want := project.HomeVolume("hutch-sbx-api-0a1ef490"), "hutch-sbx-api-0a1ef490-home"; got != want {
		t.Errorf("HomeVolume got %q, want %q", got, want)
	}
}

func TestLabels(t *testing.T) {
	got := project.Labels("/home/me/code/api", "", "")
	want := map[string]string{
		"hutch.sandbox":             "project",
		"hutch.project":             "/home/me/code/api",
		"hutch.owner":               "hutch",
		"devcontainer.local_folder": "/home/me/code/api",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Labels without config or spec (-want +got):\n%s", diff)
	}
	got = project.Labels("/home/me/code/api", "/home/me/code/api/.devcontainer/devcontainer.json", "0123456789abcdef")
	want["devcontainer.config_file"] = "/home/me/code/api/.devcontainer/devcontainer.json"
	want["hutch.spec"] = "0123456789abcdef"
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Labels with config and spec (-want +got):\n%s", diff)
	}
}
