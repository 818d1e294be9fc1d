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
)

// system is the kernel as Ops uses it: a narrow seam so that the setup
// logic runs in tests without mounting anything.
type system interface {
	mount(source, target, fstype string, flags uintptr, data string) error
	unmount(target string, flags int) error
	mountinfo() ([]mountEntry, error)
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

// Setup mounts, writes, limits and configures what setup asks for, in
// that order (a file may land in a share mounted just before). Applied
// twice it leaves the guest as the first time did: a share already
// mounted at its target is kept, files are written again, limits and the
// network card's address are set again.
func (o *Ops) Setup(ctx context.Context, setup agent.GuestSetup) error {
	if err := setup.Validate(); err != nil {
		return err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(setup.Mounts) > 0 {
		infos, err := o.sys.mountinfo()
		if err != nil {
			return err
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
		infos, err := o.sys.mountinfo()
		if err != nil {
			return err
		}
		for _, f := range setup.Files {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := o.writeFile(f, infos); err != nil {
				return err
			}
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

// mountShare mounts one virtiofs share, unless it already is there.
func (o *Ops) mountShare(m agent.GuestMount, infos []mountEntry) error {
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

// writeFile writes one file atomically (the agent is root, so the file is
// root's) and, when asked, bind-mounts it read-only onto itself. A file
// that is such a mount from an earlier setup is unmounted first: a rename
// over a mount point fails.
func (o *Ops) writeFile(f agent.GuestFile, infos []mountEntry) error {
	if err := mkdirAll(o.Root, filepath.Dir(f.Path)); err != nil {
		return err
	}
	p := o.host(f.Path)
	if fi, err := os.Lstat(p); err == nil && fi.IsDir() {
		return errdefs.New(errdefs.ErrFailedPrecondition, "Guest file path is a directory: "+f.Path)
	}
	for range mountsAt(infos, p) {
		if err := o.sys.unmount(p, unix.MNT_DETACH); err != nil {
			return fmt.Errorf("guest: unmount the read-only %s before rewriting it: %w", f.Path, err)
		}
	}
	mode := fs.FileMode(f.Mode).Perm()
	if f.Mode == 0 {
		mode = 0o644
	}
	if err := atomicfile.WriteFile(p, f.Data, mode); err != nil {
		return fmt.Errorf("guest: %w", err)
	}
	if f.ReadOnly {
		if err := o.sys.mount(p, p, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("guest: bind %s onto itself: %w", f.Path, err)
		}
		if err := o.sys.mount("", p, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, ""); err != nil {
			_ = o.sys.unmount(p, unix.MNT_DETACH)
			return fmt.Errorf("guest: make %s read-only: %w", f.Path, err)
		}
	}
	o.log().Info("guest: file written", "path", f.Path, "mode", fmt.Sprintf("%#o", mode), "bytes", len(f.Data), "read_only", f.ReadOnly)
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

// mkdirAll creates the guest directory dir under root and its missing
// parents, each 0755 whatever the umask. It refuses a path that passes
// through a symlink or a non-directory: a command may have planted one to
// send the agent's mount or file somewhere else.
func mkdirAll(root, dir string) error {
	cur := root
	if cur == "" {
		cur = "/"
	}
	for _, part := range strings.Split(strings.TrimPrefix(dir, "/"), "/") {
		if part == "" {
			continue
		}
		cur = filepath.Join(cur, part)
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
	}
	return nil
}
