package build

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestImageLayout(t *testing.T) {
	// Pinned: the busybox test image with 64 MiB free, as built for real.
	size, inodes := imageLayout(treeStats{Bytes: 2 << 20, Inodes: 300}, 64<<20)
	if size != 77<<20 || inodes != 300+4096+1024 {
		t.Errorf("imageLayout(busybox, 64M) = %d bytes, %d inodes; want 77 MiB, 5420", size, inodes)
	}
	tests := []struct {
		name    string
		content treeStats
		free    int64
	}{
		{"empty", treeStats{}, 0},
		{"tiny", treeStats{Bytes: 4096, Inodes: 1}, 1 << 20},
		{"busybox_1G", treeStats{Bytes: 2 << 20, Inodes: 300}, 1 << 30},
		{"sandbox_1G", treeStats{Bytes: 876 << 20, Inodes: 48774}, 1 << 30},
		{"many_small_files", treeStats{Bytes: 2 << 30, Inodes: 500_000}, 512 << 20},
		{"big", treeStats{Bytes: 20 << 30, Inodes: 900_000}, 100 << 30},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			size, inodes := imageLayout(tt.content, tt.free)
			if size%(1<<20) != 0 {
				t.Errorf("size %d is not whole MiB", size)
			}
			if min := tt.content.Bytes + tt.free + inodes*inodeSize + journalBytes(tt.content.Bytes+tt.free); size < min {
				t.Errorf("size %d < content %d + free %d + inode table + journal = %d", size, tt.content.Bytes, tt.free, min)
			}
			if inodes < tt.content.Inodes+tt.free/inodeRatio {
				t.Errorf("inodes %d < content %d + one per 16 KiB free", inodes, tt.content.Inodes)
			}
			// Besides the inode table, the overhead stays modest: under 4%
			// plus 30 MiB.
			if over := size - tt.content.Bytes - tt.free - inodes*inodeSize; over > (tt.content.Bytes+tt.free)/25+30<<20 {
				t.Errorf("overhead %s on %s is too much", formatSize(over), formatSize(tt.content.Bytes+tt.free))
			}
		})
	}
}

func TestJournalBytes(t *testing.T) {
	for _, tt := range []struct{ size, want int64 }{
		{4 << 20, 0},
		{64 << 20, 4 << 20},
		{512 << 20, 16 << 20},
		{1536 << 20, 32 << 20},
		{8 << 30, 64 << 20},
		{1 << 40, 1 << 30},
	} {
		if got := journalBytes(tt.size); got != tt.want {
			t.Errorf("journalBytes(%s) = %s, want %s", formatSize(tt.size), formatSize(got), formatSize(tt.want))
		}
	}
}

func TestMeasureTree(t *testing.T) {
	root := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(root, "a"), []byte("x"), 0o644))
	must(os.Link(filepath.Join(root, "a"), filepath.Join(root, "b")))
	must(os.WriteFile(filepath.Join(root, "c"), bytes.Repeat([]byte("y"), 5000), 0o644))
	must(os.Symlink("a", filepath.Join(root, "s")))
	must(os.Symlink(strings.Repeat("z", 100), filepath.Join(root, "l")))
	must(os.Mkdir(filepath.Join(root, "d"), 0o755))

	got, err := measureTree(root)
	if err != nil {
		t.Fatal(err)
	}
	// a (4 KiB; b is the same file), c (8 KiB), l (4 KiB: too long for the
	// inode), s (0), the root directory and d (4 KiB each).
	want := treeStats{Bytes: 24 << 10, Inodes: 6}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("measureTree (-want +got):\n%s", diff)
	}
}

func TestDirBytes(t *testing.T) {
	for _, tt := range []struct{ entries, want int64 }{
		{0, 4096}, {4060, 4096}, {4061, 8192}, {10000, 12288},
	} {
		if got := dirBytes(tt.entries); got != tt.want {
			t.Errorf("dirBytes(%d) = %d, want %d", tt.entries, got, tt.want)
		}
	}
}

func TestAddMountPoints(t *testing.T) {
	root := t.TempDir()
	if err := os.Mkdir(filepath.Join(root, "proc"), 0o555); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("var/run", filepath.Join(root, "run")); err != nil {
		t.Fatal(err)
	}
	added, err := addMountPoints(root)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"/sys", "/dev", "/tmp", "/workspace"}, added); diff != "" {
		t.Errorf("added (-want +got):\n%s", diff)
	}
	for name, want := range map[string]fs.FileMode{
		"proc": fs.ModeDir | 0o555, "sys": fs.ModeDir | 0o755, "dev": fs.ModeDir | 0o755,
		"tmp": fs.ModeDir | fs.ModeSticky | 0o777, "workspace": fs.ModeDir | 0o755, "run": fs.ModeSymlink | 0o777,
	} {
		fi, err := os.Lstat(filepath.Join(root, name))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != want {
			t.Errorf("/%s mode = %v, want %v", name, fi.Mode(), want)
		}
	}
	if again, err := addMountPoints(root); err != nil || len(again) != 0 {
		t.Errorf("second addMountPoints = %v, %v; want nothing added", again, err)
	}
}

