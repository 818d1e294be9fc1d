package assets_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/microvm/assets"
)

const hint = "; rebuild with hutch microvm image build"

func sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

var (
	kernel = []byte("vmlinuz-bytes")
	rootfs = []byte("rootfs-image-bytes")
	agent  = []byte("agent")
)

// build places three assets in a fresh directory, records and writes the
// manifest, and returns the directory and manifest.
func build(t *testing.T) (string, assets.Manifest) {
	t.Helper()
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "boot"), 0o755); err != nil {
		t.Fatal(err)
	}
	for p, b := range map[string][]byte{"boot/vmlinuz": kernel, "rootfs.img": rootfs, "hutch-agent": agent} {
		if err := os.WriteFile(filepath.Join(dir, filepath.FromSlash(p)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	m, err := assets.Record(dir, map[string]string{"kernel": "boot/vmlinuz", "rootfs": "rootfs.img", "agent": "hutch-agent"})
	if err != nil {
		t.Fatalf("Record: %v", err)
	}
	m.Source = "hutch-sandbox:latest sha256:0123"
	if err := assets.Write(dir, m); err != nil {
		t.Fatalf("Write: %v", err)
	}
	return dir, m
}

func TestRecord_HashesAndSorts(t *testing.T) {
	_, m := build(t)
	want := []assets.Asset{
		{Name: "agent", Path: "hutch-agent", Size: int64(len(agent)), SHA256: sum(agent)},
		{Name: "kernel", Path: "boot/vmlinuz", Size: int64(len(kernel)), SHA256: sum(kernel)},
		{Name: "rootfs", Path: "rootfs.img", Size: int64(len(rootfs)), SHA256: sum(rootfs)},
	}
	if diff := cmp.Diff(want, m.Assets); diff != "" {
		t.Errorf("Record assets (-want +got):\n%s", diff)
	}
	if m.Version != assets.Version || m.Created.IsZero() || m.Created.Location() != time.UTC {
		t.Errorf("Record got version %d created %v, want version %d and a UTC time", m.Version, m.Created, assets.Version)
	}
}

func TestWriteLoad_RoundTrip(t *testing.T) {
	dir, m := build(t)
	got, err := assets.Load(dir)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if diff := cmp.Diff(m, got); diff != "" {
		t.Errorf("Load after Write (-want +got):\n%s", diff)
	}
	info, err := os.Stat(filepath.Join(dir, assets.ManifestName))
	if err != nil {
		t.Fatal(err)
	}
	if got := info.Mode().Perm(); got != 0o644 {
		t.Errorf("manifest mode got %v, want 0644", got)
	}
	described, err := assets.Describe(dir)
	if err != nil {
		t.Fatalf("Describe of an intact directory: %v", err)
	}
	if diff := cmp.Diff(m, described); diff != "" {
		t.Errorf("Describe (-want +got):\n%s", diff)
	}
	if a, ok := got.Asset("kernel"); !ok || a.Path != "boot/vmlinuz" {
		t.Errorf("Asset(kernel) got %+v, %v", a, ok)
	}
}

func TestWrite_RefusesInvalid(t *testing.T) {
	dir := t.TempDir()
	err := assets.Write(dir, assets.Manifest{Version: 1})
	if !errdefs.IsInvalid(err) {
		t.Fatalf("Write(invalid) got %v, want ErrInvalid", err)
	}
	if _, err := os.Stat(filepath.Join(dir, assets.ManifestName)); !os.IsNotExist(err) {
		t.Errorf("Write(invalid) left a manifest behind: %v", err)
	}
}

func TestVerify_Refuses(t *testing.T) {
	tampered := append([]byte(nil), rootfs...)
	tampered[3] ^= 0xff
	tests := []struct {
		name   string
		damage func(t *testing.T, dir string)
		want   func(dir string) string
	}{{
		name: "tampered_byte",
		damage: func(t *testing.T, dir string) {
			writeFile(t, filepath.Join(dir, "rootfs.img"), tampered)
		},
		want: func(dir string) string {
			return "microVM asset " + filepath.Join(dir, "rootfs.img") + " is corrupt: sha256 " + sum(tampered) +
				", manifest says " + sum(rootfs) + hint
		},
	}, {
		name: "truncated",
		damage: func(t *testing.T, dir string) {
			if err := os.Truncate(filepath.Join(dir, "rootfs.img"), 5); err != nil {
				t.Fatal(err)
			}
		},
		want: func(dir string) string {
			return "microVM asset " + filepath.Join(dir, "rootfs.img") + " is partial: 5 bytes, manifest says 18" + hint
		},
	}, {
		name: "grown",
		damage: func(t *testing.T, dir string) {
			writeFile(t, filepath.Join(dir, "hutch-agent"), append(append([]byte(nil), agent...), '!'))
		},
		want: func(dir string) string {
			return "microVM asset " + filepath.Join(dir, "hutch-agent") + " has the wrong size: 6 bytes, manifest says 5" + hint
		},
	}, {
		name: "missing",
		damage: func(t *testing.T, dir string) {
			if err := os.Remove(filepath.Join(dir, "boot", "vmlinuz")); err != nil {
				t.Fatal(err)
			}
		},
		want: func(dir string) string {
			return "microVM asset " + filepath.Join(dir, "boot", "vmlinuz") + " is missing (manifest lists kernel, 13 bytes)" + hint
		},
	}, {
		name: "symlink_to_identical_copy",
		damage: func(t *testing.T, dir string) {
			// Even a link to the right bytes is refused: the target could change.
			copyPath := filepath.Join(dir, "rootfs-copy.img")
			writeFile(t, copyPath, rootfs)
			p := filepath.Join(dir, "rootfs.img")
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(copyPath, p); err != nil {
				t.Fatal(err)
			}
		},
		want: func(dir string) string {
			return "microVM asset " + filepath.Join(dir, "rootfs.img") + " is a symlink; assets must be regular files" + hint
		},
	}, {
		name: "directory",
		damage: func(t *testing.T, dir string) {
			p := filepath.Join(dir, "hutch-agent")
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(p, 0o755); err != nil {
				t.Fatal(err)
			}
		},
		want: func(dir string) string {
			return "microVM asset " + filepath.Join(dir, "hutch-agent") + " is not a regular file (a directory)" + hint
		},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir, m := build(t)
			tc.damage(t, dir)
			want := tc.want(dir)
			err := assets.Verify(dir, m, nil)
			if err == nil || err.Error() != want {
				t.Fatalf("Verify got %v,\nwant %s", err, want)
			}
			if !errdefs.IsFailedPrecondition(err) {
				t.Errorf("Verify error %v is not ErrFailedPrecondition", err)
			}
			if _, err := assets.Describe(dir); err == nil || err.Error() != want {
				t.Errorf("Describe got %v,\nwant %s", err, want)
			}
		})
	}
}

// A symlinked parent directory must not lead Verify outside the asset
// directory, even to a file with the right content.
func TestVerify_RefusesEscapeThroughSymlinkedDir(t *testing.T) {
	dir, m := build(t)
	outside := t.TempDir()
	writeFile(t, filepath.Join(outside, "vmlinuz"), kernel)
	if err := os.RemoveAll(filepath.Join(dir, "boot")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "boot")); err != nil {
		t.Fatal(err)
	}
	err := assets.Verify(dir, m, nil)
	if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "boot", "vmlinuz")) {
		t.Fatalf("Verify through a symlinked dir got %v, want a refusal naming the asset", err)
	}
}

