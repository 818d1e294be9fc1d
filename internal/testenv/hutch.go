package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/internal/project"
)

// hutchBuildTimeout bounds waiting for the build lock and building: a cold
// build cache takes minutes on a small machine.
const hutchBuildTimeout = 15 * time.Minute

// noOptimize is the tests' hutch's -gcflags: hack/kube-up's, which must
// match for the two builds to share compiled packages.
const noOptimize = "all=-N -l"

// stripped is its -ldflags: without the symbol table and DWARF. Built
// unoptimized, hutch is 90 MB with them, 71 MB without, and the size
// counts: the microVM's agent rides in its initrd, unpacked into the
// guest's memory (at 90 MB a 256 MiB guest's init died of it), and each
// runtime gets a copy. Stack traces keep their function names and lines.
const stripped = "-s -w"

// hutchBuild is the one build of the hutch binary per test process.
var hutchBuild struct {
	once sync.Once
	path string
	err  error
}

// HutchBinary returns the path of a static hutch binary (CGO_ENABLED=0 go
// build -trimpath -gcflags='all=-N -l' -ldflags='-s -w' ./cmd/hutch),
// built once per test process into one directory under os.TempDir() per
// module root, shared by every test process of that checkout. The go
// command links only when the binary there is out of date (it compares
// the build ID in the file), so the test processes of one run link hutch
// once between them instead of once each (about 8 s of CPU per link
// here). A rebuild renames the new
// file into place: a process still running the old one keeps its inode.
// -trimpath and without optimizations, as hack/kube-up builds Kubernetes:
// the client libraries both use, at the versions kube-up aligns, are
// compiled once for the two on a fresh machine, and a quarter cheaper
// (the tests need hutch's behaviour, not its speed). A failed build
// fails the test with the build output, and every later call fails the
// same way.
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
	// after the first, a build finds the binary up to date.
	ctx, cancel := context.WithTimeout(context.Background(), hutchBuildTimeout)
	defer cancel()
	unlock, err := lockFile(ctx, filepath.Join(os.TempDir(), "hutch-testenv-build.lock"))
	if err != nil {
		return "", err
	}
	defer unlock()
	dir, err := buildDir(root)
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, "hutch")
	cmd := exec.CommandContext(ctx, goTool, "build", "-trimpath", "-gcflags", noOptimize, "-ldflags", stripped, "-o", out, "./cmd/hutch")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if output, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("CGO_ENABLED=0 go build -trimpath -gcflags '%s' -ldflags '%s' -o %s ./cmd/hutch (in %s): %v\n%s", noOptimize, stripped, out, root, err, output)
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

// buildDir returns os.TempDir()/hutch-testenv-bin-<project.Hash of the
// module root>, made when missing: two checkouts never share a binary,
// the test processes of one always do. The name is predictable, so a
// directory found there must be this user's own and writable by nobody
// else, or another local user could have put a binary of theirs where
// the tests run it.
func buildDir(root string) (string, error) {
	dir := filepath.Join(os.TempDir(), "hutch-testenv-bin-"+project.Hash(root))
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return "", err
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return "", err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || !ok || int(st.Uid) != os.Geteuid() || fi.Mode().Perm()&0o022 != 0 {
		return "", fmt.Errorf("%s is not a directory of this user's that only it can write (%s): remove it", dir, fi.Mode())
	}
	return dir, nil
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
