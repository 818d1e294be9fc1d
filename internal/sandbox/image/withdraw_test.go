package image_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hutchsandbox/hutch/internal/sandbox"
)

// The tests below check, for image mode, the rule the microVM's attack
// tests check: a container re-created under a new spec keeps its writable
// layer (through a snapshot image), and that layer must hold nothing the
// new spec no longer grants. Vault files and single-file mounts are bind
// mounts, whose content a commit leaves out; what the layer keeps of them
// is the empty mount point the engine made.

// holding lists the files a command can read anywhere in the container
// (but /proc, /sys and /dev) that hold a+b; the secret is built in the
// shell so that no command line holds it whole.
func holding(t *testing.T, f *fixture, spec sandbox.Spec, a, b string) string {
	t.Helper()
	out, _ := run(t, f.rt, spec, `s="$(printf %s%s `+a+` `+b+`)"; find / \( -path /proc -o -path /sys -o -path /dev \) -prune -o -type f -exec grep -lF "$s" {} + 2>/dev/null; true`, nil)
	return out
}

// TestAttack_WithdrawnVaultFileStays: a vault file removed with `hutch
// vault rm` is not readable in the re-created container, whose layer
// holds no byte of it.
func TestAttack_WithdrawnVaultFileStays(t *testing.T) {
	f := newFixture(t)
	spec := f.office(t, "withdrawn")
	a, b := "netrc-password-", "4f1d0c"
	vdir := filepath.Join(f.state, "vaults", spec.OfficeKey)
	if err := os.MkdirAll(vdir, 0o700); err != nil {
		t.Fatal(err)
	}
	netrc := filepath.Join(vdir, ".netrc")
	if err := os.WriteFile(netrc, []byte("machine a login b password "+a+b+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	spec.VaultFiles = []sandbox.Mount{{HostPath: netrc, RuntimePath: "/root/.netrc", ReadOnly: true}}
	if out, _ := run(t, f.rt, spec, "cat /root/.netrc", nil); !strings.Contains(out, a+b) {
		t.Fatalf("while granted, the container sees %q", out)
	}
	before := f.inspect(t, spec).Container.ID

	spec.VaultFiles = nil
	out, _ := run(t, f.rt, spec, "cat /root/.netrc 2>&1; ls -la /root/.netrc 2>&1; true", nil)
	if f.inspect(t, spec).Container.ID == before {
		t.Fatal("the withdrawal did not re-create the container")
	}
	if strings.Contains(out, a+b) {
		t.Errorf("after withdrawal the container still reads the vault file:\n%s", out)
	}
	t.Logf("what the layer keeps at the withdrawn path:\n%s", out)
	if files := holding(t, f, spec, a, b); files != "" {
		t.Errorf("after withdrawal these files hold the vault file's content:\n%s", files)
	}
}

// TestAttack_SharedMemoryAfterDowngrade: a door downgraded from shared
// support to isolated leaves nothing of the shared MEMORY.md in the
// re-created container.
func TestAttack_SharedMemoryAfterDowngrade(t *testing.T) {
	f := newFixture(t)
	spec := f.office(t, "downgrade")
	a, b := "team-memory-", "9c3e55"
	memory := filepath.Join(f.ws, "MEMORY.md")
	if err := os.WriteFile(memory, []byte("# memory\n"+a+b+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	shared := spec
	shared.Mounts = append(append([]sandbox.Mount(nil), spec.Mounts...), sandbox.Mount{HostPath: memory, RuntimePath: "/workspace/MEMORY.md"})
	if out, _ := run(t, f.rt, shared, "cat /workspace/MEMORY.md && echo 'guest note' >> /workspace/MEMORY.md", nil); !strings.Contains(out, a+b) {
		t.Fatalf("while shared, the container sees %q", out)
	}

	out, _ := run(t, f.rt, spec, "cat /workspace/MEMORY.md 2>&1; ls -la /workspace 2>&1; true", nil)
	if strings.Contains(out, a+b) || strings.Contains(out, "guest note") {
		t.Errorf("after the downgrade the container reads the shared memory:\n%s", out)
	}
	t.Logf("what the layer keeps under /workspace:\n%s", out)
	if files := holding(t, f, spec, a, b); files != "" {
		t.Errorf("after the downgrade these files hold the shared memory:\n%s", files)
	}
}
