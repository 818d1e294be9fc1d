package testenv

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// devcontainerCLITimeout bounds hack/devcontainer-cli: on a fresh machine
// it installs Node.js from Debian and the package from npm; once both
// are there it answers in seconds, offline.
const devcontainerCLITimeout = 10 * time.Minute

// devcontainerCLI is the one run of hack/devcontainer-cli per test
// process.
var devcontainerCLI struct {
	once sync.Once
	path string
	err  error
}

// DevcontainerCLI returns the path of the reference implementation's
// `devcontainer` executable (@devcontainers/cli, pinned by
// hack/devcontainer-cli, which installs it the first time), running the
// script once per test process. When it cannot be had (no npm registry,
// no Node.js), the test is skipped, except in CI (see Docker), where
// .ci/run installs it before the tests and the comparisons must run: it
// fails there.
func DevcontainerCLI(t testing.TB) string {
	t.Helper()
	devcontainerCLI.once.Do(func() { devcontainerCLI.path, devcontainerCLI.err = installDevcontainerCLI() })
	if err := devcontainerCLI.err; err != nil {
		if InCI() {
			t.Fatalf("the reference devcontainer CLI: %v (CI is set, and the comparisons with it must not skip in CI: run hack/devcontainer-cli)", err)
		}
		t.Skipf("the reference devcontainer CLI: %v", err)
	}
	return devcontainerCLI.path
}

func installDevcontainerCLI() (string, error) {
	root, err := ModuleRoot()
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), devcontainerCLITimeout)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, filepath.Join(root, "hack", "devcontainer-cli"))
	cmd.Dir = root
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("hack/devcontainer-cli: %v\n%s", err, stderr.String())
	}
	path := strings.TrimSpace(stdout.String())
	if fi, err := os.Stat(path); err != nil || fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
		return "", fmt.Errorf("hack/devcontainer-cli printed %q, which is not an executable file", path)
	}
	return path, nil
}
