package box_test

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hutchsandbox/hutch/internal/devcontainer"
	"github.com/hutchsandbox/hutch/internal/project/box"
)

// TestBuildInputs: an approval covers the Dockerfile the build names and
// every local feature the file installs, those a local feature's
// dependsOn adds included, each read beneath the project without
// following a link; what is missing or unreadable is recorded as such.
// Remote features and paths outside the project are not the project's.
func TestBuildInputs(t *testing.T) {
	t.Parallel()
	proj := t.TempDir()
	dcDir := filepath.Join(proj, ".devcontainer")
	write := func(rel, body string) {
		t.Helper()
		p := filepath.Join(proj, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(".devcontainer/Dockerfile", "FROM debian\n")
	write(".devcontainer/a/devcontainer-feature.json", `{"id": "a", "dependsOn": {"./b": {}, "ghcr.io/devcontainers/features/go:1": {}}}`)
	write(".devcontainer/a/install.sh", "echo a\n")
	write(".devcontainer/b/devcontainer-feature.json", `{"id": "b"}`)
	write(".devcontainer/b/install.sh", "echo b\n")
	dc := &devcontainer.Config{
		Path: filepath.Join(dcDir, "devcontainer.json"), Dir: dcDir,
		Build: &devcontainer.Build{Dockerfile: "Dockerfile"},
		Features: []devcontainer.Feature{
			{ID: "./a"}, {ID: "./gone"}, {ID: "ghcr.io/devcontainers/features/node:1"},
		},
	}
	got := box.BuildInputs(proj, dc, dc.Path)
	keys := slices.Sorted(maps.Keys(got))
	want := []string{"the Dockerfile " + filepath.Join(dcDir, "Dockerfile"), "the local feature ./a", "the local feature ./b", "the local feature ./gone"}
	if !slices.Equal(keys, want) {
		t.Fatalf("BuildInputs keys = %q, want %q", keys, want)
	}
	if got["the local feature ./gone"] != "missing" || !strings.HasPrefix(got["the local feature ./a"], "sha256:") || got["the Dockerfile "+filepath.Join(dcDir, "Dockerfile")] != box.Digest([]byte("FROM debian\n")) {
		t.Errorf("BuildInputs = %v", got)
	}

	// An edit to a dependency's install.sh, or to the Dockerfile, is seen.
	write(".devcontainer/b/install.sh", "echo b; curl evil\n")
	if again := box.BuildInputs(proj, dc, dc.Path); again["the local feature ./b"] == got["the local feature ./b"] || again["the local feature ./a"] != got["the local feature ./a"] {
		t.Errorf("after editing ./b: %v, before %v", again, got)
	}
	// A Dockerfile replaced by a link is not followed.
	df := filepath.Join(dcDir, "Dockerfile")
	if err := os.Remove(df); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/hostname", df); err != nil {
		t.Fatal(err)
	}
	if v := box.BuildInputs(proj, dc, dc.Path)["the Dockerfile "+df]; !strings.HasPrefix(v, "unreadable: ") || !strings.Contains(v, "symbolic link") {
		t.Errorf("a linked Dockerfile: %q", v)
	}

	// A Dockerfile outside the project is not read (Resolve refuses it).
	out := &devcontainer.Config{Path: dc.Path, Dir: dcDir, Build: &devcontainer.Build{Dockerfile: "../../elsewhere/Dockerfile"}}
	if got := box.BuildInputs(proj, out, out.Path); len(got) != 0 {
		t.Errorf("a Dockerfile outside the project: %v", got)
	}
	if got := box.BuildInputs(proj, &devcontainer.Config{Path: dc.Path, Image: "debian"}, dc.Path); len(got) != 0 {
		t.Errorf("an image only: %v", got)
	}
}
