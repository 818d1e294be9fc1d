package cli

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hutchsandbox/hutch/internal/testenv"
)

// TestSandboxLsRm_EveryMode: hutch sandbox ls and rm see the runtimes of
// every managed mode this installation owns, whatever $HUTCH_SANDBOX
// says: a container of image: and a stopped microVM of gondolin: (its
// disk and boot record, as a daemon that ran it left them) at once. A
// mode whose engine is absent (no cluster: kube) is left out with a note;
// --sandbox lists one mode.
func TestSandboxLsRm_EveryMode(t *testing.T) {
	e, mode := dockerEnv(t)
	name := testenv.Name(t)
	imgConv, vmID := "web/"+name+"-img", name+"-vm"
	vmConv, vmKey := "web/"+vmID, key(t, "web", vmID)
	e.ok("exec", "--sandbox", mode, "--conversation", imgConv, "--", "true")
	disk := filepath.Join(e.state, "conversations", vmKey, "microvm")
	if err := os.MkdirAll(disk, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(disk, "root.qcow2"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	boot := `{"platform":"web","conversationId":"` + vmID + `","limits":{"cpus":1,"memoryBytes":268435456,"pids":256}}`
	if err := os.WriteFile(filepath.Join(disk, "boot.json"), []byte(boot), 0o600); err != nil {
		t.Fatal(err)
	}
	e.ok("sandbox", "settings", "sandbox.kube.kubeconfig", filepath.Join(t.TempDir(), "no-kubeconfig"))

	out, errOut, code := e.run("", "sandbox", "ls")
	if code != 0 {
		t.Fatalf("sandbox ls: exit %d\n%s%s", code, out, errOut)
	}
	if !rowStarts(out, imgConv, "image", "running") {
		t.Errorf("sandbox ls lacks the image: runtime of %s:\n%s", imgConv, out)
	}
	if !rowStarts(out, vmConv, "gondolin", "stopped", "none", "-", "1", "256MiB", "256", "gondolin:default", "hutch-vm-"+vmKey) {
		t.Errorf("sandbox ls lacks the stopped microVM of %s:\n%s", vmConv, out)
	}
	if !strings.HasPrefix(errOut, "hutch: kube: not listed: ") || strings.Count(errOut, "\n") != 1 {
		t.Errorf("sandbox ls stderr = %q, want one note on kube", errOut)
	}

	out = e.ok("sandbox", "ls", "--sandbox", "gondolin:default")
	if !rowStarts(out, vmConv, "gondolin") || strings.Contains(out, imgConv) {
		t.Errorf("sandbox ls --sandbox gondolin:default:\n%s", out)
	}
	if _, errOut, code := e.run("", "sandbox", "ls", "--sandbox", "host"); code != 1 || errOut != "hutch: Sandbox 'host' has no runtimes managed by hutch; use image:*, gondolin:default or kube:*\n" {
		t.Errorf("sandbox ls --sandbox host: exit %d, %q", code, errOut)
	}

	if out := e.ok("sandbox", "rm", vmConv); out != "Removed the runtime of "+vmConv+" (gondolin); its office and vault are kept.\n" {
		t.Errorf("sandbox rm %s: %q", vmConv, out)
	}
	if _, err := os.Stat(disk); !os.IsNotExist(err) {
		t.Errorf("the microVM disk survived rm: %v", err)
	}
	if out := e.ok("sandbox", "rm", imgConv); out != "Removed the runtime of "+imgConv+" (image); its office and vault are kept.\n" {
		t.Errorf("sandbox rm %s: %q", imgConv, out)
	}
	if out := e.ok("sandbox", "ls"); strings.Contains(out, name) {
		t.Errorf("sandbox ls after rm:\n%s", out)
	}
	_, errOut, code = e.run("", "sandbox", "rm", imgConv)
	if want := "hutch: No runtime of " + imgConv + " in image, gondolin or kube mode\n"; code != 1 || !strings.HasSuffix(errOut, want) {
		t.Errorf("sandbox rm of nothing: exit %d, %q; want it to end with %q", code, errOut, want)
	}
}

// rowStarts reports whether some line's fields begin with fields.
func rowStarts(out string, fields ...string) bool {
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) >= len(fields) && slices.Equal(f[:len(fields)], fields) {
			return true
		}
	}
	return false
}
