package engine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/moby/moby/api/types/build"
	"github.com/moby/moby/client"

	"github.com/hutchsandbox/hutch/internal/errdefs"
)

// DirBuild is a Dockerfile build with a context directory, as a
// devcontainer.json's build property asks for.
type DirBuild struct {
	// Root is the directory nothing of the build may lie outside (the
	// project); Context is Root or a directory beneath it. Both are
	// absolute. See contextSource for how the context is read.
	Root, Context string
	// DockerfilePath is where the Dockerfile lies (absolute), and
	// Dockerfile its content as the caller read it: that content is
	// built, whatever the file holds by now. A Dockerfile inside the
	// context is sent at its place, one outside under a generated name.
	DockerfilePath string
	Dockerfile     []byte
	Args           map[string]string
	// Target is the stage to build ("" for the last).
	Target string
	Tag    string
	// Offline builds with the engine's network mode none, and refuses
	// (OfflineError) a Dockerfile that would make the engine fetch an
	// image it does not have or an ADD from a URL: those fetches are the
	// engine's own, outside the build's network.
	Offline bool
	// MaxContext caps the context's files (0 = DefaultMaxContext).
	MaxContext int64
}

// OfflineError is the refusal of an Offline build that needs the
// network: Fetch names what and where.
type OfflineError struct {
	Line        int
	Instruction string
	Ref         string
	URL         bool
}

func (e *OfflineError) Error() string {
	if e.URL {
		return fmt.Sprintf("line %d of the Dockerfile (%s %s) downloads from the network", e.Line, e.Instruction, e.Ref)
	}
	return fmt.Sprintf("line %d of the Dockerfile (%s) needs the image %s, which the engine does not have and would pull from a registry", e.Line, e.Instruction, e.Ref)
}

// Unwrap classes the refusal: a person must change something first.
func (e *OfflineError) Unwrap() error { return errdefs.ErrFailedPrecondition }

// BuildKit reports whether builds go to BuildKit: Docker's Linux engines
// serve it from API 1.39 (Docker 18.09) through the build endpoint,
// without a client session when the context is sent as a tar. Many
// Dockerfiles need it (RUN --mount=type=cache, which the classic builder
// refuses). Podman's compatible API builds with Buildah whatever is asked,
// so it is given the classic builder's parameters.
func (e *Engine) BuildKit() bool {
	return e.Flavor != FlavorPodman && apiAtLeast(e.APIVersion, 1, 39)
}

func apiAtLeast(v string, major, minor int) bool {
	a, b, ok := strings.Cut(v, ".")
	if !ok {
		return false
	}
	ma, err1 := strconv.Atoi(a)
	mi, err2 := strconv.Atoi(b)
	if err1 != nil || err2 != nil {
		return false
	}
	return ma > major || ma == major && mi >= minor
}

// frontendPullTimeout bounds pulling the frontend a "# syntax=" line names.
var frontendPullTimeout = 30 * time.Second

// BuildDir builds b and tags the result b.Tag, streaming the build's
// progress to out as lines (nil discards them). Under BuildKit, a
// "# syntax=" line naming a frontend image the engine neither has nor can
// pull is left out, with a line saying so, so the engine's own frontend
// reads the file; a build that then fails says that too. A failure names
// the step that failed and carries the engine's message.
func (e *Engine) BuildDir(ctx context.Context, b DirBuild, out io.Writer) error {
	if out == nil {
		out = io.Discard
	}
	df := b.Dockerfile
	info := scanDockerfile(df, b.Args)
	if b.Offline {
		if err := e.checkOffline(ctx, info.Fetches); err != nil {
			return err
		}
	}
	bk := e.BuildKit()
	hint := ""
	if bk && info.Frontend != "" && !e.haveFrontend(ctx, info.Frontend, b.Offline, out) {
		df = dropLine(df, info.FrontendLine)
		hint = fmt.Sprintf("The Dockerfile's first lines ask for the BuildKit frontend %s, which the engine does not have and could not pull, so hutch left that line out and the engine's own frontend read the file; it may not know all of that syntax (heredocs need a newer one). Load %s into the engine (docker pull %s), then try again.", info.Frontend, info.Frontend, info.Frontend)
		_, _ = fmt.Fprintf(out, "The Dockerfile asks for the BuildKit frontend %s, which the engine does not have and could not pull: building with the engine's own frontend.\n", info.Frontend)
	}
	name, outside := dockerfileName(b.Context, b.DockerfilePath, df)
	src := contextSource{Root: b.Root, Dir: b.Context, Dockerfile: df, DockerfileName: name, Max: b.MaxContext}
	if outside {
		src.ExtraIgnore = name
	}
	err := retryKilledStep(ctx, e.KillsBuildSteps(), out, func() error {
		err := e.buildDir(ctx, src, b, bk, out)
		var unsupported *buildkitUnsupported
		if errors.As(err, &unsupported) {
			_, _ = fmt.Fprintf(out, "The engine does not build with BuildKit (%s): using its classic builder.\n", unsupported.msg)
			bk = false
			err = e.buildDir(ctx, src, b, bk, out)
		}
		return err
	})
	if err != nil && hint != "" {
		err = fmt.Errorf("%w. %s", err, hint)
	}
	return err
}

