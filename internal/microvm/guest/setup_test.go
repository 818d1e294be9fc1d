package guest

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/hutchsandbox/hutch/internal/agent"
	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/mountinfo"
)

// fakeSystem records the mounts Ops makes and answers mountinfo from
// them; no real mount happens.
type fakeSystem struct {
	mu       sync.Mutex
	mounted  []mountinfo.Entry
	calls    []string
	mountErr error // the next virtiofs mount's answer
	rebooted bool
	synced   bool
	// shown is what a bind mount shows at its target: its source's
	// content and mode when it was bound.
	shown map[string]shownFile
}

type shownFile struct {
	data string
	mode fs.FileMode
}

func (f *fakeSystem) mount(source, target, fstype string, flags uintptr, data string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, fmt.Sprintf("mount %s %s %s %s", source, target, fstype, mountFlags(flags)))
	switch {
	case fstype == "virtiofs" && f.mountErr != nil:
		err := f.mountErr
		f.mountErr = nil
		return err
	case flags&unix.MS_REMOUNT != 0:
	case flags&unix.MS_BIND != 0:
		data, err := os.ReadFile(source)
		if err != nil {
			return err
		}
		fi, err := os.Stat(source)
		if err != nil {
			return err
		}
		if f.shown == nil {
			f.shown = map[string]shownFile{}
		}
		f.shown[target] = shownFile{string(data), fi.Mode()}
		f.mounted = append(f.mounted, mountinfo.Entry{Target: target, FSType: "tmpfs", Source: filesSource})
	default:
		f.mounted = append(f.mounted, mountinfo.Entry{Target: target, FSType: fstype, Source: source})
	}
	return nil
}

func (f *fakeSystem) unmount(target string, flags int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, fmt.Sprintf("umount %s %#x", target, flags))
	for i := len(f.mounted) - 1; i >= 0; i-- {
		if f.mounted[i].Target == target {
			f.mounted = append(f.mounted[:i], f.mounted[i+1:]...)
			delete(f.shown, target)
			return nil
		}
	}
	return unix.EINVAL
}

func (f *fakeSystem) mountinfo() ([]mountinfo.Entry, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]mountinfo.Entry(nil), f.mounted...), nil
}

func (f *fakeSystem) setAddress(iface string, prefix netip.Prefix) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "address "+iface+" "+prefix.String())
	return nil
}

func (f *fakeSystem) sync() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.synced = true
	f.calls = append(f.calls, "sync")
}

func (f *fakeSystem) reboot() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rebooted = true
	f.calls = append(f.calls, "reboot")
	return nil
}

func (f *fakeSystem) takeCalls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.calls
	f.calls = nil
	return c
}

// mountFlags names the flags the guest uses, for readable call logs.
func mountFlags(flags uintptr) string {
	var names []string
	for _, n := range []struct {
		bit  uintptr
		name string
	}{{unix.MS_RDONLY, "ro"}, {unix.MS_NOSUID, "nosuid"}, {unix.MS_NODEV, "nodev"}, {unix.MS_BIND, "bind"}, {unix.MS_REMOUNT, "remount"}} {
		if flags&n.bit != 0 {
			names = append(names, n.name)
			flags &^= n.bit
		}
	}
	if flags != 0 {
		names = append(names, fmt.Sprintf("%#x", flags))
	}
	if len(names) == 0 {
		return "-"
	}
	return strings.Join(names, ",")
}

