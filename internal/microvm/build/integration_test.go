package build_test

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/moby/moby/client"

	"github.com/hutchsandbox/hutch/internal/engine"
	"github.com/hutchsandbox/hutch/internal/microvm/assets"
	"github.com/hutchsandbox/hutch/internal/microvm/build"
	"github.com/hutchsandbox/hutch/internal/testenv"
)

// requireRoot skips a test that extracts an image's filesystem: only root
// can keep its file owners. CI runs the tests as root, so there they run.
func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("building the microVM image needs root (it keeps the image's file owners); run the tests as root, as CI does")
	}
}

// connect returns the engine testenv.Docker reaches (skipping without one,
// failing in CI), connected as the product connects.
func connect(t *testing.T) (*engine.Engine, *client.Client) {
	t.Helper()
	cli := testenv.Docker(t)
	eng, err := engine.Connect(context.Background())
	if err != nil {
		t.Fatalf("engine.Connect: %v", err)
	}
	t.Cleanup(func() { _ = eng.Close() })
	return eng, cli
}

var aptOnce sync.Once

// ensureAptLists runs apt-get update once when apt does not know the cloud
// kernel yet (a fresh machine has no package lists).
func ensureAptLists(t *testing.T) {
	t.Helper()
	build.RequireTool(t, "apt-cache")
	aptOnce.Do(func() {
		if exec.Command("apt-cache", "show", build.KernelMetapackage).Run() == nil {
			return
		}
		t.Logf("apt-cache does not know %s; running apt-get update", build.KernelMetapackage)
		if out, err := exec.Command("apt-get", "update", "-qq").CombinedOutput(); err != nil {
			t.Logf("apt-get update: %v\n%s", err, out)
		}
	})
}

// sharedCache is a kernel package cache kept across test runs, so that
// only the first run on a machine downloads the kernel. It is the one
// testenv's microVM assets use too.
func sharedCache(t *testing.T) string {
	t.Helper()
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	dir := filepath.Join(base, "hutch-test", "microvm", "cache")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	return dir
}

// debugfs runs a debugfs request against an ext4 image.
func debugfs(t *testing.T, image, request string) string {
	t.Helper()
	out, err := exec.Command("debugfs", "-R", request, image).CombinedOutput()
	if err != nil {
		t.Fatalf("debugfs -R %q: %v\n%s", request, err, out)
	}
	return string(out)
}

// exportContainers lists the export containers of builds into dir.
func exportContainers(t *testing.T, cli *client.Client, dir string) []string {
	t.Helper()
	list, err := cli.ContainerList(context.Background(), client.ContainerListOptions{
		All: true, Filters: make(client.Filters).Add("label", build.LabelBuild+"="+dir),
	})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, c := range list.Items {
		ids = append(ids, c.ID)
	}
	return ids
}

