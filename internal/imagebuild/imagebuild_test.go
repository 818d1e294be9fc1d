package imagebuild

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/hutchsandbox/hutch/internal/engine"
	"github.com/hutchsandbox/hutch/internal/testenv"
)

func TestEmbeddedDockerfileMatchesDeploy(t *testing.T) {
	root, err := testenv.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(filepath.Join(root, "deploy", "sandbox.Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(Dockerfile, want) {
		t.Fatal("internal/imagebuild/sandbox.Dockerfile differs from deploy/sandbox.Dockerfile: copy deploy/sandbox.Dockerfile over it")
	}
	for _, s := range []string{"ARG BASE=" + DefaultBase, "FROM ${BASE}", "ARG TZ=UTC", "LABEL hutch.image=sandbox", "fd-find", "locale-gen"} {
		if !strings.Contains(string(Dockerfile), s) {
			t.Errorf("Dockerfile lacks %q", s)
		}
	}
	if regexp.MustCompile(`(?m)^#\s*syntax\s*=`).Match(Dockerfile) {
		t.Error("Dockerfile has a # syntax= line, which needs a registry")
	}
}

func TestDefaultTag(t *testing.T) {
	for in, want := range map[string]string{
		"":             "hutch-sandbox:dev",
		"dev":          "hutch-sandbox:dev",
		"v0.3.1":       "hutch-sandbox:v0.3.1",
		"1.0.0+abc/de": "hutch-sandbox:1.0.0-abc-de",
		"-x":           "hutch-sandbox:v-x",
	} {
		if got := DefaultTag(in); got != want {
			t.Errorf("DefaultTag(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestParseMirror(t *testing.T) {
	deb822 := `Types: deb
# http://snapshot.debian.org/archive/debian-security/20250520T000000Z
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main

Types: deb-src
URIs: http://src.example/debian
Suites: bookworm

Types: deb
URIs: http://old.example/debian
Suites: bookworm
Enabled: no

Types: deb
# http://snapshot.debian.org/archive/debian/20250520T000000Z
URIs: http://mirror.example/debian/
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
`
	if got, want := ParseMirror([]byte(deb822), true), "http://mirror.example/debian"; got != want {
		t.Errorf("deb822: got %q, want %q", got, want)
	}
	oneLine := `# deb http://commented.example/debian bookworm main
deb-src http://src.example/debian bookworm main
deb http://security.debian.org/debian-security bookworm-security main
deb [arch=amd64 signed-by=/usr/share/keyrings/k.gpg] https://ftp.example.org/debian bookworm main contrib
deb http://later.example/debian bookworm main
`
	if got, want := ParseMirror([]byte(oneLine), false), "https://ftp.example.org/debian"; got != want {
		t.Errorf("one-line: got %q, want %q", got, want)
	}
	if got := ParseMirror([]byte("deb https://packages.cloud.google.com/apt cloud-sdk-bookworm main\n"), false); got != "" {
		t.Errorf("no bookworm entry: got %q, want \"\"", got)
	}

	dir := t.TempDir()
	list := filepath.Join(dir, "sources.list")
	d := filepath.Join(dir, "sources.list.d")
	if err := os.Mkdir(d, 0o755); err != nil {
		t.Fatal(err)
	}
	if got := FindMirror(list, d); got != DefaultMirror {
		t.Errorf("no sources: got %q, want %q", got, DefaultMirror)
	}
	if err := os.WriteFile(filepath.Join(d, "debian.sources"), []byte(deb822), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, want := FindMirror(list, d), "http://mirror.example/debian"; got != want {
		t.Errorf("FindMirror: got %q, want %q", got, want)
	}
}

// TestBuild builds a tiny image FROM the busybox test image through the
// real engine (no debootstrap, no registry).
func TestBuild(t *testing.T) {
	cli := testenv.Docker(t)
	base := testenv.BusyboxImage(t, cli)
	eng := &engine.Engine{Client: cli}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	tag := testenv.Name(t) + ":1"
	t.Cleanup(func() {
		_, _ = cli.ImageRemove(context.Background(), tag, client.ImageRemoveOptions{Force: true, PruneChildren: true})
	})
	var progress bytes.Buffer
	ref, err := Build(ctx, eng, Options{
		Tag:        tag,
		Dockerfile: []byte("FROM " + base + "\nRUN echo built > /built\nLABEL hutch.test=imagebuild\n"),
		Base:       base,
		Progress:   &progress,
	})
	if err != nil {
		t.Fatalf("Build: %v\nprogress:\n%s", err, progress.String())
	}
	if ref != tag {
		t.Errorf("ref = %q, want %q", ref, tag)
	}
	insp, err := cli.ImageInspect(ctx, ref)
	if err != nil {
		t.Fatalf("inspect %s: %v", ref, err)
	}
	if got := insp.Config.Labels["hutch.test"]; got != "imagebuild" {
		t.Errorf("label hutch.test = %q, want imagebuild", got)
	}
	for _, want := range []string{"found locally", "Step 2/3 : RUN echo built > /built", "Successfully tagged"} {
		if !strings.Contains(progress.String(), want) {
			t.Errorf("progress lacks %q:\n%s", want, progress.String())
		}
	}

	// A failing step is an error naming it and the engine's message.
	progress.Reset()
	_, err = Build(ctx, eng, Options{
		Tag:        tag,
		Dockerfile: []byte("FROM " + base + "\nRUN exit 3\n"),
		Base:       base,
		Progress:   &progress,
	})
	if err == nil || !strings.Contains(err.Error(), "Step 2/2 : RUN exit 3") || !strings.Contains(err.Error(), "code: 3") {
		t.Errorf("failing build: err = %v, want it to name the step and the exit code\nprogress:\n%s", err, progress.String())
	}
}

func TestIsCurated(t *testing.T) {
	for ref, want := range map[string]bool{
		"hutch-sandbox:1":                     true,
		"hutch-sandbox":                       true,
		"docker.io/library/hutch-sandbox:dev": true,
		"localhost/hutch-sandbox:v2":          true,
		"hutch-sandbox@sha256:0123":           true,
		"hutch-sandbox-extra:1":               false,
		"example.com/hutch-sandbox:1":         false,
		"docker.io/someone/hutch-sandbox:1":   false,
		"hutch-test-busybox:1":                false,
		"":                                    false,
	} {
		if got := IsCurated(ref); got != want {
			t.Errorf("IsCurated(%q) = %v, want %v", ref, got, want)
		}
	}
}
