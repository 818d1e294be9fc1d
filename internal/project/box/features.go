package box

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/hutchsandbox/hutch/internal/devcontainer"
	"github.com/hutchsandbox/hutch/internal/devcontainer/features"
	"github.com/hutchsandbox/hutch/internal/engine"
	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/imagebuild"
	"github.com/hutchsandbox/hutch/internal/project"
)

// The devcontainer's features are the second image a sandbox is made
// from (spec.Features): installed on the devcontainer's base, the
// recipe's layers then go on them. This file fetches them, installs them
// and says what to do when either fails.

// featuresDir is where hutch keeps what features need on the host: a
// cache of their OCI layers by digest (cache/) and, while one is
// installed, the folders it is fetched into and its build context
// (work-*/). Both are hutch's own: the state dir is never mounted into a
// sandbox.
func (b *Box) featuresDir() string { return filepath.Join(b.opts.StateDir, "features") }

// ensureFeatures installs fs on their base and returns the tag the
// recipe is to be built on (project.FeaturesTag), and whether that made
// another image than the tag had, so the recipe's layers go onto the new
// one. The features are fetched on every create: the tag hashes what
// they are now (a version behind a feature's tag may be new) and the
// base image's ID. A tag present is used as it is, except on a rebuild,
// which installs them again: their install scripts download what they
// install. Under sandbox-network allowlist or none they are installed
// without a network, as the devcontainer's Dockerfile is built.
func (b *Box) ensureFeatures(ctx context.Context, fs project.Features) (string, bool, error) {
	base, err := b.featuresBase(ctx, fs.Base)
	if err != nil {
		return "", false, err
	}
	img, err := b.opts.Engine.Client.ImageInspect(ctx, base)
	if err != nil {
		return "", false, engine.Classify(err, "inspect image "+base)
	}
	var imageUser string
	var labels map[string]string
	if img.Config != nil {
		imageUser, labels = img.Config.User, img.Config.Labels
	}
	if err := os.MkdirAll(b.featuresDir(), 0o700); err != nil {
		return "", false, fmt.Errorf("features: %w", err)
	}
	work, err := os.MkdirTemp(b.featuresDir(), "work-")
	if err != nil {
		return "", false, fmt.Errorf("features: %w", err)
	}
	defer func() { _ = os.RemoveAll(work) }()

	b.stage("Fetching the features of " + fs.File + "…")
	fetcher := &features.Fetcher{
		Dir: fs.Dir, ProjectRoot: b.project,
		WorkDir: work, CacheDir: filepath.Join(b.featuresDir(), "cache"),
		Mirrors: b.opts.FeatureMirrors,
	}
	plan, err := features.Resolve(ctx, fetcher, fs.Config())
	if err != nil {
		return "", false, featuresError(fs, err, "")
	}
	// A mount the sandbox refuses is refused before any install script
	// runs (the metadata label would have it refused once they ran).
	for _, f := range plan.Features {
		for _, m := range f.Metadata.Mounts {
			if m.Type != project.MountBind || !filepath.IsAbs(m.Source) {
				continue // a volume, or a source only substitution makes
			}
			if err := fs.CheckFeatureMount(f.Ref.ID, project.Mount{Type: m.Type, Source: filepath.Clean(m.Source), Target: m.Target, ReadOnly: m.ReadOnly}, b.opts.Home); err != nil {
				return "", false, err
			}
		}
	}
	b.buildNotes = append(b.buildNotes, plan.Notes...)
	for _, f := range plan.Features {
		if f.Metadata.Entrypoint != "" {
			// The entrypoints in the wild start what the sandbox does not
			// grant or use: docker-in-docker's dockerd needs a privileged
			// container, sshd serves an editor's connection.
			b.buildNotes = append(b.buildNotes, fmt.Sprintf(
				"Feature %s has an entrypoint (%q), which the sandbox does not run: its container runs hutch's agent and is never privileged. Run it yourself with hutch project exec if it works unprivileged.",
				f.Ref.ID, f.Metadata.Entrypoint))
		}
	}

	build := features.Build{
		Base: base, ImageUser: imageUser,
		Users:        featureUsers(fs, labels[devcontainer.MetadataLabel], imageUser),
		BaseMetadata: labelEntries(labels[devcontainer.MetadataLabel]),
	}
	contextDir := filepath.Join(work, "context")
	if err := os.Mkdir(contextDir, 0o700); err != nil {
		return "", false, fmt.Errorf("features: %w", err)
	}
	dockerfile, err := features.WriteContext(contextDir, plan.Features, build)
	if err != nil {
		return "", false, featuresError(fs, err, "")
	}
	tag := project.FeaturesTag(featurePlan(img.ID, build.Users, plan, dockerfile))
	before, err := b.imageID(ctx, tag)
	if err != nil || (before != "" && !b.rebuild) {
		return tag, false, err
	}
	ids := make([]string, len(plan.Features))
	for i, f := range plan.Features {
		ids[i] = f.Ref.ID
	}
	b.stage(fmt.Sprintf("Installing features into %s: %s…", tag, strings.Join(ids, ", ")))
	offline := b.spec.Egress.Proxied()
	var out tail
	err = b.opts.Engine.BuildDir(ctx, engine.DirBuild{
		Root: contextDir, Context: contextDir, DockerfilePath: filepath.Join(contextDir, "Dockerfile"), Dockerfile: []byte(dockerfile),
		Tag: tag, Offline: offline,
	}, io.MultiWriter(b.opts.Progress, &out))
	if err != nil {
		return "", false, b.explainFeatures(fs, err, offline)
	}
	after, err := b.imageID(ctx, tag)
	return tag, after != before, err
}