func TestBuild_FromBusybox(t *testing.T) {
	requireRoot(t)
	build.RequireTool(t, "debugfs")
	eng, cli := connect(t)
	ref := testenv.BusyboxImage(t, cli)
	ensureAptLists(t)
	cache := sharedCache(t)
	parent := t.TempDir()
	dir := filepath.Join(parent, "default")
	const free = 64 << 20
	ctx := context.Background()

	var out bytes.Buffer
	start := time.Now()
	m, err := build.Build(ctx, build.Options{Engine: eng, From: ref, Dir: dir, CacheDir: cache, Free: free, Progress: &stamped{w: &out, start: start}})
	t.Logf("first build took %s:\n%s", time.Since(start).Round(time.Millisecond), out.String())
	if err != nil {
		t.Fatalf("Build: %v", err)
	}

	// The manifest is on disk, and every asset matches it.
	described, err := assets.Describe(dir)
	if err != nil {
		t.Fatalf("assets.Describe: %v", err)
	}
	if diff := cmp.Diff(m, described); diff != "" {
		t.Errorf("Describe differs from Build's manifest (-build +disk):\n%s", diff)
	}
	var names []string
	for _, a := range m.Assets {
		names = append(names, a.Name+"="+a.Path)
	}
	if diff := cmp.Diff([]string{"initrd=initrd.img", "kernel=vmlinuz", "rootfs=rootfs.ext4"}, names); diff != "" {
		t.Errorf("assets (-want +got):\n%s", diff)
	}
	source := regexp.MustCompile(`^` + regexp.QuoteMeta(ref) + ` \(sha256:[0-9a-f]{64}\); kernel linux-image-\S+ \S+$`)
	if !source.MatchString(m.Source) {
		t.Errorf("Source = %q, want %s", m.Source, source)
	}

	checkKernel(t, filepath.Join(dir, build.KernelFile))
	checkInitrd(t, filepath.Join(dir, build.InitrdFile))

	// The root filesystem: ext4, labelled, with the image's files, the
	// mount points and the free space asked for.
	rootfs := filepath.Join(dir, build.RootfsFile)
	sb := build.ReadSuperblock(t, rootfs)
	if sb.Magic != 0xEF53 || sb.Label != build.RootfsLabel {
		t.Errorf("superblock magic %#x label %q, want 0xef53 %q", sb.Magic, sb.Label, build.RootfsLabel)
	}
	if got := sb.FreeBlocks * sb.BlockSize; got < free {
		t.Errorf("free space %s, want at least %s", build.FormatSize(got), build.FormatSize(free))
	}
	fi, err := os.Stat(rootfs)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size()%(1<<20) != 0 || fi.Size() != sb.Blocks*sb.BlockSize {
		t.Errorf("rootfs is %d bytes, superblock says %d blocks of %d; want whole MiB", fi.Size(), sb.Blocks, sb.BlockSize)
	}
	if s := debugfs(t, rootfs, "stat /bin/busybox"); !strings.Contains(s, "Type: regular") || !strings.Contains(s, "Mode:  0755") {
		t.Errorf("debugfs stat /bin/busybox:\n%s", s)
	}
	for p, mode := range map[string]string{"/tmp": "01777", "/root": "0700", "/proc": "0755", "/sys": "0755", "/dev": "0755", "/run": "0755", "/workspace": "0755"} {
		if s := debugfs(t, rootfs, "stat "+p); !strings.Contains(s, "Type: directory") || !strings.Contains(s, "Mode:  "+mode+" ") {
			t.Errorf("debugfs stat %s: want a directory with mode %s:\n%s", p, mode, s)
		}
	}
	if s := debugfs(t, rootfs, "stat /.dockerenv"); !strings.Contains(s, "not found") {
		t.Errorf("/.dockerenv is in the root filesystem:\n%s", s)
	}
	if ids := exportContainers(t, cli, dir); len(ids) != 0 {
		t.Errorf("export containers left behind: %v", ids)
	}

	// A second build replaces the first as a whole, without downloading
	// the kernel again.
	marker := filepath.Join(dir, "from-the-first-build")
	if err := os.WriteFile(marker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// Leftovers of a killed build are swept.
	for _, stale := range []string{"default.building-stale", "default.old-stale"} {
		if err := os.MkdirAll(filepath.Join(parent, stale, "x"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	out.Reset()
	start = time.Now()
	m2, err := build.Build(ctx, build.Options{Engine: eng, From: ref, Dir: dir, CacheDir: cache, Free: free, Progress: &stamped{w: &out, start: start}})
	t.Logf("second build took %s:\n%s", time.Since(start).Round(time.Millisecond), out.String())
	if err != nil {
		t.Fatalf("second Build: %v", err)
	}
	if !strings.Contains(out.String(), "Kernel: using cached ") || strings.Contains(out.String(), "downloading") {
		t.Errorf("second build did not use the cached kernel package:\n%s", out.String())
	}
	if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a file of the first build survived the second: %v", err)
	}
	if diff := cmp.Diff([]string{"default", "default.lock"}, build.ListDir(t, parent)); diff != "" {
		t.Errorf("next to the asset dir (-want +got):\n%s", diff)
	}
	if _, err := assets.Describe(dir); err != nil {
		t.Errorf("after the second build: %v", err)
	}
	if m2.Source != m.Source {
		t.Errorf("second Source %q, first %q", m2.Source, m.Source)
	}
	i1, _ := m.Asset("initrd")
	i2, _ := m2.Asset("initrd")
	if i1.SHA256 != i2.SHA256 {
		t.Errorf("the initrd changed between two builds of the same kernel: %s, %s", i1.SHA256, i2.SHA256)
	}

	// An interrupted build removes what it made, including the export
	// container, and leaves the previous build as it was.
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	out.Reset()
	_, err = build.Build(cctx, build.Options{Engine: eng, From: ref, Dir: dir, CacheDir: cache, Free: free,
		Progress: &cancelOn{w: &out, prefix: "Root filesystem: exported ", cancel: cancel}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted Build = %v, want context.Canceled\n%s", err, out.String())
	}
	if diff := cmp.Diff([]string{"default", "default.lock"}, build.ListDir(t, parent)); diff != "" {
		t.Errorf("after the interrupted build (-want +got):\n%s", diff)
	}
	if got, err := assets.Describe(dir); err != nil || got.Created != m2.Created {
		t.Errorf("after the interrupted build: Describe = %v created %v, want the second build's (%v)", err, got.Created, m2.Created)
	}
	if ids := exportContainers(t, cli, dir); len(ids) != 0 {
		t.Errorf("export containers left behind by the interrupted build: %v", ids)
	}
}

// stamped prefixes each progress line with the time since start, so the
// test log shows where a build spends its time.
type stamped struct {
	w     io.Writer
	start time.Time
}

func (s *stamped) Write(p []byte) (int, error) {
	_, _ = fmt.Fprintf(s.w, "%6.2fs ", time.Since(s.start).Seconds())
	return s.w.Write(p)
}

// cancelOn passes progress lines on and cancels the build at the first
// line starting with prefix, as a ctrl-C at that step would.
type cancelOn struct {
	w      io.Writer
	prefix string
	cancel context.CancelFunc
}

func (c *cancelOn) Write(p []byte) (int, error) {
	if bytes.HasPrefix(p, []byte(c.prefix)) {
		c.cancel()
	}
	return c.w.Write(p)
}

// checkKernel checks that the kernel asset is a bzImage ("HdrS" at 0x202).
func checkKernel(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	magic := make([]byte, 4)
	if _, err := f.ReadAt(magic, 0x202); err != nil || string(magic) != "HdrS" {
		t.Errorf("%s is not a bzImage (magic %q, %v)", path, magic, err)
	}
}

// checkInitrd reads the initrd back: no /init, every module after the
// modules its real .modinfo says it depends on, the guest's modules there.
func checkInitrd(t *testing.T, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	entries := build.ReadInitrd(t, data)
	byName := make(map[string]build.InitrdEntry)
	for _, e := range entries {
		byName[e.Name] = e
		if e.Name == "init" {
			t.Error("the initrd has an /init; hutch appends its own")
		}
	}
	list, ok := byName[build.ModuleList]
	if !ok {
		t.Fatalf("the initrd has no %s", build.ModuleList)
	}
	lines := strings.Split(strings.TrimSuffix(list.Body, "\n"), "\n")
	pos := make(map[string]int) // module name -> line
	for i, l := range lines {
		e, ok := byName[strings.TrimPrefix(l, "/")]
		if !ok {
			t.Errorf("%s lists %s, which the initrd lacks", build.ModuleList, l)
			continue
		}
		f, err := elf.NewFile(bytes.NewReader([]byte(e.Body)))
		if err != nil {
			t.Errorf("%s is not ELF: %v", l, err)
			continue
		}
		section, err := f.Section(".modinfo").Data()
		if err != nil {
			t.Fatal(err)
		}
		name, depends := build.ModinfoDepends(section)
		for _, d := range depends {
			if _, ok := pos[d]; !ok {
				t.Errorf("%s (line %d) depends on %s, which is not listed before it", name, i+1, d)
			}
		}
		pos[name] = i
	}
	for _, m := range build.GuestModules {
		if _, ok := pos[m]; !ok {
			t.Errorf("module %s is not in the initrd: %v", m, lines)
		}
	}
	if pos["virtio_mmio"] > pos["virtio_blk"] {
		t.Errorf("virtio_mmio after virtio_blk: %v", lines)
	}
}

// TestExportTree_KeepsMetadata exports an image made of every kind of file
// metadata that matters and checks that the ext4 image keeps it: owners,
// setuid and setgid bits, file capabilities, hardlinks, symlinks, device
// nodes and FIFOs.
func TestExportTree_KeepsMetadata(t *testing.T) {
	requireRoot(t)
	build.RequireTool(t, "debugfs")
	eng, cli := connect(t)
	ctx := context.Background()
	ref := testenv.Name(t) + ":1"
	importTar(t, cli, ref, metadataTar(t))
	t.Cleanup(func() {
		_, _ = cli.ImageRemove(context.Background(), ref, client.ImageRemoveOptions{Force: true, PruneChildren: true})
	})
	img, err := cli.ImageInspect(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}

	work := t.TempDir()
	tree := filepath.Join(work, "tree")
	if err := os.Mkdir(tree, 0o755); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(work, "default")
	image := filepath.Join(work, build.RootfsFile)
	if out, err := build.ExportToExt4(ctx, eng, ref, img.ID, dir, tree, image, 8<<20); err != nil {
		t.Fatalf("export and make ext4: %v\n%s", err, out)
	}
	if ids := exportContainers(t, cli, dir); len(ids) != 0 {
		t.Errorf("export container left behind: %v", ids)
	}

	stat := func(p string) string { return debugfs(t, image, "stat "+p) }
	want := map[string][]string{
		"/etc/shadow":  {"Type: regular", "Mode:  0640", "User:     0   Group:    42"},
		"/home/u":      {"Type: directory", "Mode:  0750", "User:  1000   Group:  1000"},
		"/home/u/file": {"Type: regular", "Mode:  0600", "User:  1000   Group:  1000"},
		"/bin/su":      {"Type: regular", "Mode:  04755", "Links: 2"},
		"/bin/sg":      {"Type: regular", "Mode:  02755"},
		"/bin/sym":     {"Type: symlink", `Fast link dest: "su"`},
		"/dev/null":    {"Type: character special", "Mode:  0666", "Device major/minor number: 01:03"},
		"/dev/sda":     {"Type: block special", "Mode:  0660", "Group:     6", "Device major/minor number: 08:00"},
		"/run/fifo":    {"Type: FIFO", "Mode:  0644"},
	}
	for p, parts := range want {
		s := stat(p)
		for _, part := range parts {
			if !strings.Contains(s, part) {
				t.Errorf("debugfs stat %s: want %q in\n%s", p, part, s)
			}
		}
	}
	inode := regexp.MustCompile(`Inode: (\d+)`)
	if a, b := inode.FindString(stat("/bin/su")), inode.FindString(stat("/bin/hard")); a == "" || a != b {
		t.Errorf("/bin/hard (%s) is not a hardlink of /bin/su (%s)", b, a)
	}
	if s := debugfs(t, image, "ea_list /bin/ping"); !strings.Contains(s, "security.capability") {
		t.Errorf("/bin/ping lost its file capability:\n%s", s)
	}
}

// metadataTar is an image filesystem with one of each kind of metadata.
func metadataTar(t *testing.T) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	now := time.Now()
	add := func(h *tar.Header, body string) {
		h.ModTime = now
		h.Size = int64(len(body))
		if h.Typeflag == tar.TypeSymlink || h.Typeflag == tar.TypeLink || h.Typeflag == tar.TypeChar ||
			h.Typeflag == tar.TypeBlock || h.Typeflag == tar.TypeFifo || h.Typeflag == tar.TypeDir {
			h.Size = 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Size > 0 {
			if _, err := io.WriteString(tw, body); err != nil {
				t.Fatal(err)
			}
		}
	}
	dir := func(name string, mode int64, uid, gid int) {
		add(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: mode, Uid: uid, Gid: gid}, "")
	}
	dir("bin", 0o755, 0, 0)
	dir("etc", 0o755, 0, 0)
	dir("dev", 0o755, 0, 0)
	dir("run", 0o755, 0, 0)
	dir("home", 0o755, 0, 0)
	dir("home/u", 0o750, 1000, 1000)
	add(&tar.Header{Typeflag: tar.TypeReg, Name: "etc/shadow", Mode: 0o640, Gid: 42}, "root:*:1::::::\n")
	add(&tar.Header{Typeflag: tar.TypeReg, Name: "home/u/file", Mode: 0o600, Uid: 1000, Gid: 1000}, "mine\n")
	add(&tar.Header{Typeflag: tar.TypeReg, Name: "bin/su", Mode: 0o4755}, "#!/bin/sh\n")
	add(&tar.Header{Typeflag: tar.TypeLink, Name: "bin/hard", Linkname: "bin/su", Mode: 0o4755}, "")
	add(&tar.Header{Typeflag: tar.TypeReg, Name: "bin/sg", Mode: 0o2755}, "#!/bin/sh\n")
	add(&tar.Header{Typeflag: tar.TypeSymlink, Name: "bin/sym", Linkname: "su", Mode: 0o777}, "")
	// cap_net_raw+ep, as Debian's iputils-ping sets it.
	capNetRaw := string([]byte{0x01, 0, 0, 0x02, 0, 0x20, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	add(&tar.Header{Typeflag: tar.TypeReg, Name: "bin/ping", Mode: 0o755, Format: tar.FormatPAX,
		PAXRecords: map[string]string{"SCHILY.xattr.security.capability": capNetRaw}}, "#!/bin/sh\n")
	add(&tar.Header{Typeflag: tar.TypeChar, Name: "dev/null", Mode: 0o666, Devmajor: 1, Devminor: 3}, "")
	add(&tar.Header{Typeflag: tar.TypeBlock, Name: "dev/sda", Mode: 0o660, Gid: 6, Devmajor: 8, Devminor: 0}, "")
	add(&tar.Header{Typeflag: tar.TypeFifo, Name: "run/fifo", Mode: 0o644}, "")
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// importTar imports a filesystem archive as ref.
func importTar(t *testing.T, cli *client.Client, ref string, archive []byte) {
	t.Helper()
	rc, err := cli.ImageImport(context.Background(), client.ImageImportSource{Source: bytes.NewReader(archive), SourceName: "-"}, ref, client.ImageImportOptions{})
	if err != nil {
		t.Fatalf("importing %s: %v", ref, err)
	}
	defer func() { _ = rc.Close() }()
	dec := json.NewDecoder(rc)
	for {
		var msg struct {
			Error string `json:"error"`
		}
		if err := dec.Decode(&msg); errors.Is(err, io.EOF) {
			return
		} else if err != nil {
			t.Fatalf("importing %s: %v", ref, err)
		}
		if msg.Error != "" {
			t.Fatalf("importing %s: %s", ref, msg.Error)
		}
	}
}