// checkOffline refuses the first fetch the engine cannot serve from what
// it has.
func (e *Engine) checkOffline(ctx context.Context, fetches []fetch) error {
	for _, f := range fetches {
		if !f.URL {
			if _, err := e.Client.ImageInspect(ctx, f.Ref); err == nil {
				continue
			} else if !IsNotFound(err) && f.Ref != "" {
				return Classify(err, "inspect image "+f.Ref)
			}
		}
		return &OfflineError{Line: f.Line, Instruction: f.Instruction, Ref: f.Ref, URL: f.URL}
	}
	return nil
}

// haveFrontend reports whether the engine has the frontend image ref,
// pulling it first unless offline.
func (e *Engine) haveFrontend(ctx context.Context, ref string, offline bool, out io.Writer) bool {
	if _, err := e.Client.ImageInspect(ctx, ref); err == nil {
		return true
	}
	if offline {
		return false
	}
	pctx, cancel := context.WithTimeout(ctx, frontendPullTimeout)
	defer cancel()
	res, err := e.Client.ImagePull(pctx, ref, client.ImagePullOptions{})
	if err != nil {
		return false
	}
	defer func() { _ = res.Close() }()
	if err := streamBuild(res, out); err != nil {
		return false
	}
	_, err = e.Client.ImageInspect(ctx, ref)
	return err == nil
}

// buildkitUnsupported is an engine's refusal of a BuildKit build.
type buildkitUnsupported struct{ msg string }

func (e *buildkitUnsupported) Error() string { return e.msg }

// errBuildOver stops the context's writer once the build is over.
var errBuildOver = errors.New("the build is over")

// buildDir runs one build of src, with BuildKit or the classic builder.
// The context is streamed: made while the engine reads it, never held
// whole in memory.
func (e *Engine) buildDir(ctx context.Context, src contextSource, b DirBuild, bk bool, out io.Writer) error {
	pr, pw := io.Pipe()
	wrote := make(chan error, 1)
	go func() {
		err := src.writeTo(pw)
		_ = pw.CloseWithError(err)
		wrote <- err
	}()
	args := make(map[string]*string, len(b.Args))
	for k, v := range b.Args {
		args[k] = &v
	}
	opts := client.ImageBuildOptions{
		Tags:        []string{b.Tag},
		Dockerfile:  src.DockerfileName,
		Remove:      true,
		ForceRemove: true,
		BuildArgs:   args,
		Target:      b.Target,
		Version:     build.BuilderV1,
	}
	if bk {
		opts.Version = build.BuilderBuildKit
		var id [16]byte
		_, _ = rand.Read(id[:])
		opts.BuildID = "hutch-" + hex.EncodeToString(id[:])
	}
	body, err := e.startBuild(ctx, pr, opts, b.Offline)
	if err != nil {
		err = fmt.Errorf("starting the image build: %w", err)
		if bk && mentionsBuildkitUnsupported(err.Error()) {
			err = &buildkitUnsupported{msg: firstLine(err.Error())}
		}
	} else {
		err = streamBuild(body, out)
		_ = body.Close()
	}
	if bk && ctx.Err() != nil {
		// The engine may go on building for a client that left.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		_, _ = e.Client.BuildCancel(cctx, opts.BuildID, client.BuildCancelOptions{})
		cancel()
	}
	_ = pr.CloseWithError(errBuildOver)
	if werr := <-wrote; werr != nil && !errors.Is(werr, errBuildOver) && !errors.Is(werr, io.ErrClosedPipe) {
		return werr // the context could not be made: that is the cause
	}
	return err
}

func mentionsBuildkitUnsupported(s string) bool {
	s = strings.ToLower(s)
	return strings.Contains(s, "buildkit") && (strings.Contains(s, "not supported") || strings.Contains(s, "unsupported") || strings.Contains(s, "not enabled"))
}
