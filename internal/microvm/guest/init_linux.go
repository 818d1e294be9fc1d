package guest

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hutchsandbox/hutch/internal/agent"
	"github.com/hutchsandbox/hutch/internal/errdefs"
)

// Options configure Run.
type Options struct {
	// Version is what the agent's ping reports.
	Version string
	// Log receives the guest's log (the serial console); nil discards.
	Log *slog.Logger
}

// Run is `hutch agent --guest`: it makes the initramfs's pid 1 into the
// guest's init and agent (see the package doc) and serves the host until
// the host powers the VM off. Any failure is logged and ends the VM: a
// guest that cannot serve must not leave the host waiting for a boot that
// never finishes. It refuses to run as anything but pid 1, so that it can
// never remount or reboot a machine it was not meant for.
func Run(ctx context.Context, opts Options) error {
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if os.Getpid() != 1 {
		return errdefs.New(errdefs.ErrFailedPrecondition, "hutch agent --guest runs only as a microVM's init (pid 1)")
	}
	err := boot(ctx, log, opts.Version)
	if err != nil {
		log.Error("guest: failed; powering off", "err", err)
	} else {
		log.Info("guest: the agent ended; powering off")
	}
	sys := linuxSystem{}
	sys.sync()
	if rerr := sys.reboot(); rerr != nil {
		log.Error("guest: power off failed", "err", rerr)
	}
	// Reached only when the kernel refused. pid 1 exiting panics the
	// kernel, and the VM's kernel restarts on a panic (panic=-1), which
	// ends it too.
	if err == nil {
		err = errors.New("guest: the VM did not power off")
	}
	return err
}

// boot runs the init steps in order, then the agent.
func boot(ctx context.Context, log *slog.Logger, version string) error {
	if err := mountAll(earlyMounts); err != nil {
		return err
	}
	consoleStdio()
	n, err := loadModules(modulesList)
	if err != nil {
		return err
	}
	log.Info("guest: modules loaded", "count", n)
	if err := waitPath(rootDevice); err != nil {
		return err
	}
	if err := os.MkdirAll(newRoot, 0o755); err != nil {
		return fmt.Errorf("guest: %w", err)
	}
	if err := unix.Mount(rootDevice, newRoot, "ext4", 0, ""); err != nil {
		return fmt.Errorf("guest: mount the root disk %s: %w", rootDevice, err)
	}
	if err := switchRoot(newRoot); err != nil {
		return err
	}
	if err := mountAll(systemMounts); err != nil {
		return err
	}
	devLinks()
	if err := unix.Sethostname([]byte(hostname)); err != nil {
		return fmt.Errorf("guest: set the host name: %w", err)
	}
	if err := loopbackUp(); err != nil {
		return err
	}
	// The kernel hands init HOME=/ and TERM=linux and any word of its
	// command line it did not know; commands get a clean env instead.
	os.Clearenv()
	if err := errors.Join(os.Setenv("PATH", commandPath), os.Setenv("HOME", commandHome)); err != nil {
		return fmt.Errorf("guest: set the environment: %w", err)
	}
	commands, err := setupCgroups(cgroupRoot, os.Getpid())
	if err != nil {
		return err
	}
	// No oom_score_adj for the agent: the OOM killer never picks the
	// global init, and a lowered score would be inherited by every
	// command, where -1000 leaves a full commands' cgroup nobody to kill.
	dropped, err := dropCapabilities(allThreadsPrctl)
	if err != nil {
		return fmt.Errorf("guest: %w", err)
	}
	log.Info("guest: commands confined", "cgroup", commands, "capabilities_dropped", dropped)
	port, err := waitPort()
	if err != nil {
		return err
	}
	log.Info("guest: ready", "uptime", uptime(), "port", port)
	return agent.Run(ctx, agent.Options{
		Connect:        NewPort(port, log).Connect,
		Init:           true,
		Version:        version,
		Log:            log,
		Guest:          NewOps(log),
		CommandCgroup:  commands,
		OOMCounterPath: filepath.Join(commands, "memory.events"),
	})
}

// sysMount is one mount of the init.
type sysMount struct {
	source, target, fstype string
	flags                  uintptr
	data                   string
}

// earlyMounts are made in the initramfs, and moved to the root disk.
var earlyMounts = []sysMount{
	{"devtmpfs", "/dev", "devtmpfs", unix.MS_NOSUID, "mode=0755"},
	{"proc", "/proc", "proc", unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC, ""},
	{"sysfs", "/sys", "sysfs", unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC, ""},
}

