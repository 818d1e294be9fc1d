package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// RequireNode returns the node executable once the npm packages a test
// drives are installed: marker is a file of them below dir's
// node_modules (e.g. "openapi-fetch/package.json"), what names them in
// the message and hint the script that installs them. A missing node or
// package skips the test, and fails it when CI is set.
func RequireNode(t testing.TB, dir, marker, what, hint string) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err == nil {
		_, err = os.Stat(filepath.Join(dir, "node_modules", filepath.FromSlash(marker)))
	}
	if err != nil {
		if InCI() {
			t.Fatalf("%s: %v (CI is set, and this test must not skip in CI: run %s)", what, err, hint)
		}
		t.Skipf("%s: %v (run %s)", what, err, hint)
	}
	return node
}
