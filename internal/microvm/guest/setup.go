package guest

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/hutchsandbox/hutch/internal/agent"
	"github.com/hutchsandbox/hutch/internal/atomicfile"
	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/mountinfo"
)

// system is the kernel as Ops uses it: a narrow seam so that the setup
// logic runs in tests without mounting anything.
type system interface {
	mount(source, target, fstype string, flags uintptr, data string) error
	unmount(target string, flags int) error
	mountinfo() ([]mountinfo.Entry, error)
	// setAddress gives a network interface an IPv4 address and brings
	// it up.
	setAddress(iface string, prefix netip.Prefix) error
	sync()
	reboot() error
}

// Ops carries out the agent's guest requests (it is an agent.GuestOps):
// virtiofs mounts, files, the commands' cgroup limits and the poweroff.
type Ops struct {
	// Root prefixes every guest path of a setup; "" is the guest's /.
	// Tests point it at a temporary directory.
	Root string
	// Cgroup is the commands' cgroup directory, whose pids.max, memory.max
	// and memory.swap.max a setup writes.
	Cgroup string
	// Log receives what the setup does; nil discards. It never receives
	// a file's content.
	Log *slog.Logger

	sys      system
	netClass fs.FS      // /sys/class/net
	mu       sync.Mutex // one setup at a time
}

var _ agent.GuestOps = (*Ops)(nil)

func (o *Ops) log() *slog.Logger {
	if o.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return o.Log
}

// host is where the guest path p is in this process's view.
func (o *Ops) host(p string) string {
	if o.Root == "" {
		return p
	}
	return filepath.Join(o.Root, p)
}

// Setup withdraws, mounts, projects, limits and configures what setup
// asks for, in that order (a volatile directory holds shares' mount
// points, a file may land in a share mounted just before). Applied twice
// it leaves the guest as the first time did: a volatile tmpfs or a share
// already mounted at its target is kept, files are projected again,
// limits and the network card's address are set again.
func (o *Ops) Setup(ctx context.Context, setup agent.GuestSetup) error {
	if err := setup.Validate(); err != nil {
		return err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(setup.Withdraw) > 0 {
		infos, err := o.sys.mountinfo()
		if err != nil {
			return err
		}
		if err := o.withdraw(setup.Withdraw, infos); err != nil {
			return err
		}
	}
	if len(setup.Volatile) > 0 || len(setup.Mounts) > 0 {
		infos, err := o.sys.mountinfo()
		if err != nil {
			return err
		}
		for _, d := range setup.Volatile {
			if err := o.mountVolatile(d, infos); err != nil {
				return err
			}
		}
		for _, m := range setup.Mounts {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := o.mountShare(m, infos); err != nil {
				return err
			}
		}
	}
	if len(setup.Files) > 0 {
		if err := o.projectFiles(ctx, setup.Files); err != nil {
			return err
		}
	}
	if err := o.limit(setup); err != nil {
		return err
	}
	if setup.Network != nil {
		return o.configureNetwork(setup.Network)
	}
	return nil
}

// withdraw removes the files an earlier setup projected that this one
// does not, and the bind mounts on them. A path that passes through a
// symlink or a non-directory now, or names a directory, is left alone: a
// command moved what hutch put there, and what it keeps is its own.
func (o *Ops) withdraw(paths []string, infos []mountinfo.Entry) error {
	for _, p := range paths {
		if !plainDirs(o.Root, filepath.Dir(p)) {
			o.log().Info("guest: withdrawn file not removed: its directory moved", "path", p)
			continue
		}
		hp := o.host(p)
		for range mountsAt(infos, hp) {
			if err := o.sys.unmount(hp, unix.MNT_DETACH); err != nil {
				return fmt.Errorf("guest: unmount the withdrawn %s: %w", p, err)
			}
		}
		fi, err := os.Lstat(hp)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			continue
		case err != nil:
			return fmt.Errorf("guest: %w", err)
		case fi.IsDir():
			o.log().Info("guest: withdrawn file not removed: a directory stands there", "path", p)
			continue
		}
		if err := os.Remove(hp); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("guest: remove the withdrawn %s: %w", p, err)
		}
		o.log().Info("guest: withdrawn file removed", "path", p)
	}
	return nil
}

// volatileSource names the tmpfs of a volatile directory in mountinfo.
const volatileSource = "hutch-volatile"

// mountVolatile mounts a fresh tmpfs on dir, unless one is already there.
func (o *Ops) mountVolatile(dir string, infos []mountinfo.Entry) error {
	target := o.host(dir)
	at := mountsAt(infos, target)
	for _, e := range at {
		if e.FSType == "tmpfs" && e.Source == volatileSource {
			o.log().Debug("guest: volatile directory already mounted", "target", dir)
			return nil
		}
	}
	if len(at) > 0 {
		return errdefs.New(errdefs.ErrConflict, fmt.Sprintf("Guest volatile directory %s already holds a %s mount", dir, at[len(at)-1].FSType))
	}
	if err := mkdirAll(o.Root, dir); err != nil {
		return err
	}
	if err := o.sys.mount(volatileSource, target, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755"); err != nil {
		return fmt.Errorf("guest: mount a tmpfs on %s: %w", dir, err)
	}
	o.log().Info("guest: volatile directory mounted", "target", dir)
	return nil
}

