// Package benchkit is what the hutch benchmark programs under bench/ share:
// measuring paths interleaved in one run and reading off nearest-rank
// percentiles, formatting times and ratios, the header that says which
// machine measured, the setup every bench repeats (a static hutch build,
// the busybox test image, a context that Ctrl-C cancels so the bench can
// clean up), and, for the benches that measure one mode against image
// mode side by side (bench/kube, bench/microvm), the modes, the tables
// and the measurements they share (compare.go).
//
// These machines are noisy, so a bench's claim is a ratio of paths
// measured in the same run, never a bare time; the kit is built around
// that: Interleave rotates the paths each round so drift hits them alike,
// and Ratio is the number a report leads with.
package benchkit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/moby/moby/client"

	"github.com/hutchsandbox/hutch/internal/engine"
)

// BusyboxRef is the test image internal/testenv builds, the image the
// Docker benches run in unless told otherwise.
const BusyboxRef = "hutch-test-busybox:1"

// Logf prints one progress line.
type Logf func(format string, args ...any)

// Progress returns the Logf of a bench: timestamped lines on stderr, named
// after the bench ("15:04:05 bench/bridge: building hutch"), so that they
// never mix with the tables on stdout.
func Progress(bench string) Logf {
	return func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "%s %s: %s\n", time.Now().Format("15:04:05"), bench, fmt.Sprintf(format, args...))
	}
}

// Interruptible returns a context that the first SIGINT or SIGTERM
// cancels, after printing msg, so that the bench stops measuring and
// removes what it made; a second signal exits at once with status 130,
// for when that cleanup hangs.
func Interruptible(progress Logf, msg string) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sig
		progress("%s", msg)
		cancel()
		<-sig
		os.Exit(130)
	}()
	return ctx, cancel
}

// Main runs a bench's run with a context that Ctrl-C cancels (see
// Interruptible; interrupted is the line printed then), and ends the
// process on its error: "<bench>: <err>" on stderr, exit status 130 when
// interrupted, 1 otherwise.
func Main(bench, interrupted string, run func(context.Context) error) {
	ctx, cancel := Interruptible(Progress(bench), interrupted)
	defer cancel()
	if err := run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, bench+":", err)
		if ctx.Err() != nil {
			os.Exit(130)
		}
		os.Exit(1)
	}
}

// BuildHutch builds ./cmd/hutch of the module around the working
// directory with CGO_ENABLED=0 into dir and returns the binary's path.
// The build is static because the benches run it where the host's libc
// may not be: as the agent inside containers, or from a temp dir.
func BuildHutch(ctx context.Context, dir string) (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "hutch")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/hutch")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("CGO_ENABLED=0 go build ./cmd/hutch: %v\n%s", err, out)
	}
	return bin, nil
}

// EnsureImage checks that the engine has ref. BusyboxRef, when missing, is
// built by its own test (go test -run TestBusyboxImage ./internal/testenv,
// which needs busybox-static on the host), so that the benches and the
// tests run the very same image; any other image must be there already.
func EnsureImage(ctx context.Context, cli *client.Client, ref string, progress Logf) error {
	if _, err := cli.ImageInspect(ctx, ref); err == nil {
		return nil
	} else if !engine.IsNotFound(err) {
		return err
	}
	if ref != BusyboxRef {
		return fmt.Errorf("image %s is not present in the engine; build or load it first", ref)
	}
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	progress("image %s missing: go test -run TestBusyboxImage ./internal/testenv", ref)
	cmd := exec.CommandContext(ctx, "go", "test", "-count=1", "-run", "^TestBusyboxImage$", "./internal/testenv")
	cmd.Dir = root
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("building %s with go test ./internal/testenv: %w", ref, err)
	}
	_, err = cli.ImageInspect(ctx, ref)
	return err
}

// RandomHex returns n random bytes in hex, for names and tokens that must
// not collide with an earlier run's leftovers.
func RandomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// moduleRoot is the directory holding go.mod at or above the working
// directory: the benches build and test the module they are run in.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("run the bench inside the hutch module (no go.mod above the working directory)")
		}
		dir = parent
	}
}
