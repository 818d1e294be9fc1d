package testenv

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/hutchsandbox/hutch/internal/engine"
)

// DevcontainerBaseRef is the image every devcontainer stand-in is built
// FROM: DebianClientsRef with sudo (a passwordless rule for the sudo
// group, which every stand-in user joins) and acl, which the corpus's
// lifecycle commands call. Bump its tag whenever devcontainerBaseDockerfile
// changes, and with it the FROM line of the stand-in checkout
// internal/devcontainer/testdata/checkouts/moby/Dockerfile, which names it.
const DevcontainerBaseRef = "hutch-test-devcontainer-base:1"

// devcontainerBaseDockerfile is built FROM DebianClientsRef (BASE).
const devcontainerBaseDockerfile = `ARG BASE
FROM ${BASE}
ENV DEBIAN_FRONTEND=noninteractive
RUN apt-get update \
 && apt-get install -y --no-install-recommends sudo acl \
 && rm -rf /var/lib/apt/lists/* \
 && echo '%sudo ALL=(ALL) NOPASSWD:ALL' > /etc/sudoers.d/hutch-stand-in \
 && chmod 0440 /etc/sudoers.d/hutch-stand-in
`

// standInVersion marks the stand-ins this code builds, in the
// standInLabel label: an image of a corpus reference that carries an
// older mark is built again; one without the label is a real image and
// is left alone. Bump it whenever devcontainerStandIns changes.
const standInVersion = "3"

// standInLabel is the label that marks an image as a stand-in.
const standInLabel = "org.hutchsandbox.test.devcontainer-stand-in"

// standInPath is the PATH of the Debian base, to which a row's path
// entries are prepended.
const standInPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// standIn describes the local image that stands in for one image
// reference of the devcontainer corpus
// (internal/devcontainer/testdata/corpus): what the real image gives that
// the corpus's files rely on, and no more.
type standIn struct {
	// Ref is the reference exactly as a corpus file names it (after its
	// build args are applied to a FROM line); the stand-in is tagged so.
	Ref string
	// User is the image's non-root user, created with UID 1000 and its own
	// group, a home and bash, in the sudo group; "" when the image has
	// none.
	User string
	// Path is prepended to the PATH, as the real image's ENV does.
	Path []string
	// Env is the rest of the image's ENV that configs rely on.
	Env map[string]string
	// Stubs are executables the real image has and lifecycle commands or
	// Dockerfiles call: each prints its name and arguments to stderr and
	// succeeds.
	Stubs []string
	// NVM adds /usr/local/share/nvm/nvm.sh defining an nvm function that
	// does the same, for Dockerfiles that source it.
	NVM bool
	// SDKMAN adds /usr/local/sdkman/bin/sdkman-init.sh defining an sdk
	// function that does the same, for Dockerfiles that source it.
	SDKMAN bool
	// Packages are Debian packages the real image has and lifecycle
	// commands run for real (make), installed with apt-get.
	Packages []string
	// Metadata is the devcontainer.metadata label, modelled on the real
	// image's; nil for images that carry none.
	Metadata []map[string]any
	// Sidecar images run `sleep infinity` by default, for compose
	// services that give no command.
	Sidecar bool
}