func TestLoad_Rejects(t *testing.T) {
	const good = `"created": "2026-01-02T03:04:05Z", "source": "img sha256:1"`
	h := strings.Repeat("a", 64)
	asset := func(name, path string) string {
		return `{"name": "` + name + `", "path": "` + path + `", "size": 1, "sha256": "` + h + `"}`
	}
	tests := []struct {
		name, json, want string
	}{
		{"unknown_version", `{"version": 2, ` + good + `, "assets": [` + asset("kernel", "k") + `]}`,
			"version 2 is unknown (this hutch reads version 1)"},
		{"no_version", `{` + good + `, "assets": [` + asset("kernel", "k") + `]}`, "version is missing"},
		{"no_created", `{"version": 1, "source": "s", "assets": [` + asset("kernel", "k") + `]}`, "created is missing"},
		{"no_source", `{"version": 1, "created": "2026-01-02T03:04:05Z", "assets": [` + asset("kernel", "k") + `]}`, "source is missing"},
		{"no_assets", `{"version": 1, ` + good + `, "assets": []}`, "assets is empty"},
		{"duplicate_name", `{"version": 1, ` + good + `, "assets": [` + asset("kernel", "k") + `, ` + asset("kernel", "k2") + `]}`,
			`asset "kernel" is listed twice`},
		{"duplicate_path", `{"version": 1, ` + good + `, "assets": [` + asset("kernel", "k") + `, ` + asset("rootfs", "k") + `]}`,
			`assets "kernel" and "rootfs" have the same path "k"`},
		{"absolute_path", `{"version": 1, ` + good + `, "assets": [` + asset("kernel", "/boot/vmlinuz") + `]}`,
			`asset "kernel": path "/boot/vmlinuz" is absolute; asset paths are relative to the asset directory`},
		{"escaping_path", `{"version": 1, ` + good + `, "assets": [` + asset("kernel", "../vmlinuz") + `]}`,
			`asset "kernel": path "../vmlinuz" leaves the asset directory`},
		{"escaping_path_inner", `{"version": 1, ` + good + `, "assets": [` + asset("kernel", "boot/../../vmlinuz") + `]}`,
			`asset "kernel": path "boot/../../vmlinuz" leaves the asset directory`},
		{"unclean_path", `{"version": 1, ` + good + `, "assets": [` + asset("kernel", "./vmlinuz") + `]}`,
			`asset "kernel": path "./vmlinuz" is not clean (no empty, "." or ".." elements)`},
		{"manifest_as_asset", `{"version": 1, ` + good + `, "assets": [` + asset("kernel", "manifest.json") + `]}`,
			`asset "kernel": path "manifest.json" is the manifest itself`},
		{"no_name", `{"version": 1, ` + good + `, "assets": [` + asset("", "k") + `]}`, "asset 1: name is missing"},
		{"no_path", `{"version": 1, ` + good + `, "assets": [` + asset("kernel", "") + `]}`, `asset "kernel": path is missing`},
		{"no_sha256", `{"version": 1, ` + good + `, "assets": [{"name": "kernel", "path": "k", "size": 1}]}`,
			`asset "kernel": sha256 is missing`},
		{"bad_sha256", `{"version": 1, ` + good + `, "assets": [{"name": "kernel", "path": "k", "size": 1, "sha256": "ABC"}]}`,
			`asset "kernel": sha256 "ABC" is not 64 lowercase hex digits`},
		{"negative_size", `{"version": 1, ` + good + `, "assets": [{"name": "kernel", "path": "k", "size": -1, "sha256": "` + h + `"}]}`,
			`asset "kernel": size -1 is negative`},
		{"unknown_field", `{"version": 1, ` + good + `, "signature": "x", "assets": [` + asset("kernel", "k") + `]}`,
			`json: unknown field "signature"`},
		{"trailing_data", `{"version": 1, ` + good + `, "assets": [` + asset("kernel", "k") + `]} {}`,
			"unexpected data after the JSON object"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			file := filepath.Join(dir, assets.ManifestName)
			writeFile(t, file, []byte(tc.json))
			_, err := assets.Load(dir)
			want := "microVM asset manifest " + file + " is invalid: " + tc.want + hint
			if err == nil || err.Error() != want {
				t.Fatalf("Load got %v,\nwant %s", err, want)
			}
			if !errdefs.IsFailedPrecondition(err) {
				t.Errorf("Load error %v is not ErrFailedPrecondition", err)
			}
		})
	}
}

