package engine_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hutchsandbox/hutch/internal/engine"
	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/testenv"
)

// connect returns the engine the environment names (Docker, or Podman
// through DOCKER_HOST) and its tiny busybox image.
func connect(t *testing.T) (*engine.Engine, string) {
	t.Helper()
	cli := testenv.Docker(t)
	busybox := testenv.BusyboxImage(t, cli)
	eng, err := engine.Connect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = eng.Close() })
	return eng, busybox
}

// removeImage removes tag when the test ends.
func removeImage(t *testing.T, eng *engine.Engine, tag string) {
	t.Cleanup(func() { testenv.RemoveImage(t, eng.Client, tag) })
}

func put(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestBuildDir builds a devcontainer-style Dockerfile with a context on
// the engine: BuildKit on Docker, Buildah behind Podman. The Dockerfile's
// RUN steps are the assertions: build args and the target stage apply,
// RUN --mount=type=cache works, a link in the context arrives as a link,
// a FIFO and what .dockerignore names do not arrive at all, and an
// offline build has no network but loopback. A "# syntax=" line naming a
// frontend the engine lacks does not stop the build. A second build, its
// Dockerfile outside the context, fails at a RUN step and says which.
func TestBuildDir(t *testing.T) {
	eng, busybox := connect(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	root := t.TempDir()
	put(t, filepath.Join(root, "keep"), "kept")
	put(t, filepath.Join(root, "ignored", "big"), "left out")
	put(t, filepath.Join(root, ".dockerignore"), "ignored\n")
	if err := os.Symlink("/etc/shadow", filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mkfifo(filepath.Join(root, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Every run's steps are its own: a step the builder took from its
	// cache would assert nothing.
	nonce := ": " + testenv.Name(t) + " && "
	df := "# syntax=hutch-test/no-such-frontend:1\n" +
		"FROM " + busybox + " AS base\n" +
		"ARG GREETING\n" +
		"RUN " + nonce + "test \"$GREETING\" = hello\n" +
		"RUN --mount=type=cache,target=/cache touch /cache/x\n" +
		"COPY . /ctx\n" +
		"RUN " + nonce + "test -L /ctx/link && test \"$(readlink /ctx/link)\" = /etc/shadow \\\n" +
		" && test -f /ctx/keep && test ! -e /ctx/fifo && test ! -e /ctx/ignored\n" +
		// No network but loopback: /proc/net/dev lists the interfaces of
		// the step's own network namespace (/sys/class/net may be the
		// host's sysfs).
		"RUN " + nonce + "test \"$(tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ')\" = lo\n" +
		"FROM base AS never\n" +
		"RUN false\n"
	dfPath := filepath.Join(root, ".devcontainer", "Dockerfile")
	put(t, dfPath, "FROM the-file-as-it-is-now\n") // what is built is the content given
	tag := "hutch-test-builddir:" + testenv.Name(t)
	removeImage(t, eng, tag)
	var out bytes.Buffer
	err := eng.BuildDir(ctx, engine.DirBuild{
		Root: root, Context: root, DockerfilePath: dfPath, Dockerfile: []byte(df),
		Args: map[string]string{"GREETING": "hello"}, Target: "base", Tag: tag, Offline: true,
	}, &out)
	if err != nil {
		t.Fatalf("BuildDir: %v\n%s", err, out.String())
	}
	if _, err := eng.Client.ImageInspect(ctx, tag); err != nil {
		t.Fatalf("the built image: %v", err)
	}
	if eng.BuildKit() && !strings.Contains(out.String(), "hutch-test/no-such-frontend:1") {
		t.Errorf("progress does not say the frontend was left out:\n%s", out.String())
	}
	t.Logf("BuildKit %v; progress:\n%s", eng.BuildKit(), out.String())

	// The Dockerfile outside the context (in the project), a failing step.
	app := filepath.Join(root, "app")
	put(t, filepath.Join(app, "main.go"), "package main\n")
	// The classic builder leaves out what the tar's .dockerignore names:
	// the Dockerfile's generated name. BuildKit reads no .dockerignore in
	// a tar context, so there COPY . copies that file too.
	check := "test -f /app/main.go"
	if !eng.BuildKit() {
		check += " && ! ls -a /app | grep -q dockerfile"
	}
	// A build with a network still has a network namespace of its own:
	// Podman's build endpoint would run it in the host's, where it could
	// reach the host's loopback services.
	hostNet, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	check += " && test \"$(readlink /proc/self/ns/net)\" != '" + hostNet + "'"
	df = "FROM " + busybox + "\nCOPY . /app\nRUN " + nonce + check + "\nRUN echo about to fail; exit 3\n"
	out.Reset()
	err = eng.BuildDir(ctx, engine.DirBuild{Root: root, Context: app, DockerfilePath: dfPath, Dockerfile: []byte(df), Tag: tag + "-fails"}, &out)
	if err == nil || !strings.Contains(err.Error(), "exit 3") && !strings.Contains(err.Error(), "exit code: 3") && !strings.Contains(err.Error(), "non-zero code: 3") {
		t.Fatalf("err = %v, want the failed step and its exit code\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "about to fail") {
		t.Errorf("the failing step's output is not in the progress:\n%s", out.String())
	}
}

// TestBuildDir_OfflineRefusesFetches: an offline build that needs an
// image the engine lacks, or downloads with ADD, is refused before the
// engine sees it: the engine's fetches are outside the build's network.
func TestBuildDir_OfflineRefusesFetches(t *testing.T) {
	eng, busybox := connect(t)
	root := t.TempDir()
	for df, want := range map[string]string{
		"FROM hutch-test-not-here:1\n":                         "line 1 of the Dockerfile (FROM) needs the image hutch-test-not-here:1",
		"FROM " + busybox + "\nADD https://example.com/x /x\n": "line 2 of the Dockerfile (ADD https://example.com/x) downloads",
	} {
		err := eng.BuildDir(context.Background(), engine.DirBuild{Root: root, Context: root, DockerfilePath: filepath.Join(root, "Dockerfile"), Dockerfile: []byte(df), Tag: "hutch-test-never:1", Offline: true}, nil)
		var off *engine.OfflineError
		if !errors.As(err, &off) || !errdefs.IsFailedPrecondition(err) || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: err = %v, want an OfflineError saying %q", df, err, want)
		}
	}
}