// Feature metadata entries of the official images' labels, as the
// features publish them (devcontainers/features) and the images'
// definitions (devcontainers/images, src/*/.devcontainer) include them.
var (
	mdCommonUtils = map[string]any{"id": "ghcr.io/devcontainers/features/common-utils:2"}
	mdGit         = map[string]any{"id": "ghcr.io/devcontainers/features/git:1"}
	mdNode        = map[string]any{
		"id": "ghcr.io/devcontainers/features/node:1",
		"containerEnv": map[string]any{
			"NVM_DIR":             "/usr/local/share/nvm",
			"NVM_SYMLINK_CURRENT": "true",
			"PATH":                "/usr/local/share/nvm/current/bin:${PATH}",
		},
	}
	mdGo = map[string]any{
		"id": "ghcr.io/devcontainers/features/go:1",
		"containerEnv": map[string]any{
			"GOROOT": "/usr/local/go",
			"GOPATH": "/go",
			"PATH":   "/usr/local/go/bin:/go/bin:${PATH}",
		},
		"capAdd":      []string{"SYS_PTRACE"},
		"securityOpt": []string{"seccomp=unconfined"},
	}
	mdRust = map[string]any{
		"id": "ghcr.io/devcontainers/features/rust:1",
		"containerEnv": map[string]any{
			"CARGO_HOME":  "/usr/local/cargo",
			"RUSTUP_HOME": "/usr/local/rustup",
			"PATH":        "/usr/local/cargo/bin:${PATH}",
		},
		"capAdd":      []string{"SYS_PTRACE"},
		"securityOpt": []string{"seccomp=unconfined"},
	}
	mdPython = map[string]any{
		"id": "ghcr.io/devcontainers/features/python:1",
		"containerEnv": map[string]any{
			"PYTHON_PATH":  "/usr/local/python/current",
			"PIPX_HOME":    "/usr/local/py-utils",
			"PIPX_BIN_DIR": "/usr/local/py-utils/bin",
			"PATH":         "/usr/local/python/current/bin:/usr/local/py-utils/bin:${PATH}",
		},
	}
	mdRuby = map[string]any{
		"id": "ghcr.io/devcontainers/features/ruby:1",
		"containerEnv": map[string]any{
			"GEM_PATH": "/usr/local/rvm/gems/default:/usr/local/rvm/gems/default@global",
			"GEM_HOME": "/usr/local/rvm/gems/default",
			"PATH":     "/usr/local/rvm/gems/default/bin:/usr/local/rvm/gems/default@global/bin:/usr/local/rvm/rubies/default/bin:/usr/local/share/rbenv/bin:${PATH}",
		},
	}
	mdDotnet = map[string]any{
		"id": "ghcr.io/devcontainers/features/dotnet:2",
		"containerEnv": map[string]any{
			"DOTNET_ROOT": "/usr/share/dotnet",
			"PATH":        "/usr/share/dotnet:${PATH}:/home/vscode/.dotnet/tools",
		},
	}
	mdDockerInDocker = map[string]any{
		"id":         "ghcr.io/devcontainers/features/docker-in-docker:2",
		"privileged": true,
		"init":       true,
		"entrypoint": "/usr/local/share/docker-init.sh",
		"mounts": []any{map[string]any{
			"source": "dind-var-lib-docker-${devcontainerId}",
			"target": "/var/lib/docker",
			"type":   "volume",
		}},
		"containerEnv": map[string]any{"DOCKER_BUILDKIT": "1"},
	}
)

// remoteUser is the last entry of an official image's label: the image's
// own devcontainer.json properties.
func remoteUser(user string) map[string]any { return map[string]any{"remoteUser": user} }

// Stubs the rows share.
var (
	stubsNode   = []string{"/usr/local/bin/npm", "/usr/local/bin/npx", "/usr/local/bin/yarn", "/usr/local/bin/corepack"}
	stubsPython = []string{"/usr/local/bin/pip", "/usr/local/bin/pip3", "/usr/local/py-utils/bin/pipx"}
	stubsRuby   = []string{"/usr/local/bin/ruby", "/usr/local/bin/gem", "/usr/local/bin/bundle"}
	stubsGo     = []string{"/usr/local/go/bin/go"}
	stubsRust   = []string{"/usr/local/cargo/bin/cargo", "/usr/local/cargo/bin/rustc", "/usr/local/cargo/bin/rustup"}
	pathsPython = []string{"/usr/local/python/current/bin", "/usr/local/py-utils/bin"}
	pathsGo     = []string{"/usr/local/go/bin", "/go/bin"}
	pathsRust   = []string{"/usr/local/cargo/bin"}
	envGo       = map[string]string{"GOROOT": "/usr/local/go", "GOPATH": "/go"}
	envRust     = map[string]string{"CARGO_HOME": "/usr/local/cargo", "RUSTUP_HOME": "/usr/local/rustup"}
	envNVM      = map[string]string{"NVM_DIR": "/usr/local/share/nvm"}
)

