package box_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/hutchsandbox/hutch/internal/engine"
	"github.com/hutchsandbox/hutch/internal/project"
	"github.com/hutchsandbox/hutch/internal/testenv"
)

// TestBox_RecipeBuild builds the generated image through the Engine API,
// on the local Debian base when no registry answers: the build's step
// lines reach the Progress writer, the packages asked for are there, an
// unchanged recipe is a cache hit (no build, no base resolution, same
// image), and changed packages make another tag.
//
// Slow: two image builds with apt-get from a Debian mirror (the base
// tools include node and npm), a few minutes; the local base is built
// with debootstrap first when the engine has neither it nor
// debian:bookworm-slim.
func TestBox_RecipeBuild(t *testing.T) {
	slow(t)
	buildsImages(t)
	// A setup line of the test's own makes the tags this run's alone, so
	// removing them cannot disturb anyone else.
	own := "echo " + testenv.Name(t)
	settings := func(setup ...string) map[string]any {
		return map[string]any{
			project.KeyImage:    "",
			project.KeyBase:     project.DefaultBase,
			project.KeyAgents:   []string{},
			project.KeyPackages: []string{"jq"},
			project.KeySetup:    append([]string{own}, setup...),
			project.KeyUser:     "host",
		}
	}
	f := newFixture(t, settings())
	ctx := context.Background()
	var tags []string
	t.Cleanup(func() {
		// Before the fixture's own cleanup: the container uses the image.
		if _, err := f.cli.ContainerRemove(context.Background(), f.name, client.ContainerRemoveOptions{Force: true}); err != nil && !engine.IsNotFound(err) {
			t.Errorf("removing %s: %v", f.name, err)
		}
		for _, tag := range tags {
			testenv.RemoveImage(t, f.cli, tag)
		}
	})
	// The base, resolved before the clock starts.
	if _, err := f.debianBase(ctx, testWriter{t}); err != nil {
		t.Fatal(err)
	}

	b := f.box(t)
	if b.Spec().Recipe == nil || !strings.HasPrefix(b.Spec().Image, project.ImageRepo+":") {
		t.Fatalf("spec: image %q, recipe %v; want a generated image", b.Spec().Image, b.Spec().Recipe)
	}
	tags = append(tags, b.Spec().Image)
	start := time.Now()
	tg := up(t, b)
	t.Logf("first Up (build): %s", time.Since(start).Round(time.Millisecond))
	// Podman reports short names fully qualified.
	built := strings.TrimPrefix(f.inspect(t, f.name).Container.Config.Image, "docker.io/library/")
	tags = append(tags, built)
	if !strings.HasPrefix(built, project.ImageRepo+":") {
		t.Fatalf("the container runs %q, not a generated image", built)
	}
	// Docker's builder says "Step 1/9", Podman's "STEP 1/9".
	progress := strings.ReplaceAll(f.progress.String(), "STEP ", "Step ")
	// The base has bash: apt-get installs the rest, and nothing else.
	// The engine may have the install step cached from another build of
	// the same lines on the same base; then the tools are checked below.
	install := "hutch: installing with apt-get: ca-certificates curl git openssh-client less procps jq\n"
	if installStepCached(progress) {
		install = "Using cache"
	}
	for _, want := range []string{"Building the sandbox image", "Step 1/", install, "Successfully tagged ", built, "Sandbox ready"} {
		if !strings.Contains(progress, want) {
			t.Errorf("build progress lacks %q:\n%s", want, progress)
		}
	}
	if out := mustRun(t, tg, "", "sh", "-c", `echo '{"a":{"b":42}}' | jq .a.b`); out != "42\n" {
		t.Errorf("jq in the sandbox: %q", out)
	}
	// The generated image opens /sandbox/home to any uid itself.
	if out := mustRun(t, tg, "", "sh", "-c", "stat -c %a /sandbox/home; echo $HOME; git --version >/dev/null && echo git"); out != "777\n/sandbox/home\ngit\n" {
		t.Errorf("the generated image's home and tools: %q", out)
	}
	id := imageID(t, f, built)

	// The same recipe again: the image is found, nothing is built.
	if _, err := b.Down(ctx, false); err != nil {
		t.Fatal(err)
	}
	f.progress = syncBuffer{}
	start = time.Now()
	b = f.box(t)
	up(t, b)
	t.Logf("second Up (same recipe): %s", time.Since(start).Round(time.Millisecond))
	if again := strings.TrimPrefix(f.inspect(t, f.name).Container.Config.Image, "docker.io/library/"); again != built || imageID(t, f, again) != id {
		t.Errorf("the second Up runs %s (%s), want %s (%s)", again, imageID(t, f, again), built, id)
	}
	for _, unwanted := range []string{"Building", "step ", "pulling", "Base image"} {
		if strings.Contains(strings.ToLower(f.progress.String()), strings.ToLower(unwanted)) {
			t.Errorf("the second Up with an unchanged recipe did more than find the image (%q):\n%s", unwanted, f.progress.String())
		}
	}

	// Another setup line: another tag, built by a rebuild. (A change of
	// the packages would make the same point at the cost of a second
	// apt-get; the builder takes the unchanged layers from its cache.)
	f.writeSettings(t, settings("touch /usr/local/second-setup"))
	b2 := f.box(t)
	if b2.Spec().Image == b.Spec().Image {
		t.Fatalf("changing the setup kept the tag %s", b2.Spec().Image)
	}
	tags = append(tags, b2.Spec().Image)
	s, err := b2.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !containsNote(s.Notes, "older settings") {
		t.Errorf("status after changing the setup lacks the rebuild note: %q", s.Notes)
	}
	f.progress = syncBuffer{}
	start = time.Now()
	tg, err = b2.Rebuild(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tg.Agent().Close() })
	t.Logf("rebuild with another setup line: %s", time.Since(start).Round(time.Millisecond))
	rebuilt := strings.TrimPrefix(f.inspect(t, f.name).Container.Config.Image, "docker.io/library/")
	tags = append(tags, rebuilt)
	if rebuilt == built || !strings.Contains(strings.ToLower(f.progress.String()), "step 1/") {
		t.Errorf("the rebuild runs %s (first %s); progress:\n%s", rebuilt, built, f.progress.String())
	}
	if out := mustRun(t, tg, "", "sh", "-c", "command -v jq && ls /usr/local/second-setup"); out != "/usr/bin/jq\n/usr/local/second-setup\n" {
		t.Errorf("the rebuilt image's packages and setup: %q", out)
	}
}

func imageID(t *testing.T, f *fixture, ref string) string {
	t.Helper()
	img, err := f.cli.ImageInspect(context.Background(), ref)
	if err != nil {
		t.Fatal(err)
	}
	return img.ID
}

// testWriter logs what is written to it.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// installStepCached reports whether the build progress shows the
// recipe's package step (the RUN that echoes "installing with") taken
// from the engine's cache.
func installStepCached(progress string) bool {
	_, rest, ok := strings.Cut(progress, `echo "hutch: installing with $pm:$need"`)
	if !ok {
		return false
	}
	step, _, _ := strings.Cut(rest, "Step ")
	return strings.Contains(step, "Using cache")
}
