package latemount_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
	"golang.org/x/sys/unix"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/latemount"
	"github.com/hutchsandbox/hutch/internal/sandbox/managed"
	"github.com/hutchsandbox/hutch/internal/testenv"
)

// fixture is a running container that got a Point at /workspace, as a
// warm runtime would, with hutch's capabilities, and a host directory
// standing for an office.
type fixture struct {
	cli    *client.Client
	id     string
	point  latemount.Point
	office string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting needs root")
	}
	cli := testenv.Docker(t)
	img := testenv.BusyboxImage(t, cli)
	base, err := os.MkdirTemp("", "lm-")
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{cli: cli, point: latemount.Point{Dir: filepath.Join(base, "point")}, office: filepath.Join(base, "office")}
	t.Cleanup(func() {
		if err := f.point.Detach(); err != nil {
			t.Errorf("Detach at cleanup: %v", err)
		}
		_ = os.RemoveAll(base)
	})
	if err := os.Mkdir(f.office, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.office, "note"), []byte("from the host\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := f.point.Prepare(); err != nil {
		t.Fatal(err)
	}
	if err := f.point.Prepare(); err != nil {
		t.Fatalf("a second Prepare: %v", err)
	}
	ctx := context.Background()
	created, err := cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Name:   testenv.Name(t),
		Config: &container.Config{Image: img, Cmd: []string{"sleep", "3600"}, Labels: map[string]string{"hutch.test": "latemount"}},
		HostConfig: &container.HostConfig{
			NetworkMode: network.NetworkNone,
			CapDrop:     []string{"ALL"},
			CapAdd:      managed.KeptCapabilities,
			SecurityOpt: []string{"no-new-privileges"},
			Mounts: []mount.Mount{{Type: mount.TypeBind, Source: f.point.Dir, Target: "/workspace",
				BindOptions: &mount.BindOptions{Propagation: mount.PropagationRSlave}}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	f.id = created.ID
	t.Cleanup(func() {
		_, _ = cli.ContainerRemove(context.Background(), created.ID, client.ContainerRemoveOptions{Force: true})
	})
	if _, err := cli.ContainerStart(ctx, created.ID, client.ContainerStartOptions{}); err != nil {
		t.Fatal(err)
	}
	return f
}

// sh runs script in the container and returns its output and exit code.
func (f *fixture) sh(t *testing.T, script string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cr, err := f.cli.ExecCreate(ctx, f.id, client.ExecCreateOptions{AttachStdout: true, AttachStderr: true, Cmd: []string{"sh", "-c", script}})
	if err != nil {
		t.Fatal(err)
	}
	at, err := f.cli.ExecAttach(ctx, cr.ID, client.ExecAttachOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	_, err = stdcopy.StdCopy(&out, &out, at.Reader)
	at.Close()
	if err != nil {
		t.Fatal(err)
	}
	for {
		ins, err := f.cli.ExecInspect(ctx, cr.ID, client.ExecInspectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !ins.Running {
			return out.String(), ins.ExitCode
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func open(t *testing.T, path string) *os.File {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	return f
}

// TestAttach_SeenInsideAfterStart: a directory attached after the
// container started is there inside, writable, and the container cannot
// unmount it; a file attached read-only cannot be written from inside
// (the mount was read-only before it propagated); Detach takes both away
// and leaves the office's files where they were.
func TestAttach_SeenInsideAfterStart(t *testing.T) {
	f := newFixture(t)
	if err := f.point.Attach(open(t, f.office), "v1-web-x", false); err != nil {
		t.Fatal(err)
	}
	memory := filepath.Join(filepath.Dir(f.office), "MEMORY.md")
	if err := os.WriteFile(memory, []byte("shared\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := f.point.Attach(open(t, memory), "MEMORY.md", true); err != nil {
		t.Fatal(err)
	}
	if out, code := f.sh(t, "cat /workspace/v1-web-x/note && echo made-inside > /workspace/v1-web-x/back"); code != 0 || out != "from the host\n" {
		t.Errorf("the office inside: %q, exit %d", out, code)
	}
	if data, err := os.ReadFile(filepath.Join(f.office, "back")); err != nil || string(data) != "made-inside\n" {
		t.Errorf("a file written inside is %q on the host (%v)", data, err)
	}
	if out, code := f.sh(t, "cat /workspace/MEMORY.md; echo more >> /workspace/MEMORY.md"); code == 0 || !strings.Contains(out, "Read-only file system") {
		t.Errorf("writing the read-only file inside: %q, exit %d; want a read-only refusal", out, code)
	}
	if out, code := f.sh(t, "grep ' /workspace/MEMORY.md ' /proc/self/mountinfo"); code != 0 || !strings.Contains(out, " ro,") || !strings.Contains(out, "nosuid") {
		t.Errorf("the read-only file's mount inside: %q", out)
	}
	if out, code := f.sh(t, "umount /workspace/v1-web-x; umount -l /workspace/MEMORY.md; cat /workspace/v1-web-x/note"); !strings.Contains(out, "from the host") || code != 0 {
		t.Errorf("after the container tried to unmount: %q, exit %d; want the office still there", out, code)
	}

	if err := f.point.Detach(); err != nil {
		t.Fatal(err)
	}
	if out, _ := f.sh(t, "ls /workspace; grep -c ' /workspace/' /proc/self/mountinfo"); strings.Contains(out, "note") || !strings.HasSuffix(out, "0\n") {
		t.Errorf("after Detach the container still sees: %q", out)
	}
	for _, name := range []string{"note", "back"} {
		if _, err := os.Stat(filepath.Join(f.office, name)); err != nil {
			t.Errorf("after Detach the office lost %s: %v", name, err)
		}
	}
	if _, err := os.Lstat(f.point.Dir); !os.IsNotExist(err) {
		t.Errorf("the point's directory is still there: %v", err)
	}
}

// TestAttack_PlantedTargets: what the container planted in the point's
// directory, where a later Attach would look, is refused and followed
// nowhere: a link to a host directory, a link where a file goes, a FIFO
// that would block an open. Detach then removes the links, not what they
// name.
func TestAttack_PlantedTargets(t *testing.T) {
	f := newFixture(t)
	victim := filepath.Join(filepath.Dir(f.office), "victim")
	if err := os.Mkdir(victim, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(victim, "keep"), []byte("k"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The container's paths are the host's seen from inside; a link it
	// makes names a host path when the host follows it.
	script := "ln -s " + victim + " /workspace/dirlink && ln -s /etc/passwd /workspace/filelink && mkfifo /workspace/fifo"
	if out, code := f.sh(t, script); code != 0 {
		t.Fatalf("planting: %q, exit %d", out, code)
	}
	memory := filepath.Join(filepath.Dir(f.office), "MEMORY.md")
	if err := os.WriteFile(memory, []byte("shared\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		src  string
	}{{"dirlink", f.office}, {"filelink", memory}, {"fifo", memory}} {
		done := make(chan error, 1)
		go func() { done <- f.point.Attach(open(t, tc.src), tc.name, false) }()
		select {
		case err := <-done:
			if !errdefs.IsFailedPrecondition(err) {
				t.Errorf("Attach over the planted %s: %v; want a refusal", tc.name, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("Attach over the planted %s hangs", tc.name)
		}
	}
	if err := f.point.Detach(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(victim, "keep")); err != nil {
		t.Errorf("Detach reached through the planted link: %v", err)
	}
	if _, err := os.Stat("/etc/passwd"); err != nil {
		t.Errorf("/etc/passwd: %v", err)
	}
}

// TestAttach_RefusesBadNames: one path component, never a way out.
func TestAttach_RefusesBadNames(t *testing.T) {
	p := latemount.Point{Dir: t.TempDir()}
	for _, name := range []string{"", ".", "..", "a/b", "../x", "/etc"} {
		if err := p.Attach(os.Stdin, name, false); !errdefs.IsInvalid(err) {
			t.Errorf("Attach at %q: %v; want invalid", name, err)
		}
	}
}

// TestDetach_LeavesWhatItDidNotMake: a mount deeper than Attach makes
// one (some other tool's) stops Detach before it unmounts or removes
// anything: removing the point would delete through it.
func TestDetach_LeavesWhatItDidNotMake(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting needs root")
	}
	base, err := os.MkdirTemp("", "lm-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(base) })
	p := latemount.Point{Dir: filepath.Join(base, "point")}
	if err := p.Prepare(); err != nil {
		t.Fatal(err)
	}
	victim, deep := filepath.Join(base, "victim"), filepath.Join(p.Dir, "x", "deep")
	for _, d := range []string{victim, deep} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(victim, "keep"), []byte("k"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount(victim, deep, "", unix.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = unix.Unmount(deep, unix.MNT_DETACH)
		_ = unix.Unmount(p.Dir, unix.MNT_DETACH)
	})
	if err := p.Detach(); !errdefs.IsFailedPrecondition(err) || !strings.Contains(err.Error(), deep) {
		t.Errorf("Detach over a mount it did not make: %v; want a refusal naming %s", err, deep)
	}
	if _, err := os.Stat(filepath.Join(deep, "keep")); err != nil {
		t.Errorf("the foreign mount lost its file: %v", err)
	}
	if _, err := os.Stat(filepath.Join(victim, "keep")); err != nil {
		t.Errorf("the victim lost its file: %v", err)
	}
}

// TestSeal_WorkspaceReadOnlyInside: before Seal the container can write
// beside the late mounts (into the Point's tmpfs, capped: it cannot fill
// a host disk); after Seal it cannot, not even by remounting, while the
// office attached beneath stays writable.
func TestSeal_WorkspaceReadOnlyInside(t *testing.T) {
	f := newFixture(t)
	if out, code := f.sh(t, "dd if=/dev/zero of=/workspace/fill bs=64k count=64 2>&1; code=$?; rm -f /workspace/fill; exit $code"); code == 0 || !strings.Contains(out, "No space left") {
		t.Errorf("filling the point's tmpfs from inside: %q, exit %d; want it full well before 4 MiB", out, code)
	}
	if err := f.point.Attach(open(t, f.office), "v1-web-x", false); err != nil {
		t.Fatal(err)
	}
	if err := f.point.Seal(); err != nil {
		t.Fatal(err)
	}
	if out, code := f.sh(t, "touch /workspace/planted; echo $?; mount -o remount,rw /workspace; touch /workspace/planted2 && echo wrote"); code == 0 && strings.Contains(out, "wrote") || !strings.Contains(out, "Read-only file system") {
		t.Errorf("writing beside the office after Seal: %q, exit %d; want read-only refusals", out, code)
	}
	if out, code := f.sh(t, "echo ok > /workspace/v1-web-x/after-seal && cat /workspace/v1-web-x/after-seal"); code != 0 || out != "ok\n" {
		t.Errorf("the office after Seal: %q, exit %d; want it writable", out, code)
	}
	if err := f.point.Attach(open(t, f.office), "late", false); err == nil {
		t.Error("Attach after Seal succeeded; a sealed point takes no new targets")
	}
}
