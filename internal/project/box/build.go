package box

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/moby/moby/client"

	"github.com/hutchsandbox/hutch/internal/engine"
	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/project"
)

// The images a sandbox is made from, in the order create makes them: the
// image of the devcontainer's Dockerfile (spec.Build), when it has one,
// then its features (spec.Features, features.go), then the recipe's
// layers on top (ensureImage). This file holds the first, what to say
// when the first or the last fails, and what to do when the container
// they make does not start.

// ensureBuild builds the devcontainer's Dockerfile when its tag is
// missing, or on every rebuild (the tag covers the Dockerfile, args and
// target, not the rest of the context). It reports whether that made
// another image than the tag had, so the recipe's layers go onto the new
// one. Under sandbox-network allowlist or none the build has no network
// either, and a Dockerfile that would make the engine fetch something is
// refused before it runs.
func (b *Box) ensureBuild(ctx context.Context) (bool, error) {
	bd := b.spec.Build
	before, err := b.imageID(ctx, bd.Tag)
	if err != nil || (before != "" && !b.rebuild) {
		return false, err
	}
	b.stage(fmt.Sprintf("Building %s from %s…", bd.Tag, bd.Dockerfile))
	offline := b.spec.Egress.Proxied()
	var out tail
	err = b.opts.Engine.BuildDir(ctx, engine.DirBuild{
		Root: b.project, Context: bd.Context, DockerfilePath: bd.Dockerfile, Dockerfile: bd.Content,
		Args: bd.Args, Target: bd.Target, Tag: bd.Tag, Offline: offline,
	}, io.MultiWriter(b.opts.Progress, &out))
	if err != nil {
		return false, b.explainDevcontainerBuild(err, out.String(), offline)
	}
	after, err := b.imageID(ctx, bd.Tag)
	return after != before, err
}

// imageID is the ID of the image ref names, "" when there is none.
func (b *Box) imageID(ctx context.Context, ref string) (string, error) {
	res, err := b.opts.Engine.Client.ImageInspect(ctx, ref)
	switch {
	case engine.IsNotFound(err):
		return "", nil
	case err != nil:
		return "", engine.Classify(err, "inspect image "+ref)
	}
	return res.ID, nil
}

// recipeOffline reports whether the recipe's layers are built without a
// network: under sandbox-network allowlist or none, on the image of the
// project's Dockerfile or of its features. Building them runs that
// image's programs (its shell, its package manager), which whoever wrote
// the Dockerfile, or a feature's install script, chose; with a network
// they could reach what the policy forbids. On a base the user named
// (sandbox-base, the devcontainer's image, which trust approved) they
// keep the engine's network.
func (b *Box) recipeOffline() bool {
	return b.spec.Egress.Proxied() && (b.spec.Build != nil || b.spec.Features != nil)
}

// pullFailed are what engines say when an image a build starts from
// cannot be pulled.
var pullFailed = []string{"pull access denied", "failed to resolve source metadata", "failed to do request", "manifest unknown", "repository does not exist", "no such host", "initializing source docker://"}

// explainDevcontainerBuild is the error of a failed build of the
// devcontainer's Dockerfile, saying why where hutch can tell and what to
// do.
func (b *Box) explainDevcontainerBuild(err error, output string, offline bool) error {
	what := "Could not build the image of " + b.spec.Build.Dockerfile
	open := "set sandbox-network to open (hutch project settings set sandbox-network open) for the build"
	var off *engine.OfflineError
	advice := "Fix the Dockerfile, then run `hutch project rebuild`."
	switch {
	case errors.As(err, &off):
		fix := fmt.Sprintf("Pull it yourself (docker pull %s), or %s.", off.Ref, open)
		if off.URL {
			fix = fmt.Sprintf("Put the file in the build context and COPY it, or %s.", open)
		}
		return fmt.Errorf("%s: the build has no network because sandbox-network is %s, and %w. %s", what, b.spec.Egress, err, fix)
	case errors.Is(err, errdefs.ErrFailedPrecondition), errors.Is(err, errdefs.ErrInvalid), errors.Is(err, errdefs.ErrNotFound):
		return fmt.Errorf("%s: %w", what, err) // the context: its own words say what to do
	case pulled(err.Error() + "\n" + output):
		advice = "The engine could not pull an image the Dockerfile starts from; pull or load it into the engine yourself (docker pull), then try again."
	case offline:
		advice = fmt.Sprintf("The build has no network because sandbox-network is %s, so a step that downloads fails. Build the image yourself and set sandbox-image to it, or %s.", b.spec.Egress, open)
	}
	return fmt.Errorf("%s: %w. %s", what, err, advice)
}

