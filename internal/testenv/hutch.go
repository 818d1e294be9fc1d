package testenv

import (
	"context"
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
// build ./cmd/hutch), built once per test process into a directory of its
// own under os.TempDir() that outlives every test of the process. Nothing
// runs when a test process ends, so a build first removes the directories
// of processes that have ended (about 40 MB each; a machine running CI
// again and again filled its disk with them). A failed build fails the
// test with the build output, and every later call fails the same way.
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
	removeEndedBuilds(os.TempDir())
	dir, err := os.MkdirTemp("", fmt.Sprintf("%s%d-", buildDirPrefix, os.Getpid()))
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, "hutch")
	cmd := exec.CommandContext(ctx, goTool, "build", "-o", out, "./cmd/hutch")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if output, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("CGO_ENABLED=0 go build -o %s ./cmd/hutch (in %s): %v\n%s", out, root, err, output)
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

// buildDirPrefix starts the name of a build directory of HutchBinary's,
// followed by the building process's pid, a dash and MkdirTemp's suffix.
const buildDirPrefix = "hutch-testenv-"

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
