package microvm

import (
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/hutchsandbox/hutch/internal/egress"
	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/microvm/assets"
	"github.com/hutchsandbox/hutch/internal/netpolicy"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/sandbox/activity"
)

func TestWholeCPUs(t *testing.T) {
	n := runtime.NumCPU()
	for in, want := range map[float64]int{0: 1, 0.5: 1, 1: 1, 1.0000000001: 1, 1.5: min(2, n), 2: min(2, n), 1000: n} {
		if got := WholeCPUs(in); got != want {
			t.Errorf("WholeCPUs(%g) = %d, want %d", in, got, want)
		}
	}
}

func TestCommandMemory(t *testing.T) {
	for in, want := range map[int64]int64{1 << 30: 896 << 20, 256 << 20: 160 << 20, 4 << 30: 3584 << 20, 100 << 20: 32 << 20} {
		if got := commandMemory(in); got != want {
			t.Errorf("commandMemory(%d MiB) = %d MiB, want %d MiB", in>>20, got>>20, want>>20)
		}
	}
}

// TestProjectSpec: directories become shares in order, single files
// copies (synced when writable under /workspace), vault entries 0600
// read-only copies of every file of a vault directory.
func TestProjectSpec(t *testing.T) {
	ws := t.TempDir()
	mk := func(p, content string) string {
		t.Helper()
		full := filepath.Join(ws, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if content != "" {
			if err := os.WriteFile(full, []byte(content), 0o640); err != nil {
				t.Fatal(err)
			}
		} else if err := os.MkdirAll(full, 0o755); err != nil {
			t.Fatal(err)
		}
		return full
	}
	office, skills := mk("office", ""), mk("skills", "")
	memory := mk("MEMORY.md", "# memory")
	netrc := mk("vault/.netrc", "secret")
	gh := mk("vault/gh", "")
	mk("vault/gh/hosts.yml", "token")
	spec := sandbox.Spec{
		Mounts: []sandbox.Mount{
			{HostPath: office, RuntimePath: "/workspace/k"},
			{HostPath: memory, RuntimePath: "/workspace/MEMORY.md"},
			{HostPath: skills, RuntimePath: "/workspace/skills", ReadOnly: true},
		},
		VaultFiles: []sandbox.Mount{
			{HostPath: netrc, RuntimePath: "/root/.netrc", ReadOnly: true},
			{HostPath: gh, RuntimePath: "/root/.config/gh", ReadOnly: true},
		},
	}
	got, err := projectSpec(spec)
	if err != nil {
		t.Fatal(err)
	}
	want := plan{
		Shares: []share{
			{Tag: "fs0", HostPath: office, RuntimePath: "/workspace/k"},
			{Tag: "fs1", HostPath: skills, RuntimePath: "/workspace/skills", ReadOnly: true},
		},
		Files: []copied{
			{HostPath: memory, RuntimePath: "/workspace/MEMORY.md", Mode: 0o640, Sync: true},
			{HostPath: netrc, RuntimePath: "/root/.netrc", Mode: 0o600, ReadOnly: true},
			{HostPath: filepath.Join(gh, "hosts.yml"), RuntimePath: "/root/.config/gh/hosts.yml", Mode: 0o600, ReadOnly: true},
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("projectSpec (-want +got):\n%s", diff)
	}
	// Read-only MEMORY.md (private) is copied, never synced.
	spec.Mounts[1].ReadOnly = true
	got, _ = projectSpec(spec)
	if f := got.Files[0]; f.Sync || !f.ReadOnly {
		t.Errorf("private MEMORY.md: %+v", f)
	}
	// A projected path that is missing is refused, not skipped.
	spec.Mounts = append(spec.Mounts, sandbox.Mount{HostPath: filepath.Join(ws, "events"), RuntimePath: "/workspace/events"})
	if _, err := projectSpec(spec); err == nil {
		t.Error("a missing projected directory was accepted")
	}
}

// TestFingerprint: what a VM is booted from changes its fingerprint;
// the order of mounts does not.
func TestFingerprint(t *testing.T) {
	dir := t.TempDir()
	cred := filepath.Join(dir, "cred")
	if err := os.WriteFile(cred, []byte("one"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := &Runtime{cfg: Config{Accel: "tcg"}}
	r.log = discard()
	m := assets.Manifest{Assets: []assets.Asset{{Name: "kernel", SHA256: "aa"}, {Name: "rootfs", SHA256: "bb"}}}
	spec := sandbox.Spec{
		Mounts:     []sandbox.Mount{{HostPath: "/a", RuntimePath: "/workspace/a"}, {HostPath: "/b", RuntimePath: "/workspace/b"}},
		VaultFiles: []sandbox.Mount{{HostPath: cred, RuntimePath: "/root/cred"}},
		Limits:     sandbox.Limits{CPUs: 1, MemoryBytes: 512 << 20, Pids: 100},
	}
	fp := func(spec sandbox.Spec, s *session, m assets.Manifest) string {
		t.Helper()
		d, err := r.desired(s, spec, m)
		if err != nil {
			t.Fatal(err)
		}
		return d.fingerprint()
	}
	base := fp(spec, newSession(), m)
	swapped := spec
	swapped.Mounts = []sandbox.Mount{spec.Mounts[1], spec.Mounts[0]}
	if fp(swapped, newSession(), m) != base {
		t.Error("mount order changed the fingerprint")
	}
	if err := os.WriteFile(cred, []byte("two"), 0o600); err != nil {
		t.Fatal(err)
	}
	rotated := fp(spec, newSession(), m)
	if rotated == base {
		t.Error("a rotated credential kept the fingerprint")
	}
	boost := sandbox.Limits{CPUs: 2, MemoryBytes: 2 << 30}
	if fp(spec, withBoost(newSession(), &boost), m) == rotated {
		t.Error("a boost kept the fingerprint")
	}
	ro := spec
	ro.Mounts = []sandbox.Mount{spec.Mounts[0], {HostPath: "/b", RuntimePath: "/workspace/b", ReadOnly: true}}
	if fp(ro, newSession(), m) == rotated {
		t.Error("a door policy change (read-only mount) kept the fingerprint")
	}
	m2 := assets.Manifest{Assets: []assets.Asset{{Name: "kernel", SHA256: "aa"}, {Name: "rootfs", SHA256: "cc"}}}
	if fp(spec, newSession(), m2) == rotated {
		t.Error("a rebuilt root filesystem kept the fingerprint")
	}
	// Fractional CPUs are rounded up to whole vCPUs: 0.5 and 1 are the same VM.
	half := spec
	half.Limits.CPUs = 0.5
	if fp(half, newSession(), m) != rotated {
		t.Error("0.5 CPUs and 1 CPU gave different VMs")
	}
}

// TestFingerprint_Network: none and allowlist are different VMs (a card
// or none); a new allowlist is one only when the proxy cannot read it
// live; the CA the guest trusts is part of the VM; placeholders are
// refused by a runtime whose proxy could not substitute them.
func TestFingerprint_Network(t *testing.T) {
	m := assets.Manifest{Assets: []assets.Asset{{Name: "kernel", SHA256: "aa"}}}
	fp := func(r *Runtime, spec sandbox.Spec) string {
		t.Helper()
		d, err := r.desired(newSession(), spec, m)
		if err != nil {
			t.Fatal(err)
		}
		return d.fingerprint()
	}
	fixed := &Runtime{cfg: Config{Accel: "tcg"}, log: discard()}
	one := sandbox.Spec{OfficeKey: "k", Network: netpolicy.ModeAllowlist, NetworkAllow: []string{"a.example"}}
	two := one
	two.NetworkAllow = []string{"a.example", "b.example"}
	none := sandbox.Spec{OfficeKey: "k", Network: netpolicy.ModeNone}
	if fp(fixed, one) == fp(fixed, none) {
		t.Error("allowlist and none gave the same VM")
	}
	if fp(fixed, one) == fp(fixed, two) {
		t.Error("an allowlist fixed at boot changed and kept the VM")
	}

	dir := t.TempDir()
	ca, err := egress.LoadOrCreateCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	live := &Runtime{cfg: Config{
		Accel:         "tcg",
		EgressPolicy:  func(string) netpolicy.Policy { return netpolicy.Policy{} },
		EgressSecrets: func(string) []egress.Secret { return nil },
		EgressCA:      func(string) (*egress.CA, error) { return ca, nil },
	}, log: discard()}
	if fp(live, one) != fp(live, two) {
		t.Error("an allowlist read per connection changed and re-created the VM")
	}
	if fp(live, one) == fp(live, none) {
		t.Error("allowlist and none gave the same VM, with a live allowlist")
	}
	withCA := fp(live, one)
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if ca, err = egress.LoadOrCreateCA(t.TempDir()); err != nil {
		t.Fatal(err)
	}
	if fp(live, one) == withCA {
		t.Error("a new CA kept the VM that trusts the old one")
	}

	placeholders := one
	placeholders.Placeholders = true
	if _, err := fixed.desired(newSession(), placeholders, m); !errdefs.IsFailedPrecondition(err) {
		t.Errorf("placeholders without the proxy's secrets and CA: %v, want a refusal", err)
	}
	if _, err := live.desired(newSession(), placeholders, m); err != nil {
		t.Errorf("placeholders with the proxy's secrets and CA: %v", err)
	}
	placeholders.Network, placeholders.NetworkAllow = netpolicy.ModeNone, nil
	if _, err := fixed.desired(newSession(), placeholders, m); err != nil {
		t.Errorf("placeholders under none (no card, nothing to refuse): %v", err)
	}
}

// TestTrustEnv: commands of a VM that trusts the CA are pointed at its
// files, unless their env names others.
func TestTrustEnv(t *testing.T) {
	r := &Runtime{cfg: Config{EgressCA: func(string) (*egress.CA, error) { return nil, nil }}}
	spec := sandbox.Spec{Network: netpolicy.ModeAllowlist}
	got := r.trustEnv(spec, map[string]string{"GIT_SSL_CAINFO": "/mine.pem", "TOKEN": "x"})
	want := map[string]string{
		"TOKEN":               "x",
		"GIT_SSL_CAINFO":      "/mine.pem",
		"SSL_CERT_FILE":       guestEgressBundle,
		"REQUESTS_CA_BUNDLE":  guestEgressBundle,
		"CURL_CA_BUNDLE":      guestEgressBundle,
		"NODE_EXTRA_CA_CERTS": guestEgressCA,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("trust env (-want +got):\n%s", diff)
	}
	if got := r.trustEnv(sandbox.Spec{Network: netpolicy.ModeNone}, nil); len(got) != 0 {
		t.Errorf("a VM without a card got %v", got)
	}
}

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

func newSession() *session {
	t := activity.Table[session]{New: func(o *activity.Office) *session { return &session{Office: o} }}
	return t.Get("v1-web-test-0123456789abcdef")
}

func withBoost(s *session, b *sandbox.Limits) *session {
	s.boost = b
	return s
}

// TestWithdrawn: a boot withdraws exactly the paths the last plan
// projected and this one lacks.
func TestWithdrawn(t *testing.T) {
	p := plan{Files: []copied{{RuntimePath: "/root/.netrc"}, {RuntimePath: "/workspace/MEMORY.md"}, {RuntimePath: "/root/.netrc"}}}
	cur := p.filePaths()
	if diff := cmp.Diff([]string{"/root/.netrc", "/workspace/MEMORY.md"}, cur); diff != "" {
		t.Errorf("filePaths mismatch (-want +got):\n%s", diff)
	}
	prev := []string{"/root/.netrc", "/root/.ssh/id_ed25519", "/workspace/MEMORY.md", "/etc/token"}
	if diff := cmp.Diff([]string{"/root/.ssh/id_ed25519", "/etc/token"}, withdrawn(prev, cur)); diff != "" {
		t.Errorf("withdrawn mismatch (-want +got):\n%s", diff)
	}
	if got := withdrawn(nil, cur); got != nil {
		t.Errorf("withdrawn with no record = %q, want nothing", got)
	}
}

// TestProjectedRecord: the record of what a disk was given survives a
// round trip; a missing or unreadable one withdraws nothing.
func TestProjectedRecord(t *testing.T) {
	r := &Runtime{cfg: Config{StateDir: t.TempDir()}, log: slog.New(slog.DiscardHandler)}
	if got := r.projected("k"); got != nil {
		t.Errorf("no record: %q", got)
	}
	if err := os.MkdirAll(r.diskDir("k"), 0o700); err != nil {
		t.Fatal(err)
	}
	want := []string{"/root/.netrc", "/workspace/MEMORY.md"}
	if err := r.recordProjected("k", want); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, r.projected("k")); diff != "" {
		t.Errorf("round trip mismatch (-want +got):\n%s", diff)
	}
	if err := os.WriteFile(filepath.Join(r.diskDir("k"), projectedName), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := r.projected("k"); got != nil {
		t.Errorf("unreadable record: %q", got)
	}
}
