// Package imagebuild builds hutch's curated sandbox image through the
// Engine API: it resolves the Debian base (local, pulled, or built here
// with debootstrap and imported when no registry answers), then builds the
// Dockerfile with the legacy builder from an in-memory tar context,
// streaming the engine's progress as readable lines.
package imagebuild

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"strings"
	"time"

	"github.com/moby/moby/client"

	"github.com/hutchsandbox/hutch/internal/engine"
)

// Dockerfile is the curated sandbox Dockerfile, a copy of
// deploy/sandbox.Dockerfile (a test keeps the two identical).
//
//go:embed sandbox.Dockerfile
var Dockerfile []byte

const (
	// DefaultBase is the base image the curated Dockerfile is built FROM.
	DefaultBase = "debian:bookworm-slim"
	// LocalBase is the base built here with debootstrap when no registry
	// answers for DefaultBase.
	LocalBase = "hutch-base:bookworm"
	// DefaultTimeZone is the sandbox's time zone unless told otherwise.
	DefaultTimeZone = "UTC"
	// DefaultMirror is the Debian mirror used when apt names none.
	DefaultMirror = "http://deb.debian.org/debian"
	// suite is the Debian release of the base.
	suite = "bookworm"
)

// PullTimeout bounds the attempt to pull the base image; without a
// registry it fails, and the base is built locally instead.
var PullTimeout = 90 * time.Second

// Options says what to build.
type Options struct {
	// Tag names the image; default DefaultTag(Version).
	Tag string
	// Version is hutch's version, used in the default tag.
	Version string
	// Dockerfile is built; default the embedded curated Dockerfile.
	Dockerfile []byte
	// Base is the image passed as the BASE build argument; default
	// DefaultBase.
	Base string
	// TimeZone is passed as the TZ build argument; default UTC.
	TimeZone string
	// Progress receives the engine's progress as lines; nil discards it.
	Progress io.Writer
	// Log receives debug records; nil discards them.
	Log *slog.Logger
}

// Repository is the curated image's name without its tag.
const Repository = "hutch-sandbox"

// IsCurated reports whether ref names a tag of the curated image
// (hutch-sandbox:<tag>, also as docker.io/library/ or localhost/ gives it),
// the one image hutch itself knows how to build.
func IsCurated(ref string) bool {
	for _, prefix := range []string{"docker.io/library/", "localhost/"} {
		ref = strings.TrimPrefix(ref, prefix)
	}
	name, _, _ := strings.Cut(ref, "@")
	name, _, _ = strings.Cut(name, ":")
	return name == Repository
}

// DefaultTag is the curated image's name for a hutch version:
// hutch-sandbox:<version>, with characters a tag cannot hold turned into
// '-' ("dev" when version is empty).
func DefaultTag(version string) string {
	if version == "" {
		version = "dev"
	}
	t := regexp.MustCompile(`[^A-Za-z0-9_.-]`).ReplaceAllString(version, "-")
	if t[0] == '.' || t[0] == '-' {
		t = "v" + t
	}
	if len(t) > 128 {
		t = t[:128]
	}
	return Repository + ":" + t
}