// pulled reports whether a build's error or output says an image could
// not be pulled.
func pulled(text string) bool {
	text = strings.ToLower(text)
	for _, p := range pullFailed {
		if strings.Contains(text, p) {
			return true
		}
	}
	return false
}

// explainRecipe is the error of a failed build of the recipe's layers:
// on a base without a package manager hutch knows, what it lacks and
// what to do; built offline (recipeOffline), why and what to do;
// otherwise explainBuild's.
func (b *Box) explainRecipe(err error, output, base string) error {
	built := b.spec.Build != nil && (base == b.spec.Build.Tag || strings.HasPrefix(base, project.FeaturesRepo+":"))
	if missing := project.MissingTools(output); missing != nil {
		return errdefs.New(errdefs.ErrFailedPrecondition, "Could not build the sandbox image: "+project.MissingToolsError(base, missing, built))
	}
	if b.recipeOffline() {
		var on string
		switch {
		case b.spec.Build != nil && b.spec.Features != nil:
			on = "the image built from " + b.spec.Build.Dockerfile + " and its features"
		case b.spec.Build != nil:
			on = "the image built from " + b.spec.Build.Dockerfile
		default:
			on = "the image the features of " + b.spec.Features.File + " were installed into"
		}
		return fmt.Errorf("could not build the sandbox image: %w. %s", err, fmt.Sprintf(
			"Its layers go on %s, whose programs run while they are built, so under sandbox-network %s they get no network either and cannot install what that image lacks. Run `hutch project rebuild` once with sandbox-network open (hutch project settings set sandbox-network open), then set it back: the images are kept. Or build the image yourself and set sandbox-image to it.",
			on, b.spec.Egress))
	}
	return explainBuild(err, output)
}

// startFailed handles a container that would not start. One that never
// ran (just created, or left created by an earlier failure) is removed,
// so the next up creates it afresh from the settings then, instead of
// starting the same broken one again; and the error says what failed and
// what to do.
func (b *Box) startFailed(ctx context.Context, id string, created bool, err error) error {
	removed := false
	if created || b.neverStarted(ctx, id) {
		// Without the caller's deadline: a cancelled up must not leave
		// the half-made container behind either.
		rctx := context.WithoutCancel(ctx)
		_, rerr := b.opts.Engine.Client.ContainerRemove(rctx, id, client.ContainerRemoveOptions{Force: true})
		removed = rerr == nil || engine.IsNotFound(rerr)
		if !removed {
			b.opts.Log.Warn("could not remove a sandbox that did not start", "sandbox", b.spec.Name, "error", rerr)
		}
	}
	after := "Run `hutch project rebuild` once it is fixed."
	if removed {
		after = "hutch removed the container it could not start, so the next `hutch project up` makes it afresh."
	}
	if user := missingUser(err); user != "" {
		origin := b.spec.UserOrigin
		if origin == "" {
			origin = "your user id"
		}
		return errdefs.New(errdefs.ErrFailedPrecondition, fmt.Sprintf(
			"The sandbox %s could not start: the user %q (%s) does not exist in the image %s. Name a user the image has, create that user in the image, or run the sandbox as yourself (hutch project settings set sandbox-user host). %s",
			b.spec.Name, user, origin, b.spec.Image, after))
	}
	return fmt.Errorf("%w. %s", engine.Classify(err, "start the sandbox "+b.spec.Name), after)
}

// neverStarted reports whether the container id was created and never
// started.
func (b *Box) neverStarted(ctx context.Context, id string) bool {
	res, err := b.opts.Engine.Client.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if err != nil || res.Container.State == nil {
		return false
	}
	st := res.Container.State
	return st.Status == "created" && (st.StartedAt == "" || strings.HasPrefix(st.StartedAt, "0001-01-01"))
}

// missingUser reads the user the runtime could not find from a start
// error: runc and crun say "unable to find user NAME: no matching
// entries in passwd file" (a group: "unable to find group").
func missingUser(err error) string {
	const marker = "unable to find user "
	msg := err.Error()
	i := strings.Index(msg, marker)
	if i < 0 {
		return ""
	}
	rest := msg[i+len(marker):]
	if j := strings.IndexAny(rest, ": \n"); j >= 0 {
		rest = rest[:j]
	}
	return rest
}
