package microvm_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/sandbox/microvm"
)

// The tests below are attacks on what a VM's root disk keeps across
// re-creation. The rule they check: after a VM is re-created under a new
// spec, neither what the agent inside sees nor anything the disk holds
// (its qcow2 overlay, free blocks included) contains what the new spec no
// longer grants.

// withdrawnSecret is a secret made of two halves, so that no command
// line of a search holds it whole.
type withdrawnSecret struct{ a, b string }

func (s withdrawnSecret) String() string { return s.a + s.b }

// shell is a shell expression that yields the secret.
func (s withdrawnSecret) shell() string { return `"$(printf %s%s ` + s.a + ` ` + s.b + `)"` }

// filesHolding lists the files the agent can read anywhere in the guest
// (but /proc, /sys and /dev) that hold secret.
func filesHolding(t *testing.T, f *fixture, spec sandbox.Spec, secret withdrawnSecret) string {
	t.Helper()
	out, _ := run(t, f.rt, spec, `s=`+secret.shell()+`; find / \( -path /proc -o -path /sys -o -path /dev \) -prune -o -type f -exec grep -lF "$s" {} + 2>/dev/null; true`)
	return out
}

// diskHolds stops the office's VM (its disk flushed) and reports whether
// its root disk, the per-office qcow2 overlay read on the host, holds
// secret anywhere, free blocks included.
func diskHolds(t *testing.T, f *fixture, key string, secret withdrawnSecret) bool {
	t.Helper()
	if err := f.rt.Stop(context.Background(), key); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(f.state, "conversations", key, "microvm", "root.qcow2"))
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Contains(data, []byte(secret.String()))
}

