package build

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/hutchsandbox/hutch/internal/errdefs"
)

func TestParseModinfo(t *testing.T) {
	tests := []struct {
		name    string
		section string
		want    modinfo
	}{
		{"real", "alias=virtio:d00000002v*\x00depends=virtio,virtio_ring\x00retpoline=Y\x00intree=Y\x00name=virtio_blk\x00vermagic=6.1.0-57-cloud-amd64 SMP preempt mod_unload modversions \x00",
			modinfo{Name: "virtio_blk", Depends: []string{"virtio", "virtio_ring"}}},
		{"no_deps", "depends=\x00name=virtio_ring\x00", modinfo{Name: "virtio_ring"}},
		{"no_depends_key", "name=fuse\x00", modinfo{Name: "fuse"}},
		{"padding_and_junk", "\x00\x00garbage\x00name=a\x00\x00depends=b\x00\x00\x00", modinfo{Name: "a", Depends: []string{"b"}}},
		{"dashes_normalised", "name=virtio-rng\x00depends=crc-t10dif, ,libcrc32c\x00", modinfo{Name: "virtio_rng", Depends: []string{"crc_t10dif", "libcrc32c"}}},
		{"first_key_wins", "name=a\x00name=b\x00depends=x\x00depends=y\x00", modinfo{Name: "a", Depends: []string{"x"}}},
		{"value_with_equals", "description=a=b\x00name=n\x00", modinfo{Name: "n"}},
		{"empty", "", modinfo{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, parseModinfo([]byte(tt.section))); diff != "" {
				t.Errorf("parseModinfo (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseBuiltin(t *testing.T) {
	got := parseBuiltin([]byte("kernel/fs/ext4/ext4.ko\nkernel/lib/crc-t10dif.ko\n\n# comment\nkernel/crypto/crc32c_generic.ko\n"))
	want := map[string]bool{"ext4": true, "crc_t10dif": true, "crc32c_generic": true}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("parseBuiltin (-want +got):\n%s", diff)
	}
}

func TestOrderModules(t *testing.T) {
	// The real closure of the guest's modules in Debian's cloud kernel 6.1.
	debian := map[string][]string{
		"virtio_ring": nil, "virtio": {"virtio_ring"}, "virtio_mmio": {"virtio", "virtio_ring"},
		"virtio_blk": {"virtio", "virtio_ring"}, "virtio_console": {"virtio", "virtio_ring"},
		"fuse": nil, "virtiofs": {"fuse", "virtio", "virtio_ring"},
		"failover": nil, "net_failover": {"failover"}, "virtio_net": {"virtio_ring", "virtio", "net_failover"},
	}
	tests := []struct {
		name    string
		roots   []string
		deps    map[string][]string
		builtin map[string]bool
		want    []string
		wantErr string
	}{
		{name: "debian_cloud", roots: GuestModules, deps: debian,
			want: []string{"virtio_ring", "virtio", "virtio_mmio", "virtio_blk", "virtio_console", "fuse", "virtiofs", "failover", "net_failover", "virtio_net"}},
		{name: "diamond_once", roots: []string{"top"},
			deps: map[string][]string{"top": {"left", "right"}, "left": {"base"}, "right": {"base"}, "base": nil},
			want: []string{"base", "left", "right", "top"}},
		{name: "root_also_a_dependency", roots: []string{"b", "a"},
			deps: map[string][]string{"a": nil, "b": {"a"}},
			want: []string{"a", "b"}},
		{name: "dash_in_root", roots: []string{"virtio-blk"},
			deps: map[string][]string{"virtio_blk": nil},
			want: []string{"virtio_blk"}},
		{name: "builtin_skipped", roots: []string{"a", "ext4"},
			deps:    map[string][]string{"a": {"crc32c"}},
			builtin: map[string]bool{"crc32c": true, "ext4": true},
			want:    []string{"a"}},
		{name: "builtin_wins_over_file", roots: []string{"a"},
			deps:    map[string][]string{"a": {"b"}, "b": nil},
			builtin: map[string]bool{"b": true},
			want:    []string{"a"}},
		{name: "no_roots", roots: nil, deps: debian, want: nil},
		{name: "missing_root", roots: []string{"virtio_mmio"}, deps: map[string][]string{},
			wantErr: "kernel module virtio_mmio is missing"},
		{name: "missing_dependency", roots: []string{"virtio_net"},
			deps:    map[string][]string{"virtio_net": {"net_failover"}, "net_failover": {"failover"}},
			wantErr: "kernel module failover is missing (needed by net_failover <- virtio_net)"},
		{name: "cycle", roots: []string{"a"},
			deps:    map[string][]string{"a": {"b"}, "b": {"c"}, "c": {"b"}},
			wantErr: "kernel modules depend on each other in a cycle: b -> c -> b"},
		{name: "self_cycle", roots: []string{"a"},
			deps:    map[string][]string{"a": {"a"}},
			wantErr: "kernel modules depend on each other in a cycle: a -> a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := orderModules(tt.roots, tt.deps, tt.builtin)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("orderModules error = %v, want %q", err, tt.wantErr)
				}
				if !errdefs.IsFailedPrecondition(err) {
					t.Errorf("orderModules error class: %v is not ErrFailedPrecondition", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("orderModules: %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("orderModules (-want +got):\n%s", diff)
			}
			assertDepsFirst(t, got, tt.deps, tt.builtin)
		})
	}
}

// assertDepsFirst checks that every module comes after its dependencies.
func assertDepsFirst(t *testing.T, order []string, deps map[string][]string, builtin map[string]bool) {
	t.Helper()
	pos := make(map[string]int)
	for i, m := range order {
		if _, dup := pos[m]; dup {
			t.Errorf("%s is listed twice in %v", m, order)
		}
		pos[m] = i
	}
	for _, m := range order {
		for _, d := range deps[m] {
			if builtin[d] {
				continue
			}
			if pd, ok := pos[d]; !ok || pd > pos[m] {
				t.Errorf("%s is loaded before its dependency %s: %v", m, d, order)
			}
		}
	}
}

// fakeModules writes a module tree whose ".ko" files hold a fake .modinfo
// section as their whole content, so os.ReadFile reads them as
// readModinfoELF reads real modules. It returns lib/modules/<version>.
func fakeModules(t *testing.T, version string, files map[string]string, builtin string) string {
	t.Helper()
	modDir := filepath.Join(t.TempDir(), "lib", "modules", version)
	for rel, content := range files {
		p := filepath.Join(modDir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if builtin != "" {
		if err := os.WriteFile(filepath.Join(modDir, "modules.builtin"), []byte(builtin), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return modDir
}

func info(name string, deps ...string) string {
	return "license=GPL\x00depends=" + strings.Join(deps, ",") + "\x00name=" + name + "\x00"
}

func TestResolveModules(t *testing.T) {
	modDir := fakeModules(t, "6.1.0-test", map[string]string{
		"kernel/drivers/virtio/virtio_ring.ko":   info("virtio_ring"),
		"kernel/drivers/virtio/virtio.ko":        info("virtio", "virtio_ring"),
		"kernel/drivers/virtio/virtio_mmio.ko":   info("virtio_mmio", "virtio", "virtio_ring"),
		"kernel/drivers/block/virtio-blk.ko":     info("virtio_blk", "virtio", "crc_t10dif"),
		"kernel/drivers/unrelated/unused.ko":     info("unused"),
		"kernel/drivers/unrelated/unused2.ko":    "not read: not needed",
		"kernel/drivers/compressed/zipped.ko.xz": "xz",
		"modules.order":                          "kernel/drivers/virtio/virtio.ko\n",
	}, "kernel/lib/crc-t10dif.ko\n")

	got, err := resolveModules(modDir, []string{"virtio_mmio", "virtio_blk"}, os.ReadFile)
	if err != nil {
		t.Fatalf("resolveModules: %v", err)
	}
	want := []module{
		{Name: "virtio_ring", Path: "kernel/drivers/virtio/virtio_ring.ko"},
		{Name: "virtio", Path: "kernel/drivers/virtio/virtio.ko"},
		{Name: "virtio_mmio", Path: "kernel/drivers/virtio/virtio_mmio.ko"},
		{Name: "virtio_blk", Path: "kernel/drivers/block/virtio-blk.ko"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("resolveModules (-want +got):\n%s", diff)
	}

	for _, tt := range []struct {
		name, root, wantErr string
	}{
		{"missing", "virtio_net", "kernel module virtio_net is missing"},
		{"compressed", "zipped", "kernel module zipped is compressed (kernel/drivers/compressed/zipped.ko.xz); hutch puts only uncompressed modules into the initrd, as Debian's cloud kernel ships them"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := resolveModules(modDir, []string{tt.root}, os.ReadFile)
			if err == nil || err.Error() != tt.wantErr {
				t.Fatalf("resolveModules(%s) error = %v, want %q", tt.root, err, tt.wantErr)
			}
		})
	}
}

func TestResolveModules_Duplicate(t *testing.T) {
	modDir := fakeModules(t, "v", map[string]string{
		"kernel/a/virtio-blk.ko": info("virtio_blk"),
		"kernel/b/virtio_blk.ko": info("virtio_blk"),
	}, "")
	_, err := resolveModules(modDir, []string{"virtio_blk"}, os.ReadFile)
	want := "kernel module virtio_blk is there more than once (kernel/a/virtio-blk.ko, kernel/b/virtio_blk.ko); hutch cannot tell which one the kernel would load"
	if err == nil || err.Error() != want {
		t.Fatalf("resolveModules error = %v, want %q", err, want)
	}
}

func TestReadModinfoELF_NotELF(t *testing.T) {
	p := filepath.Join(t.TempDir(), "x.ko")
	if err := os.WriteFile(p, []byte("not an ELF file"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := readModinfoELF(p); err == nil || !strings.Contains(err.Error(), p) {
		t.Errorf("readModinfoELF(non-ELF) = %v, want an error naming the file", err)
	}
}

func TestReadModinfoELF_NoSection(t *testing.T) {
	// The test binary is an ELF file without a .modinfo section.
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	_, err = readModinfoELF(exe)
	if err == nil || !strings.Contains(err.Error(), "has no .modinfo section") || !errdefs.IsFailedPrecondition(err) {
		t.Errorf("readModinfoELF(test binary) = %v, want a failed precondition about .modinfo", err)
	}
}