// mountShare mounts one virtiofs share, unless it already is there.
func (o *Ops) mountShare(m agent.GuestMount, infos []mountinfo.Entry) error {
	target := o.host(m.Target)
	if tagMounted(infos, m.Tag, target) {
		o.log().Debug("guest: share already mounted", "tag", m.Tag, "target", m.Target)
		return nil
	}
	if at := mountsAt(infos, target); len(at) > 0 && at[len(at)-1].FSType == "virtiofs" {
		return errdefs.New(errdefs.ErrConflict, fmt.Sprintf("Guest mount target %s already holds the share %q, not %q", m.Target, at[len(at)-1].Source, m.Tag))
	}
	if err := mkdirAll(o.Root, m.Target); err != nil {
		return err
	}
	flags := uintptr(unix.MS_NOSUID | unix.MS_NODEV)
	if m.ReadOnly {
		flags |= unix.MS_RDONLY
	}
	if err := o.sys.mount(m.Tag, target, "virtiofs", flags, ""); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return errdefs.New(errdefs.ErrFailedPrecondition, fmt.Sprintf("Guest has no virtiofs share %q to mount on %s", m.Tag, m.Target))
		}
		return errdefs.New(errdefs.ErrFailedPrecondition, fmt.Sprintf("Guest cannot mount the share %q on %s: %v", m.Tag, m.Target, err))
	}
	o.log().Info("guest: share mounted", "tag", m.Tag, "target", m.Target, "read_only", m.ReadOnly)
	return nil
}

// filesStage is where a setup's files are written before they are bound
// onto their paths: a tmpfs of its own, detached once they are, so that
// nothing but the bind mounts reaches the content (a read-only file has
// no writable second name).
const filesStage = "/run/hutch/files"

// filesSource names the stage's tmpfs in mountinfo.
const filesSource = "hutch-files"

// projectFiles writes files into a fresh tmpfs at filesStage and binds each
// onto its path, then detaches the stage.
func (o *Ops) projectFiles(ctx context.Context, files []agent.GuestFile) error {
	infos, err := o.sys.mountinfo()
	if err != nil {
		return err
	}
	stage := o.host(filesStage)
	for range mountsAt(infos, stage) { // left by a setup that failed half-way
		if err := o.sys.unmount(stage, unix.MNT_DETACH); err != nil {
			return fmt.Errorf("guest: unmount the files stage: %w", err)
		}
	}
	if err := mkdirAll(o.Root, filesStage); err != nil {
		return err
	}
	if err := o.sys.mount(filesSource, stage, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0700"); err != nil {
		return fmt.Errorf("guest: mount the files stage: %w", err)
	}
	defer func() {
		if err := o.sys.unmount(stage, unix.MNT_DETACH); err != nil {
			o.log().Warn("guest: the files stage stays mounted", "err", err)
			return
		}
		_ = os.RemoveAll(stage) // empty once detached
	}()
	for i, f := range files {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := o.projectFile(f, filepath.Join(stage, strconv.Itoa(i)), infos); err != nil {
			return err
		}
	}
	return nil
}

// projectFile writes one file's content at src, in the stage, and binds it
// onto the file's path, where an empty file stands on whatever disk holds
// the path (it replaces an earlier copy or a planted symlink). A read-only
// file's bind is made read-only, so that even root inside the guest cannot
// change it. A file that is such a bind from an earlier setup is unbound
// first: a rename over a mount point fails.
func (o *Ops) projectFile(f agent.GuestFile, src string, infos []mountinfo.Entry) error {
	if err := mkdirAll(o.Root, filepath.Dir(f.Path)); err != nil {
		return err
	}
	p := o.host(f.Path)
	if fi, err := os.Lstat(p); err == nil && fi.IsDir() {
		return errdefs.New(errdefs.ErrFailedPrecondition, "Guest file path is a directory: "+f.Path)
	}
	mode := fs.FileMode(f.Mode).Perm()
	if f.Mode == 0 {
		mode = 0o644
	}
	if err := writeNew(src, f.Data, mode); err != nil {
		return err
	}
	for range mountsAt(infos, p) {
		if err := o.sys.unmount(p, unix.MNT_DETACH); err != nil {
			return fmt.Errorf("guest: unmount the earlier %s before projecting it again: %w", f.Path, err)
		}
	}
	if err := atomicfile.WriteFile(p, nil, 0o600); err != nil {
		return fmt.Errorf("guest: %w", err)
	}
	if err := o.sys.mount(src, p, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("guest: bind %s: %w", f.Path, err)
	}
	if f.ReadOnly {
		if err := o.sys.mount("", p, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, ""); err != nil {
			_ = o.sys.unmount(p, unix.MNT_DETACH)
			return fmt.Errorf("guest: make %s read-only: %w", f.Path, err)
		}
	}
	o.log().Info("guest: file projected", "path", f.Path, "mode", fmt.Sprintf("%#o", mode), "bytes", len(f.Data), "read_only", f.ReadOnly)
	return nil
}

