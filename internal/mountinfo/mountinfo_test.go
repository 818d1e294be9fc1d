package mountinfo

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/hutchsandbox/hutch/internal/errdefs"
)

const sampleMountinfo = `22 1 254:0 / / rw,relatime - ext4 /dev/vda rw
23 22 0:5 / /dev rw,nosuid - devtmpfs devtmpfs rw,size=120000k,nr_inodes=30000,mode=755
24 22 0:21 / /proc rw,nosuid,nodev,noexec,relatime shared:5 - proc proc rw
30 22 0:40 / /workspace/v1-slack-x rw,nosuid,nodev,relatime - virtiofs office rw
31 22 0:41 / /workspace/shared\040docs ro,nosuid,nodev,relatime shared:9 master:2 - virtiofs shared\040tag ro
32 22 254:0 /run/hutch/vault/token /run/hutch/vault/token ro,nosuid,nodev,relatime - ext4 /dev/vda rw
33 22 0:42 / /workspace/v1-slack-x rw,nosuid,nodev,relatime - tmpfs tmpfs rw
`

func TestParse(t *testing.T) {
	got, err := Parse(strings.NewReader(sampleMountinfo))
	if err != nil {
		t.Fatal(err)
	}
	want := []Entry{
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
	if _, err := Parse(strings.NewReader("22 1 254:0 / / rw\n")); !errdefs.IsInvalid(err) {
		t.Errorf("a line without the separator got %v, want invalid", err)
	}
}

func TestUnescape(t *testing.T) {
	for in, want := range map[string]string{
		`/plain`:         "/plain",
		`/a\040b`:        "/a b",
		`/tab\011nl\012`: "/tab\tnl\n",
		`/back\134slash`: `/back\slash`,
		`/short\04`:      `/short\04`,
		`/not\999`:       `/not\999`,
	} {
		if got := unescape(in); got != want {
			t.Errorf("unescape(%q) = %q, want %q", in, got, want)
		}
	}
}
