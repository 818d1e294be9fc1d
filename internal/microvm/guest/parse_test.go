package guest

import (
	"io/fs"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/mountinfo"
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

// mountsSample is a guest's mount table: a share under a later tmpfs, a
// share whose target and tag hold spaces, a file bind.
var mountsSample = []mountinfo.Entry{
	{Target: "/", FSType: "ext4", Source: "/dev/vda"},
	{Target: "/workspace/v1-slack-x", FSType: "virtiofs", Source: "office"},
	{Target: "/workspace/shared docs", FSType: "virtiofs", Source: "shared tag"},
	{Target: "/run/hutch/vault/token", FSType: "ext4", Source: "/dev/vda"},
	{Target: "/workspace/v1-slack-x", FSType: "tmpfs", Source: "tmpfs"},
}

func TestTagMounted(t *testing.T) {
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
		if got := tagMounted(mountsSample, tt.tag, tt.target); got != tt.want {
			t.Errorf("tagMounted(%q, %q) = %v, want %v", tt.tag, tt.target, got, tt.want)
		}
	}
	if got := len(mountsAt(mountsSample, "/workspace/v1-slack-x")); got != 2 {
		t.Errorf("mountsAt found %d mounts, want 2", got)
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
