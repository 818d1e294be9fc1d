package box_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/hutchsandbox/hutch/internal/devcontainer/features/featuretest"
	"github.com/hutchsandbox/hutch/internal/project"
	"github.com/hutchsandbox/hutch/internal/testenv"
)

// TestCLI_DevcontainerFeatures: `hutch project up` installs the features
// of a devcontainer.json between the image its Dockerfile builds and
// hutch's layers: a local one, and one named at ghcr.io that the
// in-process registry serves as its mirror (HUTCH_FEATURE_MIRRORS). The
// install scripts are told the file's remoteUser and the base image's
// containerUser (its devcontainer.metadata); the features' containerEnv
// is in the image's environment, PATH included; their lifecycle commands
// run in the sandbox, from the image's label, which keeps the base's
// entries first. up reuses the features image; rebuild installs them
// again. A feature that cannot be fetched, and a mirror variable that
// does not parse, are errors that say what to do.
func TestCLI_DevcontainerFeatures(t *testing.T) {
	buildsImages(t)
	f := newFixture(t, map[string]any{project.KeyImage: "", project.KeyAgents: []string{}, project.KeyUser: "root"})
	b := f.trackBuilds(t)
	b.recipes = true
	reg := featuretest.NewRegistry(t)
	reg.Push(t, "devcontainers/features/tool:1", featuretest.Files{
		"devcontainer-feature.json": `{"id": "tool", "version": "1.0.0", "name": "tool",
			"options": {"flavour": {"type": "string", "default": "plain"}},
			"containerEnv": {"TOOL_HOME": "/opt/tool", "PATH": "/opt/tool/bin:${PATH}"},
			"postStartCommand": "echo tool-post-start >> \"$LOG\"", "entrypoint": "/usr/local/share/tool-init.sh"}`,
		"install.sh": "#!/bin/sh\nset -e\nmkdir -p /opt/tool/bin\nprintf '#!/bin/sh\\necho tool %s\\n' \"$FLAVOUR\" > /opt/tool/bin/tool\nchmod 0755 /opt/tool/bin/tool\n" +
			"echo \"$_REMOTE_USER $_CONTAINER_USER\" > /opt/tool/users\n",
	})
	f.extraEnv = []string{"HUTCH_FEATURE_MIRRORS=ghcr.io=" + reg.Host}
	baseLabel := `[{"containerUser": "daemon", "postCreateCommand": "echo base-post-create >> \"$LOG\""}]`
	f.files(t, map[string]string{
		".devcontainer/devcontainer.json": `{
  "build": {"dockerfile": "Dockerfile"},
  "remoteUser": "nobody",
  "containerEnv": {"LOG": "${containerWorkspaceFolder}/lifecycle.log"},
  "features": {
    "ghcr.io/devcontainers/features/tool:1": {"flavour": "spicy"},
    "./greeter": {}
  },
  "postCreateCommand": "echo file-post-create >> \"$LOG\"",
  "shutdownAction": "none"
}`,
		".devcontainer/Dockerfile": "FROM " + f.busybox + "\n" + stubManager("apk") + "LABEL devcontainer.metadata='" + baseLabel + "'\n",
		".devcontainer/greeter/devcontainer-feature.json": `{"id": "greeter", "version": "1.0.0", "name": "greeter",
  "containerEnv": {"GREETER": "on"}, "installsAfter": ["ghcr.io/devcontainers/features/tool"],
  "postCreateCommand": "echo greeter-post-create \"$(tool)\" >> \"$LOG\""}`,
		".devcontainer/greeter/install.sh": "#!/bin/sh\necho greeter > /opt/greeter-installed\n",
	})
	f.mustHutch(t, "trust")
	progress := b.up(t, "up")
	if !strings.Contains(progress, "Installing features into "+project.FeaturesRepo+":") || !strings.Contains(progress, ": ghcr.io/devcontainers/features/tool:1, ./greeter…") {
		t.Errorf("up does not say it installs the features, in order:\n%s", progress)
	}
	for _, want := range []string{
		// A feature's commands are named by the feature.
		"Running postStartCommand from the feature ghcr.io/devcontainers/features/tool:1 (in the image's devcontainer.metadata)…",
		`Feature ghcr.io/devcontainers/features/tool:1 has an entrypoint ("/usr/local/share/tool-init.sh"), which the sandbox does not run`,
	} {
		if !strings.Contains(progress, want) {
			t.Errorf("up does not say %q:\n%s", want, progress)
		}
	}

	out, _ := f.mustHutch(t, "exec", "--", "sh", "-c", `tool; cat /opt/tool/users /opt/greeter-installed; echo "$TOOL_HOME $GREETER"; cat lifecycle.log`)
	want := "tool spicy\nnobody daemon\ngreeter\n/opt/tool on\nbase-post-create\ngreeter-post-create tool spicy\nfile-post-create\ntool-post-start\n"
	if diff := cmp.Diff(want, out); diff != "" {
		t.Errorf("the sandbox (-want +got):\n%s\nprogress:\n%s", diff, progress)
	}
	// The features image's label: the base's entries first, then the
	// features', in install order; the file's own are not in it (they are
	// applied from the file).
	in := f.inspect(t, f.name)
	img, err := f.cli.ImageInspect(context.Background(), in.Container.Config.Image)
	if err != nil {
		t.Fatal(err)
	}
	var label []map[string]any
	if err := json.Unmarshal([]byte(img.Config.Labels["devcontainer.metadata"]), &label); err != nil {
		t.Fatalf("label: %v", err)
	}
	var ids []any
	for _, e := range label {
		ids = append(ids, e["id"])
	}
	if len(label) != 3 || label[0]["containerUser"] != "daemon" || !cmp.Equal(ids, []any{nil, "ghcr.io/devcontainers/features/tool:1", "./greeter"}) {
		t.Errorf("the image's devcontainer.metadata: %v", img.Config.Labels["devcontainer.metadata"])
	}

	// up after down finds the features image; rebuild installs anew.
	f.mustHutch(t, "down")
	if progress := b.up(t, "up"); strings.Contains(progress, "Installing features") {
		t.Errorf("up with the features image present installs them again:\n%s", progress)
	}
	if progress := b.up(t, "rebuild"); !strings.Contains(progress, "Installing features into") {
		t.Errorf("rebuild does not install the features again:\n%s", progress)
	}
	// An edit to a local feature is a new image (after approval).
	f.files(t, map[string]string{".devcontainer/greeter/install.sh": "#!/bin/sh\necho greeter 2 > /opt/greeter-installed\n"})
	f.mustHutch(t, "trust")
	b.up(t, "rebuild")
	if out, _ := f.mustHutch(t, "exec", "--", "cat", "/opt/greeter-installed"); out != "greeter 2\n" {
		t.Errorf("after editing the local feature: %q", out)
	}

	// A mirror variable that does not parse: named, with what to write.
	f.extraEnv = []string{"HUTCH_FEATURE_MIRRORS=ghcr.io"}
	_, errOut, code := f.hutch(t, "rebuild")
	if code == 0 || !strings.Contains(errOut, `HUTCH_FEATURE_MIRRORS is invalid: "ghcr.io" is not registry=mirror; write registry=mirror, each a host with an optional port, e.g. ghcr.io=registry.internal:5000 (pairs separated by commas), or unset it.`) {
		t.Errorf("rebuild with a bad HUTCH_FEATURE_MIRRORS: exit %d\n%s", code, errOut)
	}
	f.extraEnv = []string{"HUTCH_FEATURE_MIRRORS=ghcr.io=" + reg.Host}

	// A feature no registry has: named, with where it came from and
	// what to do.
	dc := filepath.Join(f.project, ".devcontainer", "devcontainer.json")
	data, err := os.ReadFile(dc)
	if err != nil {
		t.Fatal(err)
	}
	f.files(t, map[string]string{".devcontainer/devcontainer.json": strings.Replace(string(data), "features/tool:1", "features/absent:1", 1)})
	f.mustHutch(t, "trust")
	_, errOut, code = f.hutch(t, "rebuild")
	wantErr := "Could not install the features of " + dc + ": feature ghcr.io/devcontainers/features/absent:1: not found in registry " + reg.Host + " (the mirror of ghcr.io)"
	if code == 0 || !strings.Contains(errOut, wantErr) || !strings.Contains(errOut, "Fix or remove that feature in "+dc+", or set sandbox-image to an image that has what it installs") {
		t.Errorf("rebuild with a feature that cannot be fetched: exit %d\n%s", code, errOut)
	}
}