// Build builds the image opts describes and returns its reference. A
// failure names the step that failed and the engine's message.
func Build(ctx context.Context, eng *engine.Engine, opts Options) (ref string, err error) {
	if opts.Tag == "" {
		opts.Tag = DefaultTag(opts.Version)
	}
	if opts.Dockerfile == nil {
		opts.Dockerfile = Dockerfile
	}
	if opts.Base == "" {
		opts.Base = DefaultBase
	}
	if opts.TimeZone == "" {
		opts.TimeZone = DefaultTimeZone
	}
	if opts.Progress == nil {
		opts.Progress = io.Discard
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	b := &builder{eng: eng, opts: opts, out: opts.Progress, log: opts.Log}
	base, err := b.resolveBase(ctx)
	if err != nil {
		return "", err
	}
	if err := b.build(ctx, base); err != nil {
		return "", err
	}
	if _, err := eng.Client.ImageInspect(ctx, opts.Tag); err != nil {
		return "", fmt.Errorf("inspecting the built image %s: %w", opts.Tag, err)
	}
	return opts.Tag, nil
}

// ResolveBase returns the image to build FROM when base is asked for:
// base itself when the engine has it or can pull it; for a Debian
// bookworm base that cannot be pulled (no registry), LocalBase, built
// with debootstrap the first time. Progress lines go to progress.
func ResolveBase(ctx context.Context, eng *engine.Engine, base string, progress io.Writer) (string, error) {
	if progress == nil {
		progress = io.Discard
	}
	b := &builder{eng: eng, opts: Options{Base: base}, out: progress, log: slog.New(slog.DiscardHandler)}
	return b.resolveBase(ctx)
}

type builder struct {
	eng  *engine.Engine
	opts Options
	out  io.Writer
	log  *slog.Logger
}

// say writes a line of progress, best-effort: a build does not fail
// because its progress could not be shown.
func (b *builder) say(format string, args ...any) {
	_, _ = fmt.Fprintf(b.out, format+"\n", args...)
}

// hasImage reports whether the engine has ref.
func (b *builder) hasImage(ctx context.Context, ref string) (bool, error) {
	_, err := b.eng.Client.ImageInspect(ctx, ref)
	switch {
	case err == nil:
		return true, nil
	case engine.IsNotFound(err):
		return false, nil
	}
	return false, fmt.Errorf("inspecting %s: %w", ref, err)
}

// resolveBase returns the image to build FROM: opts.Base when the engine
// has it or can pull it; else, for a Debian bookworm base, LocalBase,
// built with debootstrap when the engine does not have it yet.
func (b *builder) resolveBase(ctx context.Context) (string, error) {
	base := b.opts.Base
	if ok, err := b.hasImage(ctx, base); err != nil {
		return "", fmt.Errorf("resolving the base image: %w", err)
	} else if ok {
		b.say("Base image %s: found locally", base)
		return base, nil
	}
	b.say("Base image %s: not found locally, pulling it", base)
	pullErr := b.pull(ctx, base)
	if pullErr == nil {
		return base, nil
	}
	if ctx.Err() != nil {
		return "", ctx.Err()
	}
	if !IsBookworm(base) {
		return "", fmt.Errorf("pulling the base image %s: %w", base, pullErr)
	}
	b.say("Pulling %s failed (%v); using a locally built Debian %s base, %s", base, pullErr, suite, LocalBase)
	if ok, err := b.hasImage(ctx, LocalBase); err != nil {
		return "", fmt.Errorf("resolving the base image: %w", err)
	} else if ok {
		b.say("Base image %s: found locally", LocalBase)
		return LocalBase, nil
	}
	if err := b.buildLocalBase(ctx); err != nil {
		return "", err
	}
	return LocalBase, nil
}

// IsBookworm reports whether ref names a Debian bookworm image, which the
// local debootstrap base (LocalBase) can stand in for.
func IsBookworm(ref string) bool {
	ref = strings.TrimPrefix(strings.TrimPrefix(ref, "docker.io/"), "library/")
	return strings.HasPrefix(ref, "debian:bookworm")
}

// pull pulls ref within PullTimeout, printing its progress.
func (b *builder) pull(ctx context.Context, ref string) error {
	ctx, cancel := context.WithTimeout(ctx, PullTimeout)
	defer cancel()
	resp, err := b.eng.Client.ImagePull(ctx, ref, client.ImagePullOptions{})
	if err != nil {
		return err
	}
	defer func() { _ = resp.Close() }()
	p := engine.NewProgress(b.out)
	for msg, err := range resp.JSONMessages(ctx) {
		if err != nil {
			return err
		}
		if msg.Error != nil {
			return errors.New(msg.Error.Message)
		}
		p.Print(msg)
	}
	return ctx.Err()
}

// build runs the legacy builder on a tar context holding only the
// Dockerfile and streams its progress.
func (b *builder) build(ctx context.Context, base string) error {
	b.say("Building %s FROM %s (time zone %s)", b.opts.Tag, base, b.opts.TimeZone)
	args := map[string]*string{"BASE": &base, "TZ": &b.opts.TimeZone}
	b.log.Debug("image build", "tag", b.opts.Tag, "base", base, "tz", b.opts.TimeZone)
	return engine.BuildDockerfile(ctx, b.eng.Client, b.opts.Dockerfile, b.opts.Tag, args, b.out)
}
