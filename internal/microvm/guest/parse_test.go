package guest

import (
	"io/fs"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/hutchsandbox/hutch/internal/errdefs"
)

func TestFindPort(t *testing.T) {
	sysfs := fstest.MapFS{
		"vport0p0/name":  {Data: []byte("\n")},
		"vport0p1/name":  {Data: []byte("org.qemu.guest_agent.0\n")},
		"vport0p2/name":  {Data: []byte("hutch.agent\n")},
		"vport1p1/dev":   {Data: []byte("252:1\n")}, // no name file
		"vport1p2/power": {Mode: fs.ModeDir | 0o555},
	}
	got, err := findPort(sysfs, PortName)
	if err != nil || got != "vport0p2" {
		t.Errorf("findPort got %q, %v; want vport0p2", got, err)
	}
	_, err = findPort(sysfs, "hutch.other")
	if want := "No virtio port is named hutch.other (the VM has no agent channel)"; !errdefs.IsNotFound(err) || err.Error() != want {
		t.Errorf("findPort of a missing name got %v, want not found %q", err, want)
	}
	if _, err := findPort(fstest.MapFS{}, PortName); !errdefs.IsNotFound(err) {
		t.Errorf("findPort with no ports got %v, want not found", err)
	}
}

func TestParseModules(t *testing.T) {
	list := `
# virtio transport first
/lib/modules/6.1.0-57-cloud-amd64/kernel/drivers/virtio/virtio_mmio.ko
  /lib/modules/6.1.0-57-cloud-amd64/kernel/drivers/block/virtio_blk.ko  

/lib/modules/6.1.0-57-cloud-amd64/kernel/fs/fuse/virtiofs.ko
`
	got, err := parseModules(strings.NewReader(list))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"/lib/modules/6.1.0-57-cloud-amd64/kernel/drivers/virtio/virtio_mmio.ko",
		"/lib/modules/6.1.0-57-cloud-amd64/kernel/drivers/block/virtio_blk.ko",
		"/lib/modules/6.1.0-57-cloud-amd64/kernel/fs/fuse/virtiofs.ko",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("modules mismatch (-want +got):\n%s", diff)
	}
	for _, tt := range []struct{ name, list, want string }{
		{"relative", "/a.ko\nlib/b.ko\n", `Module list line 2 is not an absolute clean path: "lib/b.ko"`},
		{"unclean", "/lib/../b.ko\n", `Module list line 1 is not an absolute clean path: "/lib/../b.ko"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseModules(strings.NewReader(tt.list))
			if !errdefs.IsInvalid(err) || err.Error() != tt.want {
				t.Errorf("parseModules got %v, want invalid %q", err, tt.want)
			}
		})
	}
	if got, err := parseModules(strings.NewReader("")); err != nil || len(got) != 0 {
		t.Errorf("empty list got %q, %v", got, err)
	}
}

const sampleMountinfo = `22 1 254:0 / / rw,relatime - ext4 /dev/vda rw
23 22 0:5 / /dev rw,nosuid - devtmpfs devtmpfs rw,size=120000k,nr_inodes=30000,mode=755
24 22 0:21 / /proc rw,nosuid,nodev,noexec,relatime shared:5 - proc proc rw
30 22 0:40 / /workspace/v1-slack-x rw,nosuid,nodev,relatime - virtiofs office rw
31 22 0:41 / /workspace/shared\040docs ro,nosuid,nodev,relatime shared:9 master:2 - virtiofs shared\040tag ro
32 22 254:0 /run/hutch/vault/token /run/hutch/vault/token ro,nosuid,nodev,relatime - ext4 /dev/vda rw
33 22 0:42 / /workspace/v1-slack-x rw,nosuid,nodev,relatime - tmpfs tmpfs rw
`

func TestParseMountinfo(t *testing.T) {
	got, err := parseMountinfo(strings.NewReader(sampleMountinfo))
	if err != nil {
		t.Fatal(err)
	}
	want := []mountEntry{
		{Target: "/", FSType: "ext4", Source: "/dev/vda"},
		{Target: "/dev", FSType: "devtmpfs", Source: "devtmpfs"},
		{Target: "/proc", FSType: "proc", Source: "proc"},
		{Target: "/workspace/v1-slack-x", FSType: "virtiofs", Source: "office"},
		{Target: "/workspace/shared docs", FSType: "virtiofs", Source: "shared tag"},
		{Target: "/run/hutch/vault/token", FSType: "ext4", Source: "/dev/vda"},
		{Target: "/workspace/v1-slack-x", FSType: "tmpfs", Source: "tmpfs"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("entries mismatch (-want +got):\n%s", diff)
	}
	for _, tt := range []struct {
		tag, target string
		want        bool
	}{
		{"office", "/workspace/v1-slack-x", true}, // under a later mount, still there
		{"shared tag", "/workspace/shared docs", true},
		{"office", "/workspace/shared docs", false},
		{"/dev/vda", "/", false}, // not virtiofs
		{"office", "/workspace", false},
	} {
		if got := tagMounted(want, tt.tag, tt.target); got != tt.want {
			t.Errorf("tagMounted(%q, %q) = %v, want %v", tt.tag, tt.target, got, tt.want)
		}
	}
	if got := len(mountsAt(want, "/workspace/v1-slack-x")); got != 2 {
		t.Errorf("mountsAt found %d mounts, want 2", got)
	}
	if _, err := parseMountinfo(strings.NewReader("22 1 254:0 / / rw\n")); !errdefs.IsInvalid(err) {
		t.Errorf("a line without the separator got %v, want invalid", err)
	}
}

func TestUnescapeOctal(t *testing.T) {
	for in, want := range map[string]string{
		`/plain`:         "/plain",
		`/a\040b`:        "/a b",
		`/tab\011nl\012`: "/tab\tnl\n",
		`/back\134slash`: `/back\slash`,
		`/short\04`:      `/short\04`,
		`/not\999`:       `/not\999`,
	} {
		if got := unescapeOctal(in); got != want {
			t.Errorf("unescapeOctal(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestCapabilitiesToDrop(t *testing.T) {
	kept := map[int]bool{
		unix.CAP_CHOWN: true, unix.CAP_DAC_OVERRIDE: true, unix.CAP_FOWNER: true, unix.CAP_FSETID: true,
		unix.CAP_SETUID: true, unix.CAP_SETGID: true, unix.CAP_KILL: true, unix.CAP_NET_BIND_SERVICE: true,
	}
	for _, last := range []int{unix.CAP_AUDIT_READ, unix.CAP_CHECKPOINT_RESTORE, 63} {
		drop := capabilitiesToDrop(last)
		if got, want := len(drop), last+1-len(kept); got != want {
			t.Errorf("cap_last_cap %d: %d dropped, want %d", last, got, want)
		}
		seen := map[int]bool{}
		for _, c := range drop {
			if kept[c] || c < 0 || c > last || seen[c] {
				t.Errorf("cap_last_cap %d: drops %d", last, c)
			}
			seen[c] = true
		}
		for _, c := range []int{unix.CAP_SYS_ADMIN, unix.CAP_SYS_MODULE, unix.CAP_NET_RAW, unix.CAP_SETPCAP, unix.CAP_SYS_PTRACE, unix.CAP_MKNOD, unix.CAP_SYS_CHROOT} {
			if !seen[c] {
				t.Errorf("cap_last_cap %d: capability %d is kept", last, c)
			}
		}
	}
	var mask uint64
	for c := range kept {
		mask |= 1 << c
	}
	if got := keptMask(); got != mask {
		t.Errorf("keptMask() = %#x, want %#x", got, mask)
	}
}

func TestParseCapLastCap(t *testing.T) {
	if got, err := parseCapLastCap([]byte("40\n")); err != nil || got != 40 {
		t.Errorf("parseCapLastCap(40) = %d, %v", got, err)
	}
	for _, bad := range []string{"", "x", "-1", "5", "64"} {
		if _, err := parseCapLastCap([]byte(bad)); !errdefs.IsInvalid(err) {
			t.Errorf("parseCapLastCap(%q) got %v, want invalid", bad, err)
		}
	}
}
