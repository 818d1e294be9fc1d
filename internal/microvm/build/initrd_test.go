package build

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/cavaliergopher/cpio"
	"github.com/google/go-cmp/cmp"
)

// entry is one archive member as read back.
type entry struct {
	Name string
	Mode cpio.FileMode
	Uid  int
	Guid int
	Body string
}

// readInitrd gunzips and reads a newc archive.
func readInitrd(t *testing.T, data []byte) []entry {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("initrd is not gzip: %v", err)
	}
	r := cpio.NewReader(zr)
	var out []entry
	for {
		hdr, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("reading the initrd: %v", err)
		}
		body, err := io.ReadAll(r)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, entry{Name: hdr.Name, Mode: hdr.Mode, Uid: hdr.Uid, Guid: hdr.Guid, Body: string(body)})
	}
	return out
}

func TestWriteInitrd(t *testing.T) {
	const version = "6.1.0-test-cloud-amd64"
	files := map[string]string{
		"kernel/drivers/virtio/virtio_ring.ko": info("virtio_ring"),
		"kernel/drivers/virtio/virtio.ko":      info("virtio", "virtio_ring"),
		"kernel/drivers/virtio/virtio_mmio.ko": info("virtio_mmio", "virtio", "virtio_ring"),
		"kernel/fs/fuse/fuse.ko":               info("fuse"),
		"kernel/fs/fuse/virtiofs.ko":           info("virtiofs", "fuse", "virtio", "virtio_ring"),
		"kernel/drivers/net/virtio_net.ko":     info("virtio_net", "virtio"),
	}
	modDir := fakeModules(t, version, files, "")
	mods, err := resolveModules(modDir, []string{"virtio_mmio", "virtiofs"}, os.ReadFile)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	mtime := time.Date(2026, 11, 26, 17, 12, 56, 0, time.UTC)
	if err := writeInitrd(&buf, modDir, version, mods, mtime); err != nil {
		t.Fatalf("writeInitrd: %v", err)
	}

	const dir = cpio.TypeDir | 0o755
	const reg = cpio.TypeReg | 0o644
	base := "lib/modules/" + version + "/"
	list := "/" + base + "kernel/drivers/virtio/virtio_ring.ko\n" +
		"/" + base + "kernel/drivers/virtio/virtio.ko\n" +
		"/" + base + "kernel/drivers/virtio/virtio_mmio.ko\n" +
		"/" + base + "kernel/fs/fuse/fuse.ko\n" +
		"/" + base + "kernel/fs/fuse/virtiofs.ko\n"
	want := []entry{
		{Name: "hutch", Mode: dir},
		{Name: "lib", Mode: dir},
		{Name: "lib/modules", Mode: dir},
		{Name: "lib/modules/" + version, Mode: dir},
		{Name: base + "kernel", Mode: dir},
		{Name: base + "kernel/drivers", Mode: dir},
		{Name: base + "kernel/drivers/virtio", Mode: dir},
		{Name: base + "kernel/fs", Mode: dir},
		{Name: base + "kernel/fs/fuse", Mode: dir},
		{Name: base + "kernel/drivers/virtio/virtio_ring.ko", Mode: reg, Body: files["kernel/drivers/virtio/virtio_ring.ko"]},
		{Name: base + "kernel/drivers/virtio/virtio.ko", Mode: reg, Body: files["kernel/drivers/virtio/virtio.ko"]},
		{Name: base + "kernel/drivers/virtio/virtio_mmio.ko", Mode: reg, Body: files["kernel/drivers/virtio/virtio_mmio.ko"]},
		{Name: base + "kernel/fs/fuse/fuse.ko", Mode: reg, Body: files["kernel/fs/fuse/fuse.ko"]},
		{Name: base + "kernel/fs/fuse/virtiofs.ko", Mode: reg, Body: files["kernel/fs/fuse/virtiofs.ko"]},
		{Name: ModuleList, Mode: reg, Body: list},
	}
	got := readInitrd(t, buf.Bytes())
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("initrd content (-want +got):\n%s", diff)
	}
	for _, e := range got {
		if e.Name == "init" || strings.HasPrefix(e.Name, "/") || strings.HasPrefix(e.Name, "./") {
			t.Errorf("initrd entry %q: no /init, and names are relative without ./", e.Name)
		}
	}

	// The same input gives the same bytes: a rebuild does not change the
	// initrd's hash.
	var again bytes.Buffer
	if err := writeInitrd(&again, modDir, version, mods, mtime); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), again.Bytes()) {
		t.Error("two initrds from the same modules differ")
	}
}

func TestWriteInitrd_MissingFile(t *testing.T) {
	modDir := fakeModules(t, "v", map[string]string{"kernel/a.ko": info("a")}, "")
	err := writeInitrd(io.Discard, modDir, "v", []module{{Name: "b", Path: "kernel/b.ko"}}, time.Time{})
	if err == nil || !strings.Contains(err.Error(), "b.ko") {
		t.Errorf("writeInitrd with a missing module file = %v, want an error naming it", err)
	}
}
