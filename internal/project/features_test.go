package project_test

import (
	"strings"
	"testing"

	"github.com/hutchsandbox/hutch/internal/devcontainer"
	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/project"
)

// TestResolve_Features: a devcontainer.json's features are installed on
// the image the Recipe starts from (the build's, the file's image, or
// sandbox-base), with the file's users; with sandbox-image they are not,
// and a note says so. Changing them changes the spec's hash: the
// container is out of date.
func TestResolve_Features(t *testing.T) {
	dc := apiDevcontainer()
	dc.Dir = dcDir
	dc.OverrideFeatureInstallOrder = []string{"ghcr.io/devcontainers/features/go"}
	in := input(t, `{}`)
	in.Devcontainer = dc
	sp, err := project.Resolve(in)
	if err != nil {
		t.Fatal(err)
	}
	f := sp.Features
	if f == nil || f.Base != dc.Image || f.Base != sp.Recipe.Base || f.Dir != dcDir || len(f.List) != 1 || f.RemoteUser != "vscode" || f.ContainerUser != "root" ||
		len(f.Order) != 1 || f.IDs() != "ghcr.io/devcontainers/features/go:1" {
		t.Fatalf("Features = %+v", f)
	}
	if c := f.Config(); c.Dir != dcDir || len(c.Features) != 1 || len(c.OverrideFeatureInstallOrder) != 1 {
		t.Errorf("Config() = %+v", c)
	}

	// On a build: the build's tag.
	bin := buildInput(t, `{}`, devcontainer.Build{Dockerfile: "Dockerfile"}, "FROM debian\n")
	bin.Devcontainer.Features = dc.Features
	bsp, err := project.Resolve(bin)
	if err != nil {
		t.Fatal(err)
	}
	if bsp.Features == nil || bsp.Features.Base != bsp.Build.Tag {
		t.Errorf("features on a build: %+v, want them on %s", bsp.Features, bsp.Build.Tag)
	}

	// Other options: another hash.
	other := *dc
	other.Features = []devcontainer.Feature{{ID: "ghcr.io/devcontainers/features/go:1", Options: map[string]string{"version": "1.22"}}}
	in.Devcontainer = &other
	osp, err := project.Resolve(in)
	if err != nil {
		t.Fatal(err)
	}
	if osp.Hash == sp.Hash {
		t.Errorf("the hash does not follow the features' options")
	}
	// No features: the hash is what it was before features were
	// installed (the shape leaves them out).
	none := *dc
	none.Features = nil
	in.Devcontainer = &none
	nsp, err := project.Resolve(in)
	if err != nil {
		t.Fatal(err)
	}
	if nsp.Features != nil || nsp.Hash == sp.Hash {
		t.Errorf("without features: %+v, hash %s", nsp.Features, nsp.Hash)
	}

	// sandbox-image: used as it is, and said.
	in = input(t, `{"sandbox-image": "debian:12"}`)
	in.Devcontainer = dc
	isp, err := project.Resolve(in)
	if err != nil {
		t.Fatal(err)
	}
	want := "sandbox-image debian:12 is used as-is, so the features of " + dc.Path + " (ghcr.io/devcontainers/features/go:1) are not installed. Unset sandbox-image to have them installed."
	if isp.Features != nil || !containsNote(isp.Notes, want) {
		t.Errorf("with sandbox-image: Features %+v, notes %q", isp.Features, isp.Notes)
	}
}

func containsNote(notes []string, want string) bool {
	for _, n := range notes {
		if n == want {
			return true
		}
	}
	return false
}

// TestFeaturesTag: the tag follows every part of the plan.
func TestFeaturesTag(t *testing.T) {
	base := project.FeaturePlan{
		BaseID: "sha256:aaa", ContainerUser: "root", RemoteUser: "vscode",
		Features: []project.PlannedFeature{
			{ID: "ghcr.io/devcontainers/features/go:1", Digest: "sha256:111", Env: []string{"VERSION=latest"}},
			{ID: "./local", Digest: "sha256:222"},
		},
		Dockerfile: "FROM x\n",
	}
	tag := project.FeaturesTag(base)
	if !strings.HasPrefix(tag, project.FeaturesRepo+":") || len(tag) != len(project.FeaturesRepo)+1+16 || project.FeaturesTag(base) != tag {
		t.Fatalf("FeaturesTag = %q", tag)
	}
	changes := map[string]func(p *project.FeaturePlan){
		"base":       func(p *project.FeaturePlan) { p.BaseID = "sha256:bbb" },
		"user":       func(p *project.FeaturePlan) { p.RemoteUser = "node" },
		"digest":     func(p *project.FeaturePlan) { p.Features[1].Digest = "sha256:333" },
		"options":    func(p *project.FeaturePlan) { p.Features[0].Env = []string{"VERSION=1.22"} },
		"order":      func(p *project.FeaturePlan) { p.Features[0], p.Features[1] = p.Features[1], p.Features[0] },
		"dockerfile": func(p *project.FeaturePlan) { p.Dockerfile = "FROM y\n" },
	}
	for name, change := range changes {
		p := base
		p.Features = append([]project.PlannedFeature(nil), base.Features...)
		change(&p)
		if project.FeaturesTag(p) == tag {
			t.Errorf("%s: the tag does not change", name)
		}
	}
}

// TestCheckFeatureMount: a feature's metadata asking for the engine's
// socket is refused as the file's own mount would be, naming the feature
// and what to do; a mount the sandbox allows is not.
func TestCheckFeatureMount(t *testing.T) {
	f := &project.Features{File: dcDir + "/devcontainer.json"}
	err := f.CheckFeatureMount("ghcr.io/devcontainers/features/docker-from-docker:1", project.Mount{Type: project.MountBind, Source: "/var/run/docker.sock", Target: "/var/run/docker-host.sock"}, home)
	if !errdefs.IsInvalid(err) || !strings.HasPrefix(err.Error(), "Refusing to mount /var/run/docker.sock at /var/run/docker-host.sock: ") ||
		!strings.HasSuffix(err.Error(), "The feature ghcr.io/devcontainers/features/docker-from-docker:1 asks for it in its metadata; remove that feature from "+dcDir+"/devcontainer.json, or set sandbox-image to an image that has what it installs.") {
		t.Errorf("the engine's socket: %v", err)
	}
	if err := f.CheckFeatureMount("x", project.Mount{Type: project.MountBind, Source: "/srv/cache", Target: "/cache"}, home); err != nil {
		t.Errorf("an ordinary mount: %v", err)
	}
}