// newTestOps is Ops over a temp root, a temp cgroup with the limit files
// a real one has, and a fake system.
func newTestOps(t *testing.T) (*Ops, *fakeSystem) {
	t.Helper()
	old := unix.Umask(0o077) // a strict umask must not change the modes
	t.Cleanup(func() { unix.Umask(old) })
	cg := t.TempDir()
	for _, f := range []string{"pids.max", "memory.max", "memory.swap.max"} {
		if err := os.WriteFile(filepath.Join(cg, f), []byte("max\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sys := &fakeSystem{}
	return &Ops{Root: t.TempDir(), Cgroup: cg, sys: sys}, sys
}

func TestOps_Mounts(t *testing.T) {
	o, sys := newTestOps(t)
	setup := agent.GuestSetup{Mounts: []agent.GuestMount{
		{Tag: "office", Target: "/workspace/v1-slack-x"},
		{Tag: "shared", Target: "/workspace/shared", ReadOnly: true},
	}}
	if err := o.Setup(context.Background(), setup); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"mount office " + o.Root + "/workspace/v1-slack-x virtiofs nosuid,nodev",
		"mount shared " + o.Root + "/workspace/shared virtiofs ro,nosuid,nodev",
	}
	if diff := cmp.Diff(want, sys.takeCalls()); diff != "" {
		t.Errorf("calls mismatch (-want +got):\n%s", diff)
	}
	for _, d := range []string{"/workspace", "/workspace/v1-slack-x", "/workspace/shared"} {
		fi, err := os.Stat(filepath.Join(o.Root, d))
		if err != nil || fi.Mode() != fs.ModeDir|0o755 {
			t.Errorf("%s: %v, %v; want a 0755 directory", d, fi.Mode(), err)
		}
	}

	t.Run("again_is_a_no_op", func(t *testing.T) {
		if err := o.Setup(context.Background(), setup); err != nil {
			t.Fatal(err)
		}
		if calls := sys.takeCalls(); len(calls) != 0 {
			t.Errorf("a repeated setup mounted again: %q", calls)
		}
	})
	t.Run("other_share_at_target_conflicts", func(t *testing.T) {
		err := o.Setup(context.Background(), agent.GuestSetup{Mounts: []agent.GuestMount{{Tag: "other", Target: "/workspace/shared"}}})
		want := `Guest mount target /workspace/shared already holds the share "shared", not "other"`
		if !errdefs.IsConflict(err) || err.Error() != want {
			t.Errorf("Setup got %v, want conflict %q", err, want)
		}
	})
	t.Run("unknown_tag", func(t *testing.T) {
		sys.mountErr = unix.ENOENT
		err := o.Setup(context.Background(), agent.GuestSetup{Mounts: []agent.GuestMount{{Tag: "ghost", Target: "/ghost"}}})
		want := `Guest has no virtiofs share "ghost" to mount on /ghost`
		if !errdefs.IsFailedPrecondition(err) || err.Error() != want {
			t.Errorf("Setup got %v, want failed precondition %q", err, want)
		}
	})
	t.Run("through_a_symlink", func(t *testing.T) {
		if err := os.Symlink("/etc", filepath.Join(o.Root, "evil")); err != nil {
			t.Fatal(err)
		}
		sys.takeCalls()
		err := o.Setup(context.Background(), agent.GuestSetup{Mounts: []agent.GuestMount{{Tag: "office", Target: "/evil/x"}}})
		if want := "Guest path passes through a symlink: /evil"; !errdefs.IsFailedPrecondition(err) || err.Error() != want {
			t.Errorf("Setup got %v, want failed precondition %q", err, want)
		}
		if calls := sys.takeCalls(); len(calls) != 0 {
			t.Errorf("mounted through a symlink: %q", calls)
		}
	})
}

func TestOps_Files(t *testing.T) {
	o, sys := newTestOps(t)
	setup := agent.GuestSetup{Files: []agent.GuestFile{
		{Path: "/root/.netrc", Mode: 0o600, Data: []byte("s3cret"), ReadOnly: true},
		{Path: "/etc/hutch/motd", Data: []byte("hello\n")},
	}}
	if err := o.Setup(context.Background(), setup); err != nil {
		t.Fatal(err)
	}
	token, motd := filepath.Join(o.Root, "/root/.netrc"), filepath.Join(o.Root, "/etc/hutch/motd")
	stage := filepath.Join(o.Root, filesStage)
	want := []string{
		"mount hutch-files " + stage + " tmpfs nosuid,nodev",
		"mount " + stage + "/0 " + token + "  bind",
		"mount  " + token + "  ro,nosuid,nodev,bind,remount",
		"mount " + stage + "/1 " + motd + "  bind",
		fmt.Sprintf("umount %s %#x", stage, unix.MNT_DETACH),
	}
	if diff := cmp.Diff(want, sys.takeCalls()); diff != "" {
		t.Errorf("calls mismatch (-want +got):\n%s", diff)
	}
	checkShown(t, sys, token, "s3cret", 0o600)
	checkShown(t, sys, motd, "hello\n", 0o644)
	// On the disk: empty files, the content held in memory only.
	checkFile(t, token, "", 0o600)
	checkFile(t, motd, "", 0o600)
	for _, d := range []string{"/root", "/etc", "/etc/hutch"} {
		fi, err := os.Stat(filepath.Join(o.Root, d))
		if err != nil || fi.Mode() != fs.ModeDir|0o755 {
			t.Errorf("%s: %v, %v; want a 0755 directory", d, fi.Mode(), err)
		}
	}
	if _, err := os.Stat(stage); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the files stage is left: %v", err)
	}

	t.Run("rewritten_after_unmounting", func(t *testing.T) {
		setup.Files[0].Data = []byte("rotated")
		setup.Files[0].Mode = 0o400
		if err := o.Setup(context.Background(), agent.GuestSetup{Files: setup.Files[:1]}); err != nil {
			t.Fatal(err)
		}
		want := []string{
			"mount hutch-files " + stage + " tmpfs nosuid,nodev",
			fmt.Sprintf("umount %s %#x", token, unix.MNT_DETACH),
			"mount " + stage + "/0 " + token + "  bind",
			"mount  " + token + "  ro,nosuid,nodev,bind,remount",
			fmt.Sprintf("umount %s %#x", stage, unix.MNT_DETACH),
		}
		if diff := cmp.Diff(want, sys.takeCalls()); diff != "" {
			t.Errorf("calls mismatch (-want +got):\n%s", diff)
		}
		checkShown(t, sys, token, "rotated", 0o400)
		checkFile(t, token, "", 0o600)
		if got := len(mountsAt(sys.mounted, token)); got != 1 {
			t.Errorf("%d mounts on the token, want 1", got)
		}
	})
	t.Run("replaces_a_planted_symlink", func(t *testing.T) {
		victim := filepath.Join(t.TempDir(), "victim")
		if err := os.WriteFile(victim, []byte("keep"), 0o600); err != nil {
			t.Fatal(err)
		}
		_ = os.Remove(motd)
		if err := os.Symlink(victim, motd); err != nil {
			t.Fatal(err)
		}
		if err := o.Setup(context.Background(), agent.GuestSetup{Files: setup.Files[1:]}); err != nil {
			t.Fatal(err)
		}
		checkShown(t, sys, motd, "hello\n", 0o644)
		checkFile(t, motd, "", 0o600)
		checkFile(t, victim, "keep", 0o600)
	})
	t.Run("replaces_an_earlier_copy", func(t *testing.T) {
		// A disk from before files were held in memory has the content.
		old := filepath.Join(o.Root, "/root/.old-copy")
		if err := os.WriteFile(old, []byte("old secret"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := o.Setup(context.Background(), agent.GuestSetup{Files: []agent.GuestFile{{Path: "/root/.old-copy", Mode: 0o600, Data: []byte("new")}}}); err != nil {
			t.Fatal(err)
		}
		checkShown(t, sys, old, "new", 0o600)
		checkFile(t, old, "", 0o600)
	})
	t.Run("refused", func(t *testing.T) {
		if err := os.Symlink("/etc", filepath.Join(o.Root, "link")); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(o.Root, "/srv/dir"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(o.Root, "/srv/file"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		for _, tt := range []struct {
			name, path, want string
			is               func(error) bool
		}{
			{"parent_symlink", "/link/passwd", "Guest path passes through a symlink: /link", errdefs.IsFailedPrecondition},
			{"parent_file", "/srv/file/x", "Guest path passes through a non-directory: /srv/file", errdefs.IsFailedPrecondition},
			{"directory", "/srv/dir", "Guest file path is a directory: /srv/dir", errdefs.IsFailedPrecondition},
			{"relative", "etc/x", `Guest file path must be absolute: "etc/x"`, errdefs.IsInvalid},
			{"dotdot", "/etc/../../x", `Guest file path must be clean (no .., . or //): "/etc/../../x"`, errdefs.IsInvalid},
		} {
			t.Run(tt.name, func(t *testing.T) {
				err := o.Setup(context.Background(), agent.GuestSetup{Files: []agent.GuestFile{{Path: tt.path, Data: []byte("x")}}})
				if !tt.is(err) || err.Error() != tt.want {
					t.Errorf("Setup got %v, want %q", err, tt.want)
				}
			})
		}
	})
}

// TestOps_Withdraw: a file an earlier setup projected is unbound and
// removed; one whose directory a command replaced with a symlink, and a
// directory, are left.
func TestOps_Withdraw(t *testing.T) {
	o, sys := newTestOps(t)
	if err := o.Setup(context.Background(), agent.GuestSetup{Files: []agent.GuestFile{
		{Path: "/root/.netrc", Mode: 0o600, Data: []byte("s3cret"), ReadOnly: true},
	}}); err != nil {
		t.Fatal(err)
	}
	victim := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(filepath.Join(victim), []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Dir(victim), filepath.Join(o.Root, "moved")); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(o.Root, "/srv/dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	sys.takeCalls()
	err := o.Setup(context.Background(), agent.GuestSetup{Withdraw: []string{"/root/.netrc", "/root/never", "/moved/victim", "/srv/dir"}})
	if err != nil {
		t.Fatal(err)
	}
	token := filepath.Join(o.Root, "/root/.netrc")
	if diff := cmp.Diff([]string{fmt.Sprintf("umount %s %#x", token, unix.MNT_DETACH)}, sys.takeCalls()); diff != "" {
		t.Errorf("calls mismatch (-want +got):\n%s", diff)
	}
	if _, err := os.Lstat(token); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the withdrawn file is still there: %v", err)
	}
	checkFile(t, victim, "keep", 0o600)
	if fi, err := os.Stat(filepath.Join(o.Root, "/srv/dir")); err != nil || !fi.IsDir() {
		t.Errorf("a directory at a withdrawn path was removed: %v", err)
	}
	t.Run("refused", func(t *testing.T) {
		err := o.Setup(context.Background(), agent.GuestSetup{Withdraw: []string{"/root/../etc/passwd"}})
		if want := `Guest withdrawn path must be clean (no .., . or //): "/root/../etc/passwd"`; !errdefs.IsInvalid(err) || err.Error() != want {
			t.Errorf("Setup got %v, want %q", err, want)
		}
	})
}

// TestOps_Volatile: a volatile directory gets a tmpfs before the shares
// mounted in it, once.
func TestOps_Volatile(t *testing.T) {
	o, sys := newTestOps(t)
	setup := agent.GuestSetup{
		Volatile: []string{"/workspace"},
		Mounts:   []agent.GuestMount{{Tag: "office", Target: "/workspace/k"}},
	}
	if err := o.Setup(context.Background(), setup); err != nil {
		t.Fatal(err)
	}
	ws := filepath.Join(o.Root, "/workspace")
	want := []string{
		"mount hutch-volatile " + ws + " tmpfs nosuid,nodev",
		"mount office " + ws + "/k virtiofs nosuid,nodev",
	}
	if diff := cmp.Diff(want, sys.takeCalls()); diff != "" {
		t.Errorf("calls mismatch (-want +got):\n%s", diff)
	}
	if err := o.Setup(context.Background(), setup); err != nil {
		t.Fatal(err)
	}
	if calls := sys.takeCalls(); len(calls) != 0 {
		t.Errorf("a repeated setup mounted again: %q", calls)
	}
	err := o.Setup(context.Background(), agent.GuestSetup{Volatile: []string{"/workspace/k"}})
	if want := "Guest volatile directory /workspace/k already holds a virtiofs mount"; !errdefs.IsConflict(err) || err.Error() != want {
		t.Errorf("Setup got %v, want conflict %q", err, want)
	}
}

// checkShown checks what the bind mount at path shows.
func checkShown(t *testing.T, sys *fakeSystem, path, content string, mode fs.FileMode) {
	t.Helper()
	sys.mu.Lock()
	got, ok := sys.shown[path]
	sys.mu.Unlock()
	if !ok || got.data != content || got.mode != mode {
		t.Errorf("%s shows %q mode %v (mounted: %v), want %q mode %v", path, got.data, got.mode, ok, content, mode)
	}
}

func checkFile(t *testing.T, path, content string, mode fs.FileMode) {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != content || fi.Mode() != mode {
		t.Errorf("%s: %q mode %v, want %q mode %v", path, b, fi.Mode(), content, mode)
	}
}

func TestOps_Limits(t *testing.T) {
	o, _ := newTestOps(t)
	read := func(f string) string {
		b, err := os.ReadFile(filepath.Join(o.Cgroup, f))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if err := o.Setup(context.Background(), agent.GuestSetup{Pids: 256, MemoryBytes: 900 << 20}); err != nil {
		t.Fatal(err)
	}
	for f, want := range map[string]string{"pids.max": "256", "memory.max": "943718400", "memory.swap.max": "0"} {
		if got := read(f); got != want {
			t.Errorf("%s = %q, want %q", f, got, want)
		}
	}
	t.Run("zero_leaves_them", func(t *testing.T) {
		if err := o.Setup(context.Background(), agent.GuestSetup{}); err != nil {
			t.Fatal(err)
		}
		if got := read("pids.max"); got != "256" {
			t.Errorf("pids.max = %q, want it left at 256", got)
		}
	})
	t.Run("no_swap_accounting", func(t *testing.T) {
		_ = os.Remove(filepath.Join(o.Cgroup, "memory.swap.max"))
		if err := o.Setup(context.Background(), agent.GuestSetup{MemoryBytes: 1 << 30}); err != nil {
			t.Errorf("Setup without memory.swap.max: %v", err)
		}
	})
	t.Run("missing_controller", func(t *testing.T) {
		_ = os.Remove(filepath.Join(o.Cgroup, "pids.max"))
		err := o.Setup(context.Background(), agent.GuestSetup{Pids: 10})
		if !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("Setup without pids.max got %v, want not exist", err)
		}
	})
	t.Run("no_cgroup", func(t *testing.T) {
		err := (&Ops{Root: o.Root, sys: &fakeSystem{}}).Setup(context.Background(), agent.GuestSetup{Pids: 10})
		if want := "Guest has no commands' cgroup to limit"; !errdefs.IsFailedPrecondition(err) || err.Error() != want {
			t.Errorf("Setup got %v, want %q", err, want)
		}
	})
}

func TestOps_PowerOff(t *testing.T) {
	o, sys := newTestOps(t)
	o.PowerOff()
	if diff := cmp.Diff([]string{"sync", "reboot"}, sys.takeCalls()); diff != "" {
		t.Errorf("calls mismatch (-want +got):\n%s", diff)
	}
}

func TestSetupCgroups(t *testing.T) {
	root := t.TempDir()
	// What cgroupfs makes by itself: the files of the root and, on mkdir,
	// of every child.
	if err := os.WriteFile(filepath.Join(root, "cgroup.subtree_control"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(root, "agent"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "agent", "cgroup.procs"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	commands, err := setupCgroups(root, 1)
	if err != nil {
		t.Fatal(err)
	}
	if commands != filepath.Join(root, "hutch") {
		t.Errorf("commands cgroup %s, want %s/hutch", commands, root)
	}
	for f, want := range map[string]string{"agent/cgroup.procs": "1", "cgroup.subtree_control": "+pids +memory"} {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil || string(b) != want {
			t.Errorf("%s = %q, %v; want %q", f, b, err, want)
		}
	}
	if fi, err := os.Stat(commands); err != nil || !fi.IsDir() {
		t.Errorf("commands cgroup: %v", err)
	}
}

func TestOps_Network(t *testing.T) {
	o, sys := newTestOps(t)
	o.netClass = fstest.MapFS{
		"eth0/address": {Data: []byte("52:54:00:12:34:56\n")},
		"lo/address":   {Data: []byte("00:00:00:00:00:00\n")},
	}
	setup := agent.GuestSetup{Network: &agent.GuestNetwork{Address: "10.0.2.15/24", Proxy: "http://10.0.2.100:3128"}}
	for range 2 { // again after a reconnect: the same
		if err := o.Setup(context.Background(), setup); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{"address eth0 10.0.2.15/24"}, sys.takeCalls()); diff != "" {
			t.Errorf("calls mismatch (-want +got):\n%s", diff)
		}
	}
	t.Run("no_card", func(t *testing.T) {
		o.netClass = fstest.MapFS{"lo/address": {Data: []byte("00:00:00:00:00:00\n")}}
		err := o.Setup(context.Background(), setup)
		if want := "Guest has no network card to configure (the VM was started without one)"; !errdefs.IsFailedPrecondition(err) || err.Error() != want {
			t.Errorf("Setup got %v, want %q", err, want)
		}
	})
}

func TestNetmask(t *testing.T) {
	for bits, want := range map[int]string{1: "128.0.0.0", 8: "255.0.0.0", 24: "255.255.255.0", 30: "255.255.255.252", 32: "255.255.255.255"} {
		if got := netmask(bits).String(); got != want {
			t.Errorf("netmask(%d) = %s, want %s", bits, got, want)
		}
	}
}