// devcontainerStandIns is one row per image reference the corpus names:
// in "image", in a Dockerfile's FROM line (with the file's build args
// applied) and in a compose file's "image". All are Debian bookworm,
// whatever the real image's distribution; internal/devcontainer/testdata/
// corpus/README.md lists what else differs.
var devcontainerStandIns = []standIn{
	// devcontainers/images src/base-debian (kubernetes, kubernetes-helm,
	// the docker-from-docker-compose Dockerfile): user vscode.
	{Ref: "mcr.microsoft.com/devcontainers/base:bullseye", User: "vscode",
		Metadata: []map[string]any{mdCommonUtils, mdGit, remoteUser("vscode")}},
	// The same image, Debian's current release (llvm).
	{Ref: "mcr.microsoft.com/devcontainers/base:debian", User: "vscode",
		Metadata: []map[string]any{mdCommonUtils, mdGit, remoteUser("vscode")}},
	// src/base-ubuntu (gemini-cli): Ubuntu 22.04 with user vscode.
	{Ref: "mcr.microsoft.com/devcontainers/base:ubuntu-22.04", User: "vscode",
		Metadata: []map[string]any{mdCommonUtils, mdGit, remoteUser("vscode")}},
	// src/base-ubuntu (the codex Dockerfile): Ubuntu 24.04, whose ubuntu
	// user the image replaces with vscode at UID 1000.
	{Ref: "mcr.microsoft.com/devcontainers/base:ubuntu-24.04", User: "vscode",
		Metadata: []map[string]any{mdCommonUtils, mdGit, remoteUser("vscode")}},
	// src/python (django): the python:3 official image with the python
	// feature's tools (pipx, pip) and user vscode.
	{Ref: "mcr.microsoft.com/devcontainers/python:3", User: "vscode", Path: pathsPython, Stubs: stubsPython,
		Metadata: []map[string]any{mdCommonUtils, mdGit, mdPython, remoteUser("vscode")}},
	// src/python, Python 3.11 on bullseye (fastapi).
	{Ref: "mcr.microsoft.com/devcontainers/python:0-3.11-bullseye", User: "vscode", Path: pathsPython, Stubs: stubsPython,
		Metadata: []map[string]any{mdCommonUtils, mdGit, mdPython, remoteUser("vscode")}},
	// src/python, Python 3.12 (home-assistant's Dockerfile.dev, which
	// runs pipx uninstall).
	{Ref: "mcr.microsoft.com/devcontainers/python:1-3.12", User: "vscode", Path: pathsPython, Stubs: stubsPython,
		Metadata: []map[string]any{mdCommonUtils, mdGit, mdPython, remoteUser("vscode")}},
	// The earlier vscode-dev-containers python-3 image (try-python): nvm
	// for its Dockerfile's INSTALL_NODE step, user vscode. Modelled on the
	// later builds of the 0- tags, which carry a label.
	{Ref: "mcr.microsoft.com/vscode/devcontainers/python:0-3.9-bullseye", User: "vscode", Stubs: stubsPython, NVM: true, Env: envNVM,
		Metadata: []map[string]any{mdCommonUtils, remoteUser("vscode")}},
	// src/javascript-node (nextjs): the node:20 official image, its node
	// user kept as the remote user, nvm from the node feature.
	{Ref: "mcr.microsoft.com/devcontainers/javascript-node:1-20-bookworm", User: "node", Stubs: stubsNode, NVM: true, Env: envNVM,
		Metadata: []map[string]any{mdCommonUtils, mdGit, mdNode, remoteUser("node")}},
	// src/javascript-node, Node 22 (typescript).
	{Ref: "mcr.microsoft.com/devcontainers/javascript-node:1-22-bookworm", User: "node", Stubs: stubsNode, NVM: true, Env: envNVM,
		Metadata: []map[string]any{mdCommonUtils, mdGit, mdNode, remoteUser("node")}},
	// The earlier typescript-node image, Node 10 (the vscode Dockerfile).
	{Ref: "mcr.microsoft.com/vscode/devcontainers/typescript-node:0-10", User: "node",
		Stubs: append([]string{"/usr/local/bin/tsc"}, stubsNode...), NVM: true, Env: envNVM,
		Metadata: []map[string]any{mdCommonUtils, remoteUser("node")}},
	// src/go, Go 1.17 (the try-go Dockerfile): Go in /usr/local/go, GOPATH
	// /go, ptrace allowed by the go feature, nvm, user vscode.
	{Ref: "mcr.microsoft.com/devcontainers/go:0-1.17-bullseye", User: "vscode", Path: pathsGo, Env: mergeEnv(envGo, envNVM),
		Stubs: stubsGo, NVM: true,
		Metadata: []map[string]any{mdCommonUtils, mdGo, mdNode, remoteUser("vscode")}},
	// The earlier rust image, buster (the rust Dockerfile with VARIANT
	// buster): cargo and rustup under /usr/local, ptrace allowed, user
	// vscode.
	{Ref: "mcr.microsoft.com/vscode/devcontainers/rust:0-buster", User: "vscode", Path: pathsRust, Env: envRust, Stubs: stubsRust,
		Metadata: []map[string]any{mdCommonUtils, mdRust, remoteUser("vscode")}},
	// src/ruby, Ruby 3.0 (the rails Dockerfile's default VARIANT): gems,
	// bundler, nvm, user vscode.
	{Ref: "mcr.microsoft.com/devcontainers/ruby:0-3.0", User: "vscode", Stubs: stubsRuby, NVM: true, Env: envNVM,
		Metadata: []map[string]any{mdCommonUtils, mdRuby, mdNode, remoteUser("vscode")}},
	// src/ruby, Ruby 3.2 on bullseye (the mastodon Dockerfile).
	{Ref: "mcr.microsoft.com/devcontainers/ruby:1-3.2-bullseye", User: "vscode", Stubs: stubsRuby, NVM: true, Env: envNVM,
		Metadata: []map[string]any{mdCommonUtils, mdRuby, mdNode, remoteUser("vscode")}},
	// The earlier dotnet image, .NET 6 on Ubuntu jammy (the dotnet-runtime
	// Dockerfile with VARIANT 6.0-jammy): dotnet, user vscode.
	{Ref: "mcr.microsoft.com/vscode/devcontainers/dotnet:0-6.0-jammy", User: "vscode",
		Path: []string{"/usr/share/dotnet"}, Env: map[string]string{"DOTNET_ROOT": "/usr/share/dotnet"},
		Stubs:    []string{"/usr/share/dotnet/dotnet"},
		Metadata: []map[string]any{mdCommonUtils, mdDotnet, remoteUser("vscode")}},
	// src/dotnet, .NET 7 (bicep): the dotnet/sdk image, .NET in
	// /usr/share/dotnet, user vscode.
	{Ref: "mcr.microsoft.com/devcontainers/dotnet:0-7.0", User: "vscode",
		Path: []string{"/usr/share/dotnet"}, Env: map[string]string{"DOTNET_ROOT": "/usr/share/dotnet"},
		Stubs:    []string{"/usr/share/dotnet/dotnet"},
		Metadata: []map[string]any{mdCommonUtils, mdGit, remoteUser("vscode")}},
	// src/universal (puppeteer): the Codespaces default image, user
	// codespace as both container and remote user, Docker in Docker
	// (privileged, init, its entrypoint and a volume), many toolchains.
	{Ref: "mcr.microsoft.com/devcontainers/universal:2", User: "codespace",
		Path:  append(append([]string{}, pathsPython...), pathsGo...),
		Env:   mergeEnv(envGo, envNVM),
		Stubs: append(append(append([]string{"/usr/local/share/docker-init.sh"}, stubsNode...), stubsPython...), stubsGo...), NVM: true,
		Metadata: []map[string]any{mdCommonUtils, mdGit, mdNode, mdPython, mdDockerInDocker, mdGo,
			{"remoteUser": "codespace", "containerUser": "codespace"}}},
	// Playwright's image (playwright): Ubuntu with browsers, the user
	// pwuser and no devcontainer.metadata label.
	{Ref: "mcr.microsoft.com/playwright:next", User: "pwuser", Stubs: stubsNode},
	// CPython's own image (cpython): Fedora with dnf and the C toolchain,
	// root only, no label. make is real: the stand-in checkout's Makefiles
	// (internal/devcontainer/testdata/checkouts/cpython) run with it.
	{Ref: "ghcr.io/python/devcontainer:2024.09.25.11038928730", Stubs: []string{"/usr/bin/dnf"}, Packages: []string{"make"}},
	// src/go, Go 1.19 (gh-cli): as go:0-1.17-bullseye.
	{Ref: "mcr.microsoft.com/devcontainers/go:1.19", User: "vscode", Path: pathsGo, Env: mergeEnv(envGo, envNVM),
		Stubs: stubsGo, NVM: true,
		Metadata: []map[string]any{mdCommonUtils, mdGo, mdNode, remoteUser("vscode")}},
	// src/typescript-node, Node 18 on bookworm (the devcontainers-cli
	// Dockerfile with VARIANT 18-bookworm): javascript-node with tsc, user
	// node.
	{Ref: "mcr.microsoft.com/devcontainers/typescript-node:1-18-bookworm", User: "node",
		Stubs: append([]string{"/usr/local/bin/tsc"}, stubsNode...), NVM: true, Env: envNVM,
		Metadata: []map[string]any{mdCommonUtils, mdGit, mdNode, remoteUser("node")}},
	// src/typescript-node, the latest tag (anthropic-sdk-typescript).
	{Ref: "mcr.microsoft.com/devcontainers/typescript-node:latest", User: "node",
		Stubs: append([]string{"/usr/local/bin/tsc"}, stubsNode...), NVM: true, Env: envNVM,
		Metadata: []map[string]any{mdCommonUtils, mdGit, mdNode, remoteUser("node")}},
	// The earlier typescript-node image, Node 10 on buster (docusaurus).
	{Ref: "mcr.microsoft.com/vscode/devcontainers/typescript-node:0-10-buster", User: "node",
		Stubs: append([]string{"/usr/local/bin/tsc"}, stubsNode...), NVM: true, Env: envNVM,
		Metadata: []map[string]any{mdCommonUtils, remoteUser("node")}},
	// The earlier php image, PHP 7 on bullseye (the try-php Dockerfile with
	// VARIANT 7-bullseye): nvm for its NODE_VERSION step, user vscode.
	{Ref: "mcr.microsoft.com/vscode/devcontainers/php:0-7-bullseye", User: "vscode", NVM: true, Env: envNVM,
		Metadata: []map[string]any{mdCommonUtils, remoteUser("vscode")}},
	// The earlier java image, Java 17 on bullseye (the try-java Dockerfile
	// with VARIANT 17-bullseye): SDKMAN for its Maven step, nvm for its
	// Node.js step, user vscode.
	{Ref: "mcr.microsoft.com/vscode/devcontainers/java:0-17-bullseye", User: "vscode", SDKMAN: true, NVM: true, Env: envNVM,
		Metadata: []map[string]any{mdCommonUtils, remoteUser("vscode")}},
	// The earlier python-3 image, Python 3 (the ml-for-beginners
	// Dockerfile with VARIANT 3): as python:0-3.9-bullseye.
	{Ref: "mcr.microsoft.com/vscode/devcontainers/python:0-3", User: "vscode", Stubs: stubsPython, NVM: true, Env: envNVM,
		Metadata: []map[string]any{mdCommonUtils, remoteUser("vscode")}},
	// Discourse's development image (discourse): Debian with Ruby, Node.js,
	// PostgreSQL and Redis, the user discourse, no devcontainer.metadata
	// label.
	{Ref: "docker.io/discourse/discourse_dev:20241111-0710", User: "discourse", Stubs: stubsRuby},
	// Coder's dogfood image (coder): Ubuntu with Go and Node.js, the user
	// coder, no devcontainer.metadata label.
	{Ref: "codercom/oss-dogfood:latest", User: "coder"},
	// Docker Hub's node:20 (the claude-code Dockerfile): user node, no label.
	{Ref: "node:20", User: "node", Stubs: stubsNode},
	// Docker Hub's node:10 (the try-node Dockerfile): user node, no label.
	{Ref: "node:10", User: "node", Stubs: stubsNode},
	// Compose sidecars of the rails and mastodon files: they only need to
	// run.
	{Ref: "postgres:latest", Sidecar: true},
	{Ref: "mariadb:latest", Sidecar: true},
	{Ref: "valkey/valkey:8", Sidecar: true},
	{Ref: "memcached:latest", Sidecar: true},
	{Ref: "postgres:14-alpine", Sidecar: true},
	{Ref: "redis:7-alpine", Sidecar: true},
	{Ref: "docker.elastic.co/elasticsearch/elasticsearch-oss:7.10.2", Sidecar: true},
	{Ref: "libretranslate/libretranslate:v1.5.4", Sidecar: true},
}