// writeNew creates the file p with data and exactly mode.
func writeNew(p string, data []byte, mode fs.FileMode) error {
	fh, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("guest: %w", err)
	}
	_, err = fh.Write(data)
	if err == nil {
		err = fh.Chmod(mode)
	}
	if cerr := fh.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("guest: %w", err)
	}
	return nil
}

// limit writes the commands' cgroup limits a setup asks for.
func (o *Ops) limit(setup agent.GuestSetup) error {
	if setup.Pids == 0 && setup.MemoryBytes == 0 {
		return nil
	}
	if o.Cgroup == "" {
		return errdefs.New(errdefs.ErrFailedPrecondition, "Guest has no commands' cgroup to limit")
	}
	if setup.Pids > 0 {
		if err := writeCgroup(o.Cgroup, "pids.max", strconv.FormatInt(setup.Pids, 10)); err != nil {
			return err
		}
	}
	if setup.MemoryBytes > 0 {
		if err := writeCgroup(o.Cgroup, "memory.max", strconv.FormatInt(setup.MemoryBytes, 10)); err != nil {
			return err
		}
		// Without swap accounting in the kernel the file is missing, and
		// there is no swap to turn off.
		if err := writeCgroup(o.Cgroup, "memory.swap.max", "0"); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	o.log().Info("guest: commands limited", "pids", setup.Pids, "memory_bytes", setup.MemoryBytes)
	return nil
}

// writeCgroup writes one cgroup interface file, which must exist (cgroupfs
// makes them all with the directory; one that is missing is a controller
// the kernel does not have).
func writeCgroup(dir, file, value string) error {
	p := filepath.Join(dir, file)
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return fmt.Errorf("guest: write %s: %w", p, err)
	}
	_, err = f.WriteString(value)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("guest: write %s to %s: %w", value, p, err)
	}
	return nil
}

// PowerOff syncs the disks and ends the VM (QEMU runs with -no-reboot, so
// a restart ends it). It returns only when the kernel refused.
func (o *Ops) PowerOff() {
	o.log().Info("guest: powering off")
	o.sys.sync()
	if err := o.sys.reboot(); err != nil {
		o.log().Error("guest: power off failed", "err", err)
	}
}

// plainDirs reports whether the guest directory dir exists under root
// and every part of it is a directory, none a symlink.
func plainDirs(root, dir string) bool {
	return eachPart(root, dir, func(cur string) error {
		fi, err := os.Lstat(cur)
		if err != nil || !fi.IsDir() {
			return fs.ErrInvalid // a symlink is not a directory to Lstat
		}
		return nil
	}) == nil
}

// eachPart calls fn with root joined to each leading part of dir in turn
// (root/a, root/a/b, ...), until fn fails.
func eachPart(root, dir string, fn func(cur string) error) error {
	cur := root
	if cur == "" {
		cur = "/"
	}
	for _, part := range strings.Split(strings.TrimPrefix(dir, "/"), "/") {
		if part == "" {
			continue
		}
		cur = filepath.Join(cur, part)
		if err := fn(cur); err != nil {
			return err
		}
	}
	return nil
}

// mkdirAll creates the guest directory dir under root and its missing
// parents, each 0755 whatever the umask. It refuses a path that passes
// through a symlink or a non-directory: a command may have planted one to
// send the agent's mount or file somewhere else.
func mkdirAll(root, dir string) error {
	return eachPart(root, dir, func(cur string) error {
		fi, err := os.Lstat(cur)
		if errors.Is(err, fs.ErrNotExist) {
			if err := os.Mkdir(cur, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
				return fmt.Errorf("guest: %w", err)
			}
			if err := os.Chmod(cur, 0o755); err != nil {
				return fmt.Errorf("guest: %w", err)
			}
			fi, err = os.Lstat(cur)
		}
		guestPath := strings.TrimPrefix(cur, strings.TrimSuffix(root, "/"))
		switch {
		case err != nil:
			return fmt.Errorf("guest: %w", err)
		case fi.Mode()&fs.ModeSymlink != 0:
			return errdefs.New(errdefs.ErrFailedPrecondition, "Guest path passes through a symlink: "+guestPath)
		case !fi.IsDir():
			return errdefs.New(errdefs.ErrFailedPrecondition, "Guest path passes through a non-directory: "+guestPath)
		}
		return nil
	})
}