func TestLoad_Missing(t *testing.T) {
	dir := t.TempDir()
	_, err := assets.Load(dir)
	want := "microVM asset manifest " + filepath.Join(dir, assets.ManifestName) + " does not exist" + hint
	if err == nil || err.Error() != want || !errdefs.IsNotFound(err) {
		t.Fatalf("Load(empty dir) got %v, want ErrNotFound %q", err, want)
	}
}

// Verify re-validates the manifest it is given, so a hand-built one cannot
// point outside the directory.
func TestVerify_RefusesEscapingManifest(t *testing.T) {
	dir, m := build(t)
	m.Assets[0].Path = "../etc/passwd"
	if err := assets.Verify(dir, m, nil); !errdefs.IsInvalid(err) {
		t.Fatalf("Verify(escaping path) got %v, want ErrInvalid", err)
	}
}

func TestRecord_Refuses(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "real"), kernel)
	if err := os.Symlink(filepath.Join(dir, "real"), filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		names map[string]string
		want  string
	}{
		{"symlink", map[string]string{"kernel": "link"},
			"record microVM asset kernel: " + filepath.Join(dir, "link") + " is not a regular file (a symlink)"},
		{"escaping", map[string]string{"kernel": "../real"},
			"record microVM assets in " + dir + `: asset "kernel": path "../real" leaves the asset directory`},
		{"empty", nil, "record microVM assets: no assets given"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := assets.Record(dir, tc.names)
			if err == nil || err.Error() != tc.want {
				t.Fatalf("Record got %v,\nwant %s", err, tc.want)
			}
		})
	}
	if _, err := assets.Record(dir, map[string]string{"kernel": "absent"}); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Record(missing file) got %v, want a not-exist error", err)
	}
}

