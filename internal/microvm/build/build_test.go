package build

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/hutchsandbox/hutch/internal/engine"
	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/microvm/assets"
)

func TestOptions_Validate(t *testing.T) {
	ok := Options{Engine: &engine.Engine{}, From: "hutch-sandbox:dev", Dir: "/x/default", CacheDir: "/x/cache"}
	if err := ok.Validate(); err != nil {
		t.Fatalf("Validate(%+v): %v", ok, err)
	}
	withDeb := ok
	withDeb.CacheDir, withDeb.KernelDeb = "", "/k.deb"
	if err := withDeb.Validate(); err != nil {
		t.Errorf("Validate without a cache dir but with a .deb: %v", err)
	}
	tests := []struct {
		name   string
		change func(*Options)
		want   string
	}{
		{"no_engine", func(o *Options) { o.Engine = nil }, "microVM image build: no container engine given"},
		{"no_image", func(o *Options) { o.From = " " }, "microVM image build: no Docker image to build the root filesystem from"},
		{"no_dir", func(o *Options) { o.Dir = "" }, "microVM image build: no asset directory given"},
		{"no_cache", func(o *Options) { o.CacheDir = "" }, "microVM image build: no kernel cache directory given (needed unless a kernel .deb is)"},
		{"negative_free", func(o *Options) { o.Free = -1 }, "free space -1 is negative"},
		{"huge_free", func(o *Options) { o.Free = 2 << 40 }, "free space 2 TiB is more than 1 TiB"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := ok
			tt.change(&o)
			err := o.Validate()
			if err == nil || err.Error() != tt.want || !errdefs.IsInvalid(err) {
				t.Errorf("Validate = %v, want invalid %q", err, tt.want)
			}
		})
	}
}

func TestCheckHost_NotRoot(t *testing.T) {
	old := geteuid
	geteuid = func() int { return 1000 }
	t.Cleanup(func() { geteuid = old })
	err := CheckHost("")
	if err == nil || !errdefs.IsFailedPrecondition(err) || !strings.Contains(err.Error(), "needs root") {
		t.Fatalf("CheckHost as uid 1000 = %v, want a failed precondition saying it needs root", err)
	}
	// Build refuses before it touches the engine or the disk.
	dir := filepath.Join(t.TempDir(), "default")
	_, err = Build(context.Background(), Options{Engine: &engine.Engine{}, From: "x", Dir: dir, CacheDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "needs root") {
		t.Fatalf("Build as uid 1000 = %v, want the root refusal", err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("Build as uid 1000 created %s", dir)
	}
}

func TestMissingImageError(t *testing.T) {
	var err error = &MissingImageError{Ref: "hutch-sandbox:dev"}
	if !errdefs.IsFailedPrecondition(err) || err.Error() != "The image hutch-sandbox:dev does not exist in the container engine" {
		t.Errorf("MissingImageError = %q (failed precondition: %v)", err, errdefs.IsFailedPrecondition(err))
	}
}

func TestCheckReplaceable(t *testing.T) {
	root := t.TempDir()
	mk := func(name string, files ...string) string {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if err := os.WriteFile(filepath.Join(p, f), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return p
	}
	if err := os.WriteFile(filepath.Join(root, "file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(mk("target", assets.ManifestName), filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, dir, wantErr string
	}{
		{"missing", filepath.Join(root, "nothing"), ""},
		{"empty", mk("empty"), ""},
		{"previous_build", mk("build", assets.ManifestName, KernelFile), ""},
		{"other_content", mk("home", ".bashrc"), "is not empty and holds no microVM build (no manifest.json); a build replaces the whole directory, so it refuses this one: choose another directory or empty it"},
		{"file", filepath.Join(root, "file"), "exists and is not a directory"},
		{"symlink", filepath.Join(root, "link"), "is a symlink; a build replaces the directory itself, so pass the directory it points to"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := checkReplaceable(tt.dir)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("checkReplaceable(%s) = %v", tt.dir, err)
			case tt.wantErr != "" && (err == nil || err.Error() != tt.dir+" "+tt.wantErr || !errdefs.IsFailedPrecondition(err)):
				t.Errorf("checkReplaceable(%s) = %v, want %q", tt.dir, err, tt.dir+" "+tt.wantErr)
			}
		})
	}
}

// listDir returns the names in dir, sorted.
func listDir(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	return names
}

func stage(t *testing.T, parent, name, marker string) string {
	t.Helper()
	p := filepath.Join(parent, name)
	if err := os.Mkdir(p, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(p, marker), []byte(marker), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestInstall(t *testing.T) {
	parent := t.TempDir()
	b, _ := testBuilder()
	b.dir = filepath.Join(parent, "default")

	// First build: nothing to replace.
	if err := b.install(stage(t, parent, "default.building-1", "first")); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"default"}, listDir(t, parent)); diff != "" {
		t.Errorf("after the first install (-want +got):\n%s", diff)
	}
	// Second build replaces the first; nothing else is left.
	if err := b.install(stage(t, parent, "default.building-2", "second")); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"default"}, listDir(t, parent)); diff != "" {
		t.Errorf("after the second install (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"second"}, listDir(t, b.dir)); diff != "" {
		t.Errorf("installed build (-want +got):\n%s", diff)
	}
}

// TestRenameInto covers the fallback for file systems without
// RENAME_EXCHANGE.
func TestRenameInto(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "default")
	old, err := renameInto(stage(t, parent, "s1", "first"), dir)
	if err != nil || old != "" {
		t.Fatalf("renameInto (nothing there) = %q, %v", old, err)
	}
	old, err = renameInto(stage(t, parent, "s2", "second"), dir)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(old, dir+".old-") {
		t.Errorf("set aside as %q, want %s.old-*", old, dir)
	}
	if diff := cmp.Diff([]string{"first"}, listDir(t, old)); diff != "" {
		t.Errorf("set-aside build (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"second"}, listDir(t, dir)); diff != "" {
		t.Errorf("installed build (-want +got):\n%s", diff)
	}
	// A staging directory that cannot be renamed leaves the old build in place.
	if _, err := renameInto(filepath.Join(parent, "no-such-staging"), dir); err == nil {
		t.Fatal("renameInto from a missing staging dir succeeded")
	}
	if diff := cmp.Diff([]string{"second"}, listDir(t, dir)); diff != "" {
		t.Errorf("after a failed rename (-want +got):\n%s", diff)
	}
}

func TestLockDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "default")
	unlock, err := lockDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	_, err = lockDir(dir)
	if err == nil || !errdefs.IsConflict(err) || !strings.Contains(err.Error(), "Another microVM image build into "+dir+" is running") {
		t.Errorf("second lockDir = %v, want a conflict", err)
	}
	unlock()
	unlock2, err := lockDir(dir)
	if err != nil {
		t.Fatalf("lockDir after unlock: %v", err)
	}
	unlock2()
}