// mergeEnv returns the union of envs (a later one wins).
func mergeEnv(envs ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, e := range envs {
		for k, v := range e {
			out[k] = v
		}
	}
	return out
}

// DevcontainerStandIns returns the image reference of every stand-in of
// the devcontainer corpus, building those the engine does not have: each
// is built FROM DevcontainerBaseRef (itself FROM DebianClientsImage) and
// tagged with the exact reference a corpus file names, so that builds and
// inspections find it locally (see devcontainerStandIns). An image of that
// reference that carries this version's stand-in label is reused; one
// with an older stand-in label is built again; one without the label is a
// real image, left as it is. Builds are serialised across test processes
// by a lock file, as DebianGitImage's are.
//
// A slow helper the first time on a machine (the Debian images, then
// about a second per stand-in).
func DevcontainerStandIns(t testing.TB, cli *client.Client, base DebianBase) []string {
	t.Helper()
	from := DebianClientsImage(t, cli, base)
	ctx, cancel := context.WithTimeout(context.Background(), debianBuildTimeout)
	defer cancel()
	refs := make([]string, 0, len(devcontainerStandIns))
	if err := ensureStandIns(ctx, t, cli, from); err != nil {
		t.Fatalf("devcontainer stand-ins: %v", err)
	}
	for _, s := range devcontainerStandIns {
		refs = append(refs, s.Ref)
	}
	return refs
}

