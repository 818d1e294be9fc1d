package build

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/hutchsandbox/hutch/internal/errdefs"
)

func TestParseAptDepends(t *testing.T) {
	tests := []struct {
		name, out, want string
	}{
		{"bookworm", "linux-image-cloud-amd64\n  Depends: linux-image-6.1.0-57-cloud-amd64\n", "linux-image-6.1.0-57-cloud-amd64"},
		{"other_relations_first", "linux-image-cloud-amd64\n  Recommends: firmware-linux\n  Depends: <linux-image-virtual>\n  Depends: initramfs-tools\n  Depends: linux-image-6.1.0-58-cloud-amd64\n  Suggests: linux-doc\n",
			"linux-image-6.1.0-58-cloud-amd64"},
		{"alternative", "linux-image-cloud-amd64\n |Depends: linux-image-6.12.9-cloud-amd64\n  Depends: linux-image-6.12.8-cloud-amd64\n", "linux-image-6.12.9-cloud-amd64"},
		{"arch_qualified", "linux-image-cloud-amd64\n  Depends: linux-image-6.1.0-57-cloud-amd64:amd64\n", "linux-image-6.1.0-57-cloud-amd64"},
		{"crlf", "linux-image-cloud-amd64\r\n  Depends: linux-image-6.1.0-57-cloud-amd64\r\n", "linux-image-6.1.0-57-cloud-amd64"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseAptDepends(tt.out, KernelMetapackage)
			if err != nil {
				t.Fatalf("parseAptDepends: %v", err)
			}
			if got != tt.want {
				t.Errorf("parseAptDepends = %q, want %q", got, tt.want)
			}
		})
	}
	for _, out := range []string{"", "linux-image-cloud-amd64\n", "linux-image-cloud-amd64\n  Depends: <linux-image-virtual>\n  Depends: initramfs-tools\n"} {
		_, err := parseAptDepends(out, KernelMetapackage)
		if err == nil || !errdefs.IsFailedPrecondition(err) || !strings.Contains(err.Error(), "apt-get update") {
			t.Errorf("parseAptDepends(%q) = %v, want a failed precondition suggesting apt-get update", out, err)
		}
	}
}

func TestParseAptCandidate(t *testing.T) {
	tests := []struct {
		name, out, want string
	}{
		{"available", "linux-image-6.1.0-57-cloud-amd64:\n  Installed: (none)\n  Candidate: 6.1.192-3\n  Version table:\n     6.1.192-3 500\n", "6.1.192-3"},
		{"epoch", "p:\n  Installed: (none)\n  Candidate: 1:2.3-4\n", "1:2.3-4"},
		{"none", "p:\n  Installed: (none)\n  Candidate: (none)\n", ""},
		{"unknown_package", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := parseAptCandidate(tt.out); got != tt.want {
				t.Errorf("parseAptCandidate = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestParseDebFields(t *testing.T) {
	pkg, version := parseDebFields("Package: linux-image-6.1.0-57-cloud-amd64\nVersion: 6.1.192-3\n")
	if pkg != "linux-image-6.1.0-57-cloud-amd64" || version != "6.1.192-3" {
		t.Errorf("parseDebFields = %q, %q", pkg, version)
	}
	if pkg, version := parseDebFields("garbage\n"); pkg != "" || version != "" {
		t.Errorf("parseDebFields(garbage) = %q, %q, want empty", pkg, version)
	}
}

func TestFindKernel(t *testing.T) {
	write := func(t *testing.T, root string, files ...string) {
		t.Helper()
		for _, f := range files {
			p := filepath.Join(root, filepath.FromSlash(f))
			if strings.HasSuffix(f, "/") {
				if err := os.MkdirAll(p, 0o755); err != nil {
					t.Fatal(err)
				}
				continue
			}
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Run("bookworm", func(t *testing.T) {
		root := t.TempDir()
		write(t, root, "boot/vmlinuz-6.1.0-57-cloud-amd64", "boot/config-6.1.0-57-cloud-amd64", "lib/modules/6.1.0-57-cloud-amd64/modules.order")
		got, err := findKernel(root, "k.deb")
		if err != nil {
			t.Fatal(err)
		}
		want := kernelTree{Version: "6.1.0-57-cloud-amd64", Image: filepath.Join(root, "boot/vmlinuz-6.1.0-57-cloud-amd64"),
			ModDir: filepath.Join(root, "lib/modules/6.1.0-57-cloud-amd64")}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("findKernel (-want +got):\n%s", diff)
		}
	})
	t.Run("merged_usr", func(t *testing.T) {
		root := t.TempDir()
		write(t, root, "boot/vmlinuz-6.12.9-cloud-amd64", "usr/lib/modules/6.12.9-cloud-amd64/")
		got, err := findKernel(root, "k.deb")
		if err != nil {
			t.Fatal(err)
		}
		if got.ModDir != filepath.Join(root, "usr/lib/modules/6.12.9-cloud-amd64") {
			t.Errorf("ModDir = %s", got.ModDir)
		}
	})
	for _, tt := range []struct {
		name    string
		files   []string
		wantErr string
	}{
		{"no_modules", []string{"usr/share/doc/x"}, "k.deb is not a kernel image package: it has no lib/modules"},
		{"two_releases", []string{"lib/modules/a/", "lib/modules/b/"}, "k.deb is not a kernel image package: it has 2 kernel releases under lib/modules (a, b), want 1"},
		{"no_image", []string{"lib/modules/a/"}, "k.deb is not a kernel image package: it has no boot/vmlinuz-a"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			write(t, root, tt.files...)
			_, err := findKernel(root, "k.deb")
			if err == nil || err.Error() != tt.wantErr || !errdefs.IsInvalid(err) {
				t.Errorf("findKernel = %v, want invalid %q", err, tt.wantErr)
			}
		})
	}
}