// vaultFile writes one vault entry of spec's office and returns its path.
func (f *fixture) vaultFile(t *testing.T, spec sandbox.Spec, name, content string) string {
	t.Helper()
	p := filepath.Join(f.state, "vaults", spec.OfficeKey, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestAttack_WithdrawnVaultFileStays: a vault file and a vault directory
// removed with `hutch vault rm` are gone from the re-created VM, and no
// byte of them is left on its disk.
func TestAttack_WithdrawnVaultFileStays(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	spec := f.office(t, "withdrawn")
	netrc := withdrawnSecret{"netrc-password-", "4f1d0c"}
	key := withdrawnSecret{"ssh-private-key-", "77ab21"}
	vnetrc := f.vaultFile(t, spec, ".netrc", "machine a login b password "+netrc.String()+"\n")
	vssh := filepath.Dir(f.vaultFile(t, spec, "ssh/id_test", key.String()+"\n"))
	spec.VaultFiles = []sandbox.Mount{
		{HostPath: vnetrc, RuntimePath: "/root/.netrc", ReadOnly: true},
		{HostPath: vssh, RuntimePath: "/root/.ssh", ReadOnly: true},
	}
	out, _ := run(t, f.rt, spec, "cat /root/.netrc /root/.ssh/id_test")
	if !strings.Contains(out, netrc.String()) || !strings.Contains(out, key.String()) {
		t.Fatalf("while granted, the guest sees %q", out)
	}

	spec.VaultFiles = nil // hutch vault rm .netrc; hutch vault rm ssh
	out, _ = run(t, f.rt, spec, "cat /root/.netrc /root/.ssh/id_test 2>&1; for p in /root/.netrc /root/.ssh/id_test; do test -e $p && echo present: $p; done; true")
	if strings.Contains(out, netrc.String()) || strings.Contains(out, key.String()) {
		t.Errorf("after the vault files were withdrawn the guest still reads them:\n%s", out)
	}
	if strings.Contains(out, "present:") {
		t.Errorf("a withdrawn vault file's path is still there:\n%s", out)
	}
	for _, s := range []withdrawnSecret{netrc, key} {
		if files := filesHolding(t, f, spec, s); files != "" {
			t.Errorf("after withdrawal these guest files hold %s:\n%s", s.a, files)
		}
	}
	for _, s := range []withdrawnSecret{netrc, key} {
		if diskHolds(t, f, spec.OfficeKey, s) {
			t.Errorf("after withdrawal the VM's root disk still holds %s", s.a)
		}
	}
}

// TestAttack_SharedMemoryAfterDowngrade: an office whose door goes from
// shared support (MEMORY.md writable, synced at shutdown) to isolated no
// longer sees the shared MEMORY.md, and its disk holds none of it.
func TestAttack_SharedMemoryAfterDowngrade(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	spec := f.sharedSupport(t, f.office(t, "downgrade"), false)
	secret := withdrawnSecret{"team-memory-", "9c3e55"}
	if err := os.WriteFile(filepath.Join(f.ws, "MEMORY.md"), []byte("# memory\n"+secret.String()+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, res := run(t, f.rt, spec, "cat /workspace/MEMORY.md && echo 'guest note' >> /workspace/MEMORY.md")
	if res.ExitCode != 0 || !strings.Contains(out, secret.String()) {
		t.Fatalf("while shared, the guest sees %q (exit %d)", out, res.ExitCode)
	}

	isolated := f.office(t, "downgrade") // the door becomes isolated/conversation
	out, _ = run(t, f.rt, isolated, "cat /workspace/MEMORY.md 2>&1; test -e /workspace/MEMORY.md && echo present; true")
	if strings.Contains(out, secret.String()) || strings.Contains(out, "guest note") {
		t.Errorf("after the downgrade the isolated guest reads the shared memory:\n%s", out)
	}
	if strings.Contains(out, "present") {
		t.Errorf("after the downgrade MEMORY.md is still there:\n%s", out)
	}
	if files := filesHolding(t, f, isolated, secret); files != "" {
		t.Errorf("after the downgrade these guest files hold the shared memory:\n%s", files)
	}
	if diskHolds(t, f, isolated.OfficeKey, secret) {
		t.Error("after the downgrade the VM's root disk still holds the shared memory")
	}
	// The guest's note reached the host before the downgrade.
	if data, _ := os.ReadFile(filepath.Join(f.ws, "MEMORY.md")); !strings.Contains(string(data), "guest note") {
		t.Errorf("host MEMORY.md lost the guest's note: %q", data)
	}
}

// TestAttack_RotatedVaultFileKeepsOld: a vault file whose content is
// replaced shows only the new content, and the old is on the disk
// nowhere.
func TestAttack_RotatedVaultFileKeepsOld(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	spec := f.office(t, "rotated")
	old, cur := withdrawnSecret{"token-old-", "51e0aa"}, withdrawnSecret{"token-new-", "d2c417"}
	p := f.vaultFile(t, spec, ".netrc", old.String())
	spec.VaultFiles = []sandbox.Mount{{HostPath: p, RuntimePath: "/root/.netrc", ReadOnly: true}}
	if out, _ := run(t, f.rt, spec, "cat /root/.netrc"); out != old.String() {
		t.Fatalf("before rotation the guest sees %q", out)
	}

	f.vaultFile(t, spec, ".netrc", cur.String())
	if out, _ := run(t, f.rt, spec, "cat /root/.netrc"); out != cur.String() {
		t.Errorf("after rotation the guest sees %q, want only the new content", out)
	}
	if files := filesHolding(t, f, spec, old); files != "" {
		t.Errorf("after rotation these guest files hold the old content:\n%s", files)
	}
	if diskHolds(t, f, spec.OfficeKey, old) {
		t.Error("after rotation the VM's root disk still holds the old content")
	}
}

// TestAttack_MovedVaultFileStays: a vault file whose runtime path
// changes is at the new path only.
func TestAttack_MovedVaultFileStays(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	spec := f.office(t, "moved")
	secret := withdrawnSecret{"moved-token-", "0b9f3d"}
	p := f.vaultFile(t, spec, "token", secret.String())
	spec.VaultFiles = []sandbox.Mount{{HostPath: p, RuntimePath: "/root/token", ReadOnly: true}}
	if out, _ := run(t, f.rt, spec, "cat /root/token"); out != secret.String() {
		t.Fatalf("before the move the guest sees %q", out)
	}

	spec.VaultFiles = []sandbox.Mount{{HostPath: p, RuntimePath: "/etc/hutch-token", ReadOnly: true}}
	if out, _ := run(t, f.rt, spec, "cat /etc/hutch-token"); out != secret.String() {
		t.Errorf("at the new path the guest sees %q", out)
	}
	if out, _ := run(t, f.rt, spec, "cat /root/token 2>&1; test -e /root/token && echo present; true"); strings.Contains(out, secret.String()) || strings.Contains(out, "present") {
		t.Errorf("the old path still holds the file:\n%s", out)
	}
	files := filesHolding(t, f, spec, secret)
	if strings.TrimSpace(files) != "/etc/hutch-token" {
		t.Errorf("files holding the token: %q; want the new path only", files)
	}
}

// TestAttack_DiskFromBeforeTheRecord: a root disk made before hutch kept
// projected files off it (its root.json has no layout) may hold copies
// of vault files an old guest wrote, and no record says which. Its next
// boot starts from a fresh disk, so nothing on it survives.
func TestAttack_DiskFromBeforeTheRecord(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	spec := f.office(t, "old-disk")
	if _, res := run(t, f.rt, spec, "echo copy > /root/old-vault-copy && sync"); res.ExitCode != 0 {
		t.Fatalf("write: %+v", res)
	}
	if err := f.rt.Stop(context.Background(), spec.OfficeKey); err != nil {
		t.Fatal(err)
	}
	meta := filepath.Join(f.state, "conversations", spec.OfficeKey, "microvm", "root.json")
	data, err := os.ReadFile(meta)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	if m["layout"] == nil {
		t.Fatalf("a disk made now records no layout: %s", data)
	}
	delete(m, "layout")
	if data, err = json.Marshal(m); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(meta, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, _ := run(t, f.rt, spec, "cat /root/old-vault-copy 2>/dev/null; true"); out != "" {
		t.Errorf("the old disk was kept: /root/old-vault-copy holds %q", out)
	}
}

// TestAttack_ShareSourceLinked: a conversation whose door shares the
// whole workspace read-write moves another office away and puts a link
// to hutch's state dir in its place. The victim's next boot must refuse
// the link, and nothing of the state dir may show in its VM.
func TestAttack_ShareSourceLinked(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	victim := f.office(t, "victim-share")
	attacker := f.office(t, "attacker-full")
	attacker.Mounts = []sandbox.Mount{{HostPath: f.ws, RuntimePath: "/workspace"}}
	if err := os.MkdirAll(f.state, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.state, "vault-secret"), []byte("s3cret"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, res := run(t, f.rt, attacker, "mv /workspace/"+victim.OfficeKey+" /workspace/moved && ln -s "+f.state+" /workspace/"+victim.OfficeKey+" && echo planted"); out != "planted\n" {
		t.Fatalf("the attacker's plant: %q %+v", out, res)
	}
	var out bytes.Buffer
	_, err := f.rt.Exec(context.Background(), victim, sandbox.ExecRequest{Argv: []string{"cat " + victim.OfficeRuntimePath + "/vault-secret"}, Stdout: &out, Stderr: io.Discard, Timeout: time.Minute})
	if !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), "is a symbolic link") {
		t.Errorf("the victim's boot through a linked office: %v (stdout %q); want the link refusal", err, out.String())
	}
	if strings.Contains(out.String(), "s3cret") {
		t.Errorf("the state dir was shared into the victim's VM: %q", out.String())
	}
}

// TestAttack_ShareSourceSwappedInTheRace: the swap lands after
// virtiofsd checked its source and before QEMU connects, when virtiofsd
// mounts it (played by a hook at exactly that point). The VM must get
// the directory that was checked.
func TestAttack_ShareSourceSwappedInTheRace(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	victim := f.office(t, "victim-race")
	if err := os.WriteFile(filepath.Join(victim.OfficeDir, "mine"), []byte("victim's\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	secretDir := filepath.Join(f.state, "secret-dir")
	if err := os.MkdirAll(secretDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(secretDir, "mine"), []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	swapped := false
	reset := microvm.SetBeforeShare(func(source string) {
		if source != victim.OfficeDir || swapped {
			return
		}
		swapped = true
		if err := os.Rename(source, source+".moved"); err != nil {
			t.Error(err)
		}
		if err := os.Symlink(secretDir, source); err != nil {
			t.Error(err)
		}
	})
	defer reset()
	out, _ := run(t, f.rt, victim, "cat mine")
	if !swapped {
		t.Fatal("the hook never ran: the race was not played")
	}
	if out != "victim's\n" {
		t.Errorf("after a swap in the race the VM reads %q; want the office that was checked", out)
	}
}