// ensureStandIns builds DevcontainerBaseRef and the stand-ins the engine
// lacks, under one lock.
func ensureStandIns(ctx context.Context, t testing.TB, cli *client.Client, from string) error {
	var missing []standIn
	for _, s := range devcontainerStandIns {
		if ok, err := standInCurrent(ctx, cli, s.Ref); err != nil {
			return err
		} else if !ok {
			missing = append(missing, s)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	buildMu.Lock()
	defer buildMu.Unlock()
	unlock, err := lockFile(ctx, filepath.Join(os.TempDir(), "hutch-testenv-devcontainers.lock"))
	if err != nil {
		return err
	}
	defer unlock()
	if ok, err := hasImage(ctx, cli, DevcontainerBaseRef); err != nil {
		return err
	} else if !ok {
		w := &logWriter{t: t, prefix: DevcontainerBaseRef + ": "}
		err := engine.BuildDockerfile(ctx, cli, []byte(devcontainerBaseDockerfile), DevcontainerBaseRef, map[string]*string{"BASE": &from}, w)
		w.Flush()
		if err != nil {
			return fmt.Errorf("%s: %w", DevcontainerBaseRef, err)
		}
	}
	start := time.Now()
	built := 0
	for _, s := range missing {
		// Another test or process may have built it while we waited.
		if ok, err := standInCurrent(ctx, cli, s.Ref); err != nil {
			return err
		} else if ok {
			continue
		}
		dockerfile, err := s.dockerfile()
		if err != nil {
			return fmt.Errorf("%s: %w", s.Ref, err)
		}
		w := &logWriter{t: t, prefix: s.Ref + ": "}
		err = engine.BuildDockerfile(ctx, cli, []byte(dockerfile), s.Ref, nil, w)
		w.Flush()
		if err != nil {
			return fmt.Errorf("%s: %w", s.Ref, err)
		}
		built++
	}
	if built > 0 {
		t.Logf("built %d devcontainer stand-ins in %s", built, time.Since(start).Round(time.Second))
	}
	return nil
}

// standInCurrent reports whether ref needs no build: the engine has it
// with this version's stand-in label, or it is a real image (no stand-in
// label at all).
func standInCurrent(ctx context.Context, cli *client.Client, ref string) (bool, error) {
	res, err := cli.ImageInspect(ctx, ref)
	switch {
	case err == nil:
	case engine.IsNotFound(err):
		return false, nil
	default:
		return false, fmt.Errorf("inspecting %s: %w", ref, err)
	}
	if res.Config == nil {
		return true, nil
	}
	v, ok := res.Config.Labels[standInLabel]
	return !ok || v == standInVersion, nil
}

// dockerfile is the stand-in's Dockerfile, built without a context.
func (s standIn) dockerfile() (string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "FROM %s\n", DevcontainerBaseRef)
	var run []string
	if len(s.Packages) > 0 {
		run = append(run, "apt-get update",
			"DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "+strings.Join(s.Packages, " "),
			"rm -rf /var/lib/apt/lists/*")
	}
	if s.User != "" {
		run = append(run, "useradd --create-home --uid 1000 --user-group --groups sudo --shell /bin/bash "+s.User)
	}
	for _, p := range s.Stubs {
		name := filepath.Base(p)
		run = append(run, "mkdir -p "+shellQuote(filepath.Dir(p)),
			writeLines(p, "#!/bin/sh", "# hutch test stand-in for "+name+": reports its arguments and succeeds.", `echo "`+name+` (hutch stand-in) $*" >&2`),
			"chmod 0755 "+shellQuote(p))
	}
	if s.NVM {
		run = append(run, "mkdir -p /usr/local/share/nvm",
			writeLines("/usr/local/share/nvm/nvm.sh", "# hutch test stand-in for nvm: reports its arguments and succeeds.", `nvm() { echo "nvm (hutch stand-in) $*" >&2; }`))
	}
	if s.SDKMAN {
		run = append(run, "mkdir -p /usr/local/sdkman/bin",
			writeLines("/usr/local/sdkman/bin/sdkman-init.sh", "# hutch test stand-in for SDKMAN: reports its arguments and succeeds.", `sdk() { echo "sdk (hutch stand-in) $*" >&2; }`))
	}
	if len(run) > 0 {
		fmt.Fprintf(&b, "RUN %s\n", strings.Join(run, " \\\n && "))
	}
	if len(s.Path) > 0 {
		fmt.Fprintf(&b, "ENV PATH=%s\n", dockerfileQuote(strings.Join(s.Path, ":")+":"+standInPath))
	}
	for _, k := range sortedKeys(s.Env) {
		fmt.Fprintf(&b, "ENV %s=%s\n", k, dockerfileQuote(s.Env[k]))
	}
	fmt.Fprintf(&b, "LABEL %s=%s\n", standInLabel, dockerfileQuote(standInVersion))
	if s.Metadata != nil {
		md, err := json.Marshal(s.Metadata)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "LABEL devcontainer.metadata=%s\n", dockerfileQuote(string(md)))
	}
	if s.Sidecar {
		b.WriteString(`CMD ["sleep", "infinity"]` + "\n")
	} else {
		b.WriteString(`CMD ["bash"]` + "\n")
	}
	return b.String(), nil
}

// writeLines is a shell command writing lines to path, on one line of a
// Dockerfile's RUN.
func writeLines(path string, lines ...string) string {
	quoted := make([]string, len(lines))
	for i, l := range lines {
		quoted[i] = shellQuote(l)
	}
	return "printf '%s\\n' " + strings.Join(quoted, " ") + " > " + shellQuote(path)
}

// shellQuote quotes s for sh, in single quotes.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// dockerfileQuote quotes s as a double-quoted value of a Dockerfile's ENV
// or LABEL, escaping what the Dockerfile would read: backslashes, double
// quotes, dollar signs (variable expansion) and newlines.
func dockerfileQuote(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, `$`, `\$`, "\n", `\n`)
	return `"` + r.Replace(s) + `"`
}

// sortedKeys returns m's keys in order.
func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