type call struct {
	name        string
	done, total int64
}

func TestVerify_Progress(t *testing.T) {
	dir := t.TempDir()
	big := make([]byte, 600<<10) // spans several hashing chunks
	for i := range big {
		big[i] = byte(i)
	}
	writeFile(t, filepath.Join(dir, "rootfs.img"), big)
	writeFile(t, filepath.Join(dir, "empty"), nil)
	m, err := assets.Record(dir, map[string]string{"rootfs": "rootfs.img", "marker": "empty"})
	if err != nil {
		t.Fatal(err)
	}
	m.Source = "test"
	var calls []call
	err = assets.Verify(dir, m, func(name string, done, total int64) {
		calls = append(calls, call{name, done, total})
	})
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	byName := map[string][]call{}
	for _, c := range calls {
		byName[c.name] = append(byName[c.name], c)
	}
	for _, a := range m.Assets {
		cs := byName[a.Name]
		if len(cs) == 0 {
			t.Fatalf("no progress for %s", a.Name)
		}
		if cs[0].done != 0 {
			t.Errorf("%s: first done got %d, want 0", a.Name, cs[0].done)
		}
		for i, c := range cs {
			if c.total != a.Size {
				t.Errorf("%s: total got %d, want %d", a.Name, c.total, a.Size)
			}
			if i > 0 && c.done <= cs[i-1].done {
				t.Errorf("%s: done went %d -> %d, want increasing", a.Name, cs[i-1].done, c.done)
			}
		}
		if last := cs[len(cs)-1]; last.done != a.Size {
			t.Errorf("%s: last done got %d, want %d", a.Name, last.done, a.Size)
		}
	}
	if n := len(byName["rootfs"]); n < 3 {
		t.Errorf("rootfs progress got %d calls, want at least 3 for 600 KiB", n)
	}
}

// A 64 MiB asset is hashed through a small buffer: the bytes allocated while
// verifying it stay far below its size.
func TestVerify_LargeAssetStreams(t *testing.T) {
	const size = 64 << 20
	dir := t.TempDir()
	f, err := os.Create(filepath.Join(dir, "rootfs.img"))
	if err != nil {
		t.Fatal(err)
	}
	// A recognisable, non-zero pattern, written in chunks.
	chunk := make([]byte, 1<<20)
	h := sha256.New()
	for i := 0; i < size/len(chunk); i++ {
		for j := range chunk {
			chunk[j] = byte(i + j)
		}
		h.Write(chunk)
		if _, err := f.Write(chunk); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	m := assets.Manifest{
		Version: assets.Version, Created: time.Unix(0, 0).UTC(), Source: "test",
		Assets: []assets.Asset{{Name: "rootfs", Path: "rootfs.img", Size: size, SHA256: hex.EncodeToString(h.Sum(nil))}},
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	err = assets.Verify(dir, m, nil)
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatalf("Verify(64 MiB): %v", err)
	}
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("Verify(64 MiB) allocated %d bytes", alloc)
	if alloc > 2<<20 {
		t.Errorf("Verify(64 MiB) allocated %d bytes, want under 2 MiB (streaming)", alloc)
	}
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