func TestProgressReader(t *testing.T) {
	var clock time.Time
	var reports []int64
	p := &progressReader{
		r:      &chunkReader{chunks: 10, size: 100},
		every:  2 * time.Second,
		now:    func() time.Time { clock = clock.Add(time.Second); return clock },
		report: func(n int64) { reports = append(reports, n) },
	}
	n, err := io.Copy(io.Discard, p)
	if err != nil || n != 1000 || p.Total() != 1000 || p.Err() != nil {
		t.Fatalf("copy = %d, %v; total %d, err %v", n, err, p.Total(), p.Err())
	}
	// Eleven reads one second apart (the last one hits EOF): a report every
	// two seconds after the first read, none before.
	if diff := cmp.Diff([]int64{300, 500, 700, 900, 1000}, reports); diff != "" {
		t.Errorf("reports (-want +got):\n%s", diff)
	}
}

// chunkReader returns chunks reads of size bytes, then io.EOF.
type chunkReader struct{ chunks, size int }

func (c *chunkReader) Read(p []byte) (int, error) {
	if c.chunks == 0 {
		return 0, io.EOF
	}
	c.chunks--
	return copy(p, make([]byte, c.size)), nil
}

// superblock is what the tests read from an ext4 image's superblock.
type superblock struct {
	Magic       uint16
	Label       string
	BlockSize   int64
	Blocks      int64
	FreeBlocks  int64
	Inodes      int64
	FreeInodes  int64
	ReservedBlk int64
}

func readSuperblock(t *testing.T, path string) superblock {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	sb := make([]byte, 1024)
	if _, err := f.ReadAt(sb, 1024); err != nil {
		t.Fatal(err)
	}
	le := binary.LittleEndian
	return superblock{
		Magic:       le.Uint16(sb[56:]),
		Label:       string(bytes.TrimRight(sb[120:136], "\x00")),
		BlockSize:   1024 << le.Uint32(sb[24:]),
		Inodes:      int64(le.Uint32(sb[0:])),
		Blocks:      int64(le.Uint32(sb[4:])) | int64(le.Uint32(sb[0x150:]))<<32,
		ReservedBlk: int64(le.Uint32(sb[8:])) | int64(le.Uint32(sb[0x154:]))<<32,
		FreeBlocks:  int64(le.Uint32(sb[12:])) | int64(le.Uint32(sb[0x158:]))<<32,
		FreeInodes:  int64(le.Uint32(sb[16:])),
	}
}

// requireTool skips a test whose tool is missing, except in CI, where it
// fails: there the tools are part of the build's contract.
func requireTool(t *testing.T, name string) {
	t.Helper()
	if _, err := lookTool(name); err != nil {
		if inCI() {
			t.Fatalf("%s is not installed (CI is set, so this test must run): %v", name, err)
		}
		t.Skipf("%s is not installed: %v", name, err)
	}
}

// inCI reports whether the CI variable is set to anything but a false boolean.
func inCI() bool {
	v := strings.TrimSpace(os.Getenv("CI"))
	if v == "" {
		return false
	}
	if b, err := strconv.ParseBool(v); err == nil {
		return b
	}
	return true
}

func testBuilder() (*builder, *bytes.Buffer) {
	var out bytes.Buffer
	return &builder{out: &out, log: slog.New(slog.DiscardHandler)}, &out
}

// TestMakeExt4_Fits runs the real mke2fs on trees that stress imageLayout's
// arithmetic (many tiny files, a few big ones, long names) with little free
// space, and checks that the image holds them with at least the free space
// and the inodes asked for.
func TestMakeExt4_Fits(t *testing.T) {
	requireTool(t, "mke2fs")
	random := func(n int) []byte {
		b := make([]byte, n)
		_, _ = rand.Read(b)
		return b
	}
	trees := map[string]func(t *testing.T, root string){
		// 4800 files: mke2fs's default of one inode per 16 KiB would give
		// this image about 1300 inodes.
		"many_tiny_files": func(t *testing.T, root string) {
			for d := 0; d < 8; d++ {
				dir := filepath.Join(root, fmt.Sprintf("dir%02d", d))
				if err := os.Mkdir(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				for i := 0; i < 600; i++ {
					if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%04d", i)), []byte("x"), 0o644); err != nil {
						t.Fatal(err)
					}
				}
			}
		},
		"big_files": func(t *testing.T, root string) {
			for i := 0; i < 3; i++ {
				if err := os.WriteFile(filepath.Join(root, fmt.Sprintf("big%d", i)), random(8<<20+123), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		},
		"long_names": func(t *testing.T, root string) {
			for i := 0; i < 1000; i++ {
				name := fmt.Sprintf("%04d-%s", i, strings.Repeat("n", 240))
				if err := os.WriteFile(filepath.Join(root, name), random(100), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		},
	}
	for name, fill := range trees {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			tree := filepath.Join(dir, "tree")
			if err := os.Mkdir(tree, 0o755); err != nil {
				t.Fatal(err)
			}
			fill(t, tree)
			const free = 1 << 20
			b, _ := testBuilder()
			out := filepath.Join(dir, "rootfs.ext4")
			size, err := b.makeExt4(context.Background(), tree, out, free)
			if err != nil {
				t.Fatalf("makeExt4: %v", err)
			}
			fi, err := os.Stat(out)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Size() != size {
				t.Errorf("image is %d bytes, makeExt4 says %d", fi.Size(), size)
			}
			sb := readSuperblock(t, out)
			if sb.Magic != 0xEF53 || sb.Label != RootfsLabel || sb.BlockSize != 4096 {
				t.Errorf("superblock = %+v, want ext4 magic, label %s, 4 KiB blocks", sb, RootfsLabel)
			}
			if got := sb.FreeBlocks * sb.BlockSize; got < free {
				t.Errorf("free space %s < %s asked for", formatSize(got), formatSize(free))
			}
		})
	}
}
