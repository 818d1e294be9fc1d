package box_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/moby/moby/client"

	"github.com/hutchsandbox/hutch/internal/engine"
	"github.com/hutchsandbox/hutch/internal/project"
	"github.com/hutchsandbox/hutch/internal/testenv"
)

// files writes the project files named (relative paths) with their
// contents.
func (f *fixture) files(t *testing.T, files map[string]string) {
	t.Helper()
	for rel, body := range files {
		p := filepath.Join(f.project, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// builds are the devcontainer builds a test's sandbox was made from.
type builds struct {
	f    *fixture
	tags map[string]bool
	// recipes: the recipe images the progress says were built are the
	// test's own too (they are built on a features image of its own).
	recipes bool
}

// trackBuilds removes, when the test ends, the images the project's
// sandbox ran (its container first, which uses them) and the
// devcontainer builds up and rebuild made: their tags are the project's
// own.
func (f *fixture) trackBuilds(t *testing.T) *builds {
	t.Helper()
	b := &builds{f: f, tags: map[string]bool{}}
	t.Cleanup(func() {
		ctx := context.Background()
		var refs []string
		if res, err := f.cli.ContainerInspect(ctx, f.name, client.ContainerInspectOptions{}); err == nil && res.Container.Config != nil {
			refs = append(refs, res.Container.Config.Image)
		}
		if _, err := f.cli.ContainerRemove(ctx, f.name, client.ContainerRemoveOptions{Force: true}); err != nil && !engine.IsNotFound(err) {
			t.Errorf("removing %s: %v", f.name, err)
		}
		for tag := range b.tags {
			refs = append(refs, tag)
		}
		for _, ref := range refs {
			testenv.RemoveImage(t, f.cli, ref)
		}
	})
	return b
}

// up runs `hutch project <cmd>` (up or rebuild), which must succeed, and
// records the devcontainer build and features image it says it made. It
// returns the progress (stderr).
func (b *builds) up(t *testing.T, cmd string) string {
	t.Helper()
	_, errOut := b.f.mustHutch(t, cmd)
	b.record(errOut)
	return errOut
}

// record notes the devcontainer builds and features images progress
// says were made.
func (b *builds) record(progress string) {
	for _, line := range strings.Split(progress, "\n") {
		if rest, ok := strings.CutPrefix(line, "Building "+project.BuildRepo+":"); ok {
			tag, _, _ := strings.Cut(rest, " ")
			b.tags[project.BuildRepo+":"+tag] = true
		}
		if rest, ok := strings.CutPrefix(line, "Installing features into "+project.FeaturesRepo+":"); ok {
			tag, _, _ := strings.Cut(rest, ":")
			b.tags[project.FeaturesRepo+":"+tag] = true
		}
		if rest, ok := strings.CutPrefix(line, "Building the sandbox image "+project.ImageRepo+":"); ok && b.recipes {
			b.tags[project.ImageRepo+":"+strings.TrimSuffix(rest, "…")] = true
		}
	}
}

// stubManager is a shell script standing in for a package manager in a
// busybox image (no registry here serves Alpine or Fedora): it logs how
// it was called to /var/log/stub-pm, answers a query for a package it
// "installed" (a file in /var/lib/stub) with success, and "installs" a
// package by making that file. It is written into the image with
// printf, one line per argument.
func stubManager(name string) string {
	lines := []string{
		"#!/bin/sh",
		`echo "` + name + ` $*" >> /var/log/stub-pm`,
		`for a in "$@"; do case "$a" in -*|info|add|install|clean|all|-q) ;; *) last=$a;; esac; done`,
		`case "$1" in`,
		`  info|-q) [ -e "/var/lib/stub/$last" ];;`,
		`  add|install) shift; for p in "$@"; do case "$p" in -*) ;; *) touch "/var/lib/stub/$p";; esac; done;;`,
		`esac`,
	}
	quoted := make([]string, len(lines))
	for i, l := range lines {
		quoted[i] = "'" + strings.ReplaceAll(l, "'", `'\''`) + "'"
	}
	return "RUN mkdir -p /var/lib/stub /var/log /usr/local/bin && printf '%s\\n' " + strings.Join(quoted, " ") + " > /usr/local/bin/" + name + " && chmod 0755 /usr/local/bin/" + name + "\n"
}

// TestCLI_DevcontainerBuild: `hutch project up` builds the Dockerfile a
// devcontainer.json names, with its context and args, and puts hutch's
// layers on top, installing with the package manager the image has (an
// apk stand-in here) only what it lacks. rebuild builds the Dockerfile
// again, so a change to the context reaches the sandbox.
func TestCLI_DevcontainerBuild(t *testing.T) {
	buildsImages(t)
	f := newFixture(t, map[string]any{project.KeyImage: "", project.KeyAgents: []string{}, project.KeyUser: "root"})
	b := f.trackBuilds(t)
	f.files(t, map[string]string{
		".devcontainer/devcontainer.json": `{
  // As the world writes them: comments, the context one folder up.
  "name": "built",
  "build": {"dockerfile": "Dockerfile", "context": "..", "args": {"GREETING": "hello"}},
  "shutdownAction": "none"
}`,
		".devcontainer/Dockerfile": "FROM " + f.busybox + "\nARG GREETING\nRUN echo \"$GREETING\" > /greeting\nCOPY app/ /app/\n" + stubManager("apk"),
		"app/main.go":              "package main\n",
	})
	f.mustHutch(t, "trust")
	progress := b.up(t, "up")
	if !strings.Contains(progress, "Building "+project.BuildRepo+":") {
		t.Errorf("up does not say it builds the Dockerfile:\n%s", progress)
	}
	out, _ := f.mustHutch(t, "exec", "--", "sh", "-c", "cat /greeting /app/main.go /var/log/stub-pm")
	// busybox has less and ps: only the rest is installed, by the
	// names apk knows them by, after a query for each.
	if !strings.HasPrefix(out, "hello\npackage main\n") || !strings.Contains(out, "apk info -e openssh-client\n") ||
		!strings.HasSuffix(out, "apk add --no-cache ca-certificates curl git openssh-client bash\n") {
		t.Errorf("the sandbox's image:\n%s", out)
	}

	// rebuild builds the Dockerfile again: the context changed, the
	// Dockerfile did not.
	f.files(t, map[string]string{"app/added.txt": "added\n"})
	b.up(t, "rebuild")
	if out, _ := f.mustHutch(t, "exec", "--", "cat", "/app/added.txt"); out != "added\n" {
		t.Errorf("after rebuild, the context's new file: %q", out)
	}
	// Nothing changed: the builder's cache gives the same image, and the
	// recipe's layers on it are reused.
	if progress := b.up(t, "rebuild"); !strings.Contains(progress, "Building "+project.BuildRepo+":") || strings.Contains(progress, "Building the sandbox image") {
		t.Errorf("a rebuild with nothing changed:\n%s", progress)
	}
}

// TestCLI_RecipeOnRPM: on an image with dnf (a stand-in), the recipe
// installs what is missing by Fedora's names, and leaves out the tools
// the image has already, whoever installed them. (Its rpm queries reach
// busybox's own rpm applet, which busybox's shell prefers to anything on
// PATH; with no package database it finds nothing installed.)
func TestCLI_RecipeOnRPM(t *testing.T) {
	buildsImages(t)
	f := newFixture(t, map[string]any{project.KeyImage: "", project.KeyAgents: []string{}, project.KeyUser: "root", project.KeyPackages: []string{"jq"}})
	b := f.trackBuilds(t)
	tools := "RUN printf '#!/bin/sh\\n' > /usr/local/bin/curl && cp /usr/local/bin/curl /usr/local/bin/git && chmod 0755 /usr/local/bin/curl /usr/local/bin/git\n"
	f.files(t, map[string]string{
		".devcontainer/devcontainer.json": `{"build": {"dockerfile": "Dockerfile"}, "shutdownAction": "none"}`,
		".devcontainer/Dockerfile":        "FROM " + f.busybox + "\n" + stubManager("dnf") + tools,
	})
	f.mustHutch(t, "trust")
	b.up(t, "up")
	out, _ := f.mustHutch(t, "exec", "--", "cat", "/var/log/stub-pm")
	if out != "dnf install -y ca-certificates openssh-clients bash jq\ndnf clean all\n" {
		t.Errorf("the package manager's calls:\n%s", out)
	}
}

// TestCLI_RecipeWithoutPackageManager: a base with no package manager
// hutch knows, lacking tools, is an error that says what is missing and
// what to do, not a raw build error; one that lacks nothing needs no
// package manager (and no network).
func TestCLI_RecipeWithoutPackageManager(t *testing.T) {
	buildsImages(t)
	f := newFixture(t, map[string]any{project.KeyImage: "", project.KeyBase: testenv.BusyboxRef, project.KeyAgents: []string{}, project.KeyUser: "root"})
	b := f.trackBuilds(t)
	_, errOut, code := f.hutch(t, "up")
	want := "Could not build the sandbox image: The base image " + testenv.BusyboxRef + " has no package manager hutch knows (apt-get, apk, dnf, microdnf, yum, zypper) to install what the sandbox needs, and lacks ca-certificates, curl, git, openssh-client, bash. Set sandbox-image to an image that has them, or sandbox-base to a Debian, Ubuntu, Alpine or Fedora image."
	if code == 0 || !strings.Contains(errOut, want) {
		t.Errorf("up on busybox: exit %d\n%s", code, errOut)
	}
	if strings.Contains(errOut, "The command '/bin/sh") && strings.Contains(errOut, "hutch: error") {
		t.Errorf("the raw build error is the message:\n%s", errOut)
	}

	// Everything there: no package manager needed.
	have := "RUN mkdir -p /etc/ssl/certs && touch /etc/ssl/certs/ca-certificates.crt && for c in curl git ssh bash; do printf '#!/bin/sh\\n' > /usr/local/bin/$c && chmod 0755 /usr/local/bin/$c; done\n"
	f.files(t, map[string]string{
		".devcontainer/devcontainer.json": `{"build": {"dockerfile": "Dockerfile"}, "shutdownAction": "none"}`,
		".devcontainer/Dockerfile":        "FROM " + f.busybox + "\n" + have,
	})
	f.mustHutch(t, "trust")
	if progress := b.up(t, "up"); !strings.Contains(progress, "hutch: every package is there already") {
		t.Errorf("up on a base with every tool:\n%s", progress)
	}
}

// TestCLI_MissingUserLeavesNoContainer: an image without the user
// devcontainer.json names (remoteUser) cannot start the container; the
// error says which user, where it was named and what to do, and the
// container hutch made is gone, so the next up tries afresh rather than
// starting the same one again.
func TestCLI_MissingUserLeavesNoContainer(t *testing.T) {
	t.Parallel()
	f := newFixture(t, map[string]any{project.KeyUser: ""})
	dc := filepath.Join(f.project, ".devcontainer.json")
	f.files(t, map[string]string{".devcontainer.json": `{"image": "` + f.busybox + `", "remoteUser": "node", "shutdownAction": "none"}`})
	f.mustHutch(t, "trust")
	want := `could not start: the user "node" (remoteUser in ` + dc + `) does not exist in the image ` + f.busybox + `. Name a user the image has, create that user in the image, or run the sandbox as yourself (hutch project settings set sandbox-user host). hutch removed the container it could not start, so the next ` + "`hutch project up`" + ` makes it afresh.`
	for i := range 2 {
		_, errOut, code := f.hutch(t, "up")
		if code == 0 || !strings.Contains(errOut, want) {
			t.Errorf("up %d: exit %d\n%s", i+1, code, errOut)
		}
		if exists, _ := f.running(t, f.name); exists {
			t.Fatalf("up %d left the container %s", i+1, f.name)
		}
	}
	// Fixed: it comes up.
	f.writeSettings(t, map[string]any{project.KeyImage: f.busybox, project.KeyUser: "root"})
	f.mustHutch(t, "up")
}

// TestCLI_DevcontainerBuildOffline: under sandbox-network allowlist the
// build has no network, and says so when that is why it failed; a
// Dockerfile that would make the engine pull is refused before it runs.
func TestCLI_DevcontainerBuildOffline(t *testing.T) {
	buildsImages(t)
	f := newFixture(t, map[string]any{project.KeyImage: "", project.KeyAgents: []string{}, project.KeyUser: "root",
		project.KeyNetwork: "allowlist", project.KeyNetworkAllow: "example.com"})
	builds := f.trackBuilds(t)
	df := filepath.Join(f.project, ".devcontainer", "Dockerfile")
	f.files(t, map[string]string{
		".devcontainer/devcontainer.json": `{"build": {"dockerfile": "Dockerfile"}, "shutdownAction": "none"}`,
		".devcontainer/Dockerfile":        "FROM hutch-test-not-here:1\n",
	})
	f.mustHutch(t, "trust")
	_, errOut, code := f.hutch(t, "up")
	if want := "Could not build the image of " + df + ": the build has no network because sandbox-network is allowlist, and line 1 of the Dockerfile (FROM) needs the image hutch-test-not-here:1, which the engine does not have and would pull from a registry. Pull it yourself (docker pull hutch-test-not-here:1), or set sandbox-network to open"; code == 0 || !strings.Contains(errOut, want) {
		t.Errorf("up with a FROM to pull: exit %d\n%s", code, errOut)
	}

	download := "wget -q -T 3 -O /dev/null http://example.com/"
	// Each edit of the Dockerfile needs approval again.
	f.files(t, map[string]string{".devcontainer/Dockerfile": "FROM " + f.busybox + "\nRUN : " + testenv.Name(t) + "; " + download + "\n"})
	f.mustHutch(t, "trust")
	_, errOut, code = f.hutch(t, "up")
	if want := "The build has no network because sandbox-network is allowlist, so a step that downloads fails."; code == 0 || !strings.Contains(errOut, want) {
		t.Errorf("up with a download: exit %d\n%s", code, errOut)
	}

	// The Dockerfile builds offline; hutch's layers on it run its
	// programs (an apk that downloads), so they get no network either.
	apk := "RUN mkdir -p /usr/local/bin && printf '#!/bin/sh\\ncase \"$1\" in add) " + download + ";; *) exit 1;; esac\\n' > /usr/local/bin/apk && chmod 0755 /usr/local/bin/apk\n"
	f.files(t, map[string]string{".devcontainer/Dockerfile": "FROM " + f.busybox + "\nRUN : " + testenv.Name(t) + "\n" + apk})
	f.mustHutch(t, "trust")
	_, errOut, code = f.hutch(t, "up")
	if want := "whose programs run while they are built, so under sandbox-network allowlist they get no network either"; code == 0 || !strings.Contains(errOut, want) {
		t.Errorf("up with hutch's layers on a built image: exit %d\n%s", code, errOut)
	}
	for _, line := range strings.Split(errOut, "\n") {
		if rest, ok := strings.CutPrefix(line, "Building "+project.BuildRepo+":"); ok {
			tag, _, _ := strings.Cut(rest, " ")
			builds.tags[project.BuildRepo+":"+tag] = true
		}
	}
}