// systemMounts are made on the root disk, once it is /.
var systemMounts = []sysMount{
	// A private devpts instance; /dev/ptmx (devtmpfs) finds it as pts/.
	{"devpts", "/dev/pts", "devpts", unix.MS_NOSUID | unix.MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620,gid=5"},
	{"shm", "/dev/shm", "tmpfs", unix.MS_NOSUID | unix.MS_NODEV, "mode=1777"},
	{"tmpfs", "/run", "tmpfs", unix.MS_NOSUID | unix.MS_NODEV, "mode=0755"},
	{"cgroup2", cgroupRoot, "cgroup2", unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC, ""},
}

func mountAll(mounts []sysMount) error {
	for _, m := range mounts {
		if err := os.MkdirAll(m.target, 0o755); err != nil {
			return fmt.Errorf("guest: %w", err)
		}
		if err := unix.Mount(m.source, m.target, m.fstype, m.flags, m.data); err != nil {
			return fmt.Errorf("guest: mount %s on %s: %w", m.fstype, m.target, err)
		}
	}
	return nil
}

// consoleStdio gives init a stdin, stdout and stderr on /dev/console when
// the initramfs had no console node for the kernel to open.
func consoleStdio() {
	if _, err := unix.FcntlInt(2, unix.F_GETFD, 0); err == nil {
		return
	}
	fd, err := unix.Open("/dev/console", unix.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		return // nowhere to log to; the host sees the VM end
	}
	for i := range 3 {
		if i != fd {
			_ = unix.Dup3(fd, i, 0)
		}
	}
	if fd > 2 {
		_ = unix.Close(fd)
	}
}

// devLinks makes the /dev symlinks programs expect and devtmpfs lacks.
func devLinks() {
	for name, target := range map[string]string{
		"/dev/fd":     "/proc/self/fd",
		"/dev/stdin":  "/proc/self/fd/0",
		"/dev/stdout": "/proc/self/fd/1",
		"/dev/stderr": "/proc/self/fd/2",
	} {
		_ = os.Symlink(target, name) // EEXIST: already there
	}
}

// loadModules loads every module of the list in order and returns how
// many it loaded; one already loaded (or built in) is fine.
func loadModules(list string) (int, error) {
	f, err := os.Open(list)
	if err != nil {
		return 0, fmt.Errorf("guest: open the module list: %w", err)
	}
	mods, err := parseModules(f)
	_ = f.Close()
	if err != nil {
		return 0, fmt.Errorf("guest: %s: %w", list, err)
	}
	n := 0
	for _, m := range mods {
		fd, err := unix.Open(m, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return n, fmt.Errorf("guest: open the module %s: %w", m, err)
		}
		err = unix.FinitModule(fd, "", 0)
		_ = unix.Close(fd)
		switch {
		case errors.Is(err, unix.EEXIST):
		case err != nil:
			return n, fmt.Errorf("guest: load the module %s: %w", m, err)
		default:
			n++
		}
	}
	return n, nil
}

// waitPath waits until path exists (a device the kernel probes
// asynchronously).
func waitPath(path string) error {
	deadline := time.Now().Add(deviceWait)
	for {
		_, err := os.Stat(path)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return errdefs.New(errdefs.ErrUnavailable, fmt.Sprintf("guest: %s did not appear within %s: %v", path, deviceWait, err))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitPort waits until the agent's virtio port shows up in sysfs and
// returns its device name.
func waitPort() (string, error) {
	deadline := time.Now().Add(deviceWait)
	for {
		name, err := findPort(os.DirFS(portsDir), PortName)
		if err == nil {
			return name, nil
		}
		// Not there yet: no port of that name, or no virtio-ports class
		// at all. Anything else will not get better by waiting.
		if time.Now().After(deadline) || (!errdefs.IsNotFound(err) && !errors.Is(err, fs.ErrNotExist)) {
			return "", fmt.Errorf("guest: %w", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// switchRoot makes newRoot the root: the kernel file systems move along,
// then the root disk moves over / and the process chroots into it, as
// switch_root(8) does. The initramfs stays underneath, unreachable; its
// files are not freed (the agent binary in it keeps running anyway).
func switchRoot(newRoot string) error {
	for _, d := range []string{"/dev", "/proc", "/sys"} {
		target := newRoot + d
		if err := os.MkdirAll(target, 0o755); err != nil {
			return fmt.Errorf("guest: %w", err)
		}
		if err := unix.Mount(d, target, "", unix.MS_MOVE, ""); err != nil {
			return fmt.Errorf("guest: move %s to %s: %w", d, target, err)
		}
	}
	if err := unix.Chdir(newRoot); err != nil {
		return fmt.Errorf("guest: %w", err)
	}
	if err := unix.Mount(".", "/", "", unix.MS_MOVE, ""); err != nil {
		return fmt.Errorf("guest: move %s over /: %w", newRoot, err)
	}
	if err := unix.Chroot("."); err != nil {
		return fmt.Errorf("guest: chroot: %w", err)
	}
	if err := unix.Chdir("/"); err != nil {
		return fmt.Errorf("guest: %w", err)
	}
	return nil
}

// loopbackUp brings lo up: commands talk to their own servers on it.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("guest: bring lo up: %w", err)
	}
	defer func() { _ = unix.Close(fd) }()
	if err := ifUp(fd, "lo"); err != nil {
		return fmt.Errorf("guest: bring lo up: %w", err)
	}
	return nil
}

// uptime is the kernel's uptime, for the boot log.
func uptime() string {
	b, err := os.ReadFile("/proc/uptime")
	if err != nil {
		return "?"
	}
	up, _, _ := strings.Cut(string(b), " ")
	return up + "s"
}
