package testenv

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// hutchBuildTimeout bounds waiting for the build lock and building: a cold
// build cache takes minutes on a small machine.
const hutchBuildTimeout = 15 * time.Minute

// hutchBuild is the one build of the hutch binary per test process.
var hutchBuild struct {
	once sync.Once
	path string
	err  error
}

// HutchBinary returns the path of a static hutch binary (CGO_ENABLED=0 go
// build -trimpath ./cmd/hutch), built once per test process into one
// directory under os.TempDir() per module root, shared by every test
// process of that checkout. The go command links only when the binary
// there is out of date (it compares the build ID in the file), so the
// test processes of one run link hutch once between them instead of
// once each (about 8 s of CPU per link here). A rebuild renames the new
// file into place: a process still running the old one keeps its inode.
// -trimpath, as hack/kube-up builds Kubernetes: the client libraries both
// use, at the versions kube-up aligns, are compiled once for the two on a
// fresh machine. A failed build fails the test with the build output, and
// every later call fails the same way.
func HutchBinary(t testing.TB) string {
	t.Helper()
	hutchBuild.once.Do(func() { hutchBuild.path, hutchBuild.err = buildHutch() })
	if hutchBuild.err != nil {
		t.Fatalf("building hutch: %v", hutchBuild.err)
	}
	return hutchBuild.path
}

func buildHutch() (string, error) {
	root, err := ModuleRoot()
	if err != nil {
		return "", err
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("the go command is not on PATH: %w", err)
	}
	// One build at a time across test processes: go test starts many at
	// once, and on a cold build cache each would compile every dependency
	// itself (the go command shares finished results, not work under way);
	// after the first, a build only links.
	ctx, cancel := context.WithTimeout(context.Background(), hutchBuildTimeout)
	defer cancel()
	unlock, err := lockFile(ctx, filepath.Join(os.TempDir(), "hutch-testenv-build.lock"))
	if err != nil {
		return "", err
	}
	defer unlock()
	// The directories of the per-process builds this replaced.
	removeEndedBuilds(os.TempDir())
	dir := filepath.Join(os.TempDir(), binDirPrefix+pathHash(root))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	out := filepath.Join(dir, "hutch")
	cmd := exec.CommandContext(ctx, goTool, "build", "-trimpath", "-o", out, "./cmd/hutch")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if output, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("CGO_ENABLED=0 go build -trimpath -o %s ./cmd/hutch (in %s): %v\n%s", out, root, err, output)
	}
	static, err := isStatic(out)
	if err != nil {
		return "", fmt.Errorf("checking %s: %w", out, err)
	}
	if !static {
		return "", fmt.Errorf("%s is dynamically linked despite CGO_ENABLED=0", out)
	}
	return out, nil
}

// buildDirPrefix started the name of a build directory of HutchBinary's
// when each test process built into its own, followed by the building
// process's pid, a dash and MkdirTemp's suffix.
const buildDirPrefix = "hutch-testenv-"

// binDirPrefix starts the name of the directory HutchBinary builds into,
// followed by pathHash of the module root: two checkouts never share a
// binary, the test processes of one always do.
const binDirPrefix = "hutch-testenv-bin-"

// pathHash is a short hex digest of a path, for directory names.
func pathHash(path string) string {
	sum := sha256.Sum256([]byte(path))
	return hex.EncodeToString(sum[:8])
}

// removeEndedBuilds removes the build directories under tmp whose process
// has ended. One whose pid another process has taken since stays until
// that one ends too.
func removeEndedBuilds(tmp string) {
	entries, err := os.ReadDir(tmp)
	if err != nil {
		return
	}
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), buildDirPrefix)
		if !ok || !e.IsDir() {
			continue
		}
		pidText, _, ok := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidText)
		if !ok || err != nil || pid <= 0 {
			continue
		}
		if err := unix.Kill(pid, 0); errors.Is(err, unix.ESRCH) {
			_ = os.RemoveAll(filepath.Join(tmp, e.Name()))
		}
	}
}

// ModuleRoot returns the directory holding go.mod, found by walking up from
// the working directory (a test runs in its package's directory).
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		} else if !errors.Is(err, os.ErrNotExist) {
			return "", err
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod in the working directory or above it")
		}
		dir = parent
	}
}