// TestCLI_DevcontainerFeaturesOffline: under sandbox-network allowlist
// the features are installed without a network, as the devcontainer's
// Dockerfile is built, and an install script that downloads fails with
// an error that says why and what to do. A feature whose metadata binds
// the engine's socket is refused before its install script runs.
func TestCLI_DevcontainerFeaturesOffline(t *testing.T) {
	buildsImages(t)
	f := newFixture(t, map[string]any{project.KeyImage: "", project.KeyAgents: []string{}, project.KeyUser: "root",
		project.KeyNetwork: "allowlist", project.KeyNetworkAllow: "example.com"})
	b := f.trackBuilds(t)
	b.recipes = true
	f.files(t, map[string]string{
		".devcontainer/devcontainer.json":                 `{"image": "` + f.busybox + `", "features": {"./fetcher": {}}, "shutdownAction": "none"}`,
		".devcontainer/fetcher/devcontainer-feature.json": `{"id": "fetcher"}`,
		".devcontainer/fetcher/install.sh":                "#!/bin/sh\nset -e\n: " + testenv.Name(t) + "\nwget -q -T 3 -O /dev/null http://example.com/\n",
	})
	f.mustHutch(t, "trust")
	_, errOut, code := f.hutch(t, "up")
	b.record(errOut)
	dc := filepath.Join(f.project, ".devcontainer", "devcontainer.json")
	if want := "Could not install the features of " + dc + ": "; code == 0 || !strings.Contains(errOut, want) ||
		!strings.Contains(errOut, "The features are installed without a network because sandbox-network is allowlist, and install scripts usually download what they install.") {
		t.Errorf("up with a feature that downloads, offline: exit %d\n%s", code, errOut)
	}

	f.files(t, map[string]string{
		".devcontainer/fetcher/devcontainer-feature.json": `{"id": "fetcher", "mounts": [{"source": "/var/run/docker.sock", "target": "/var/run/docker-host.sock", "type": "bind"}]}`,
		".devcontainer/fetcher/install.sh":                "#!/bin/sh\ntouch /ran\n",
	})
	f.mustHutch(t, "trust")
	_, errOut, code = f.hutch(t, "up")
	b.record(errOut)
	if code == 0 || !strings.Contains(errOut, "Refusing to mount /var/run/docker.sock at /var/run/docker-host.sock") ||
		!strings.Contains(errOut, "The feature ./fetcher asks for it in its metadata; remove that feature from "+dc) || strings.Contains(errOut, "Installing features") {
		t.Errorf("up with a feature that mounts the engine's socket: exit %d\n%s", code, errOut)
	}
}
