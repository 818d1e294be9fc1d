package testenv

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/hutchsandbox/hutch/internal/engine"
)

// DebianGitRef is the Debian image with git DebianGitImage builds. Bump its
// tag whenever debianGitDockerfile changes, so a stale image is not reused.
const DebianGitRef = "hutch-test-debian-git:1"

// debianBuildTimeout bounds making the image: the base with debootstrap
// (about 75 s the first time) and apt-get from a Debian mirror.
const debianBuildTimeout = 10 * time.Minute

// debianGitDockerfile is built FROM the base BASE names.
const debianGitDockerfile = `ARG BASE
FROM ${BASE}
ENV DEBIAN_FRONTEND=noninteractive
RUN apt-get update \
 && apt-get install -y --no-install-recommends git ca-certificates bash \
 && rm -rf /var/lib/apt/lists/*
`

// DebianBase returns a local Debian bookworm image to build on, writing
// its progress to w. Tests pass a function calling imagebuild.ResolveBase,
// which answers with debian:bookworm-slim when the engine has it or can
// pull it, else with hutch-base:bookworm, built with debootstrap the first
// time. (testenv cannot call it itself: imagebuild's own tests import
// testenv.)
type DebianBase func(ctx context.Context, w io.Writer) (string, error)

// DebianGitImage returns DebianGitRef, building it first when the engine
// does not have it: base (see DebianBase) with sh, bash, git, coreutils and
// ca-certificates, for tests that run git inside a container. No registry
// is needed, only a Debian mirror for apt-get. Builds are serialised across
// test processes by a lock file and an image another process built is
// reused; progress is logged with t.Logf. base is called only when the
// image is missing.
//
// A slow helper: the first build takes a minute or two.
func DebianGitImage(t testing.TB, cli *client.Client, base DebianBase) string {
	t.Helper()
	return debianImage(t, cli, base, DebianGitRef, debianGitDockerfile)
}

// DebianClientsRef is the Debian image of network clients
// DebianClientsImage builds. Bump its tag whenever
// debianClientsDockerfile changes, so a stale image is not reused.
const DebianClientsRef = "hutch-test-debian-clients:1"

// debianClientsDockerfile is built FROM the base BASE names.
const debianClientsDockerfile = `ARG BASE
FROM ${BASE}
ENV DEBIAN_FRONTEND=noninteractive
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates curl git python3 nodejs iproute2 netcat-openbsd dnsutils \
 && rm -rf /var/lib/apt/lists/*
`

// DebianClientsImage returns DebianClientsRef, building it first when the
// engine does not have it, as DebianGitImage does: base (see DebianBase)
// with curl, git, python3 (its standard library, ssl included, and no
// more), nodejs and ca-certificates, for tests that reach a server from a
// container, and ip (iproute2), nc (netcat-openbsd) and dig (dnsutils)
// for tests that try to get round a proxy with raw TCP, UDP or DNS.
//
// A slow helper: the first build takes a minute or two.
func DebianClientsImage(t testing.TB, cli *client.Client, base DebianBase) string {
	t.Helper()
	return debianImage(t, cli, base, DebianClientsRef, debianClientsDockerfile)
}

// debianImage returns ref, built from dockerfile FROM base when the
// engine does not have it.
func debianImage(t testing.TB, cli *client.Client, base DebianBase, ref, dockerfile string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), debianBuildTimeout)
	defer cancel()
	if err := ensureDebianImage(ctx, t, cli, base, ref, dockerfile); err != nil {
		t.Fatalf("test image %s: %v", ref, err)
	}
	return ref
}

// ensureDebianImage builds ref unless the engine has it. Every Debian
// image takes the same lock, which also keeps two of them from making
// the base at once.
func ensureDebianImage(ctx context.Context, t testing.TB, cli *client.Client, base DebianBase, ref, dockerfile string) error {
	if ok, err := hasImage(ctx, cli, ref); err != nil || ok {
		return err
	}
	buildMu.Lock()
	defer buildMu.Unlock()
	unlock, err := lockFile(ctx, filepath.Join(os.TempDir(), "hutch-testenv-debian.lock"))
	if err != nil {
		return err
	}
	defer unlock()
	// Another test or process may have built it while we waited.
	if ok, err := hasImage(ctx, cli, ref); err != nil || ok {
		return err
	}
	start := time.Now()
	w := &logWriter{t: t, prefix: ref + ": "}
	defer w.Flush()
	from, err := base(ctx, w)
	if err != nil {
		return fmt.Errorf("the Debian base: %w", err)
	}
	t.Logf("building %s FROM %s", ref, from)
	if err := engine.BuildDockerfile(ctx, cli, []byte(dockerfile), ref, map[string]*string{"BASE": &from}, w); err != nil {
		return err
	}
	t.Logf("built %s in %s", ref, time.Since(start).Round(time.Second))
	return nil
}

// logWriter passes what is written to it to t.Logf, a line at a time.
type logWriter struct {
	t      testing.TB
	prefix string
	buf    []byte
}

func (w *logWriter) Write(p []byte) (int, error) {
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		if line := strings.TrimRight(string(w.buf[:i]), "\r "); line != "" {
			w.t.Logf("%s%s", w.prefix, line)
		}
		w.buf = w.buf[i+1:]
	}
}

// Flush logs what is left of an unterminated last line.
func (w *logWriter) Flush() {
	if line := strings.TrimSpace(string(w.buf)); line != "" {
		w.t.Logf("%s%s", w.prefix, line)
	}
	w.buf = nil
}
