package testenv

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"
)

// Promtool returns the path of Prometheus's promtool, found on PATH
// (hack/promtool installs it: Debian's prometheus package). Without it
// the test is skipped, except in CI (see Docker), where .ci/run installs
// it before the tests and the check must run: it fails there.
func Promtool(t testing.TB) string {
	t.Helper()
	path, err := exec.LookPath("promtool")
	if err != nil {
		if InCI() {
			t.Fatalf("promtool: %v (CI is set, and the metrics check must not skip in CI: run hack/promtool)", err)
		}
		t.Skipf("promtool: %v (hack/promtool installs it)", err)
	}
	return path
}

// CheckMetrics pipes an exposition in the Prometheus text format through
// `promtool check metrics`, which lints names, help, types and units the
// way Prometheus's own tooling does, and fails the test on any complaint.
func CheckMetrics(t testing.TB, exposition []byte) {
	t.Helper()
	cmd := exec.Command(Promtool(t), "check", "metrics")
	cmd.Stdin = bytes.NewReader(exposition)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if err != nil || strings.TrimSpace(out.String()) != "" {
		t.Errorf("promtool check metrics: %v\n%s", err, out.String())
	}
}