// featuresBase is the image the features go on, present in the engine:
// the devcontainer's build, made just before, or an image to find or
// pull (the recipe's layers would pull it too).
func (b *Box) featuresBase(ctx context.Context, base string) (string, error) {
	if b.spec.Build != nil && base == b.spec.Build.Tag {
		return base, nil
	}
	got, err := imagebuild.ResolveBase(ctx, b.opts.Engine, base, b.opts.Progress)
	if err != nil {
		what := "Could not install the features of " + b.spec.Features.File
		return "", fmt.Errorf("%s, for want of the image they go on: %w", what, err)
	}
	return got, nil
}

// featureUsers are the users the install scripts are told of, as the
// spec has them: the file's remoteUser and containerUser, else the base
// image's devcontainer.metadata's, and the image's own user for the
// container user when none says.
func featureUsers(fs project.Features, label, imageUser string) features.Users {
	entries, _ := devcontainer.ParseMetadata(label, devcontainer.Vars{})
	merged := devcontainer.Merge(append(entries, &devcontainer.Config{RemoteUser: fs.RemoteUser, ContainerUser: fs.ContainerUser})...)
	return features.Users{ContainerUser: cmp.Or(merged.ContainerUser, imageUser), RemoteUser: merged.RemoteUser}
}

// labelEntries are the entries of a devcontainer.metadata label (an
// array of objects, or one object) as they are, so that the features
// image's label holds the base's first, unchanged. Entries that are not
// objects are left out, as the spec's merge leaves them out.
func labelEntries(label string) []json.RawMessage {
	label = strings.TrimSpace(label)
	if label == "" {
		return nil
	}
	var raws []json.RawMessage
	if strings.HasPrefix(label, "{") {
		raws = []json.RawMessage{json.RawMessage(label)}
	} else if json.Unmarshal([]byte(label), &raws) != nil {
		return nil
	}
	var out []json.RawMessage
	for _, r := range raws {
		var obj map[string]json.RawMessage
		if json.Unmarshal(r, &obj) == nil && obj != nil {
			out = append(out, r)
		}
	}
	return out
}

// featurePlan is what the features image's tag hashes.
func featurePlan(baseID string, users features.Users, plan *features.Plan, dockerfile string) project.FeaturePlan {
	p := project.FeaturePlan{BaseID: baseID, ContainerUser: users.ContainerUser, RemoteUser: users.RemoteUser, Dockerfile: dockerfile}
	for _, f := range plan.Features {
		pf := project.PlannedFeature{ID: f.Ref.ID, Digest: f.Digest}
		for _, e := range f.Env {
			pf.Env = append(pf.Env, e.Name+"="+e.Value)
		}
		p.Features = append(p.Features, pf)
	}
	return p
}

// featuresError is the error of features that could not be fetched or
// laid out: err names the feature and what failed; this says where it
// came from and what to do.
func featuresError(fs project.Features, err error, advice string) error {
	if advice == "" {
		advice = fmt.Sprintf("Fix or remove that feature in %s, or set sandbox-image to an image that has what it installs (hutch then installs no features).", fs.File)
	}
	what := "Could not install the features of " + fs.File
	return fmt.Errorf("%s: %w. %s", what, err, advice)
}

// explainFeatures is the error of a failed install of the features.
func (b *Box) explainFeatures(fs project.Features, err error, offline bool) error {
	advice := fmt.Sprintf("A feature's install script failed (its output is above; the step names the feature). Fix or remove that feature in %s, or set sandbox-image to an image that has what it installs, then run `hutch project rebuild`.", fs.File)
	var off *engine.OfflineError
	switch {
	case errors.As(err, &off), errors.Is(err, errdefs.ErrInvalid):
		// Its own words say what is wrong.
	case offline:
		advice = fmt.Sprintf("The features are installed without a network because sandbox-network is %s, and install scripts usually download what they install. Run `hutch project rebuild` once with sandbox-network open (hutch project settings set sandbox-network open), then set it back: the image is kept. Or set sandbox-image to an image that has what they install.", b.spec.Egress)
	}
	return featuresError(fs, err, advice)
}
