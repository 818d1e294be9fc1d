package guest

import (
	"log/slog"
	"net/netip"
	"os"

	"github.com/hutchsandbox/hutch/internal/mountinfo"
	"golang.org/x/sys/unix"
)

// NewOps returns the Ops of the running guest: paths as they are, limits
// on CommandCgroup.
func NewOps(log *slog.Logger) *Ops {
	return &Ops{Cgroup: CommandCgroup, Log: log, sys: linuxSystem{}, netClass: os.DirFS(netClassDir)}
}

// linuxSystem is the kernel itself.
type linuxSystem struct{}

func (linuxSystem) mount(source, target, fstype string, flags uintptr, data string) error {
	return unix.Mount(source, target, fstype, flags, data)
}

func (linuxSystem) unmount(target string, flags int) error {
	return unix.Unmount(target, flags)
}

func (linuxSystem) mountinfo() ([]mountinfo.Entry, error) { return mountinfo.Self() }

func (linuxSystem) sync() { unix.Sync() }

// reboot restarts the VM, which ends it: QEMU runs with -no-reboot, and a
// microvm machine does not exit on an ACPI power-off.
func (linuxSystem) reboot() error {
	return unix.Reboot(unix.LINUX_REBOOT_CMD_RESTART)
}

func (linuxSystem) setAddress(iface string, prefix netip.Prefix) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer func() { _ = unix.Close(fd) }()
	for _, set := range []struct {
		req  uint
		addr netip.Addr
	}{
		{unix.SIOCSIFADDR, prefix.Addr()},
		{unix.SIOCSIFNETMASK, netmask(prefix.Bits())},
	} {
		ifr, err := unix.NewIfreq(iface)
		if err != nil {
			return err
		}
		a := set.addr.As4()
		if err := ifr.SetInet4Addr(a[:]); err != nil {
			return err
		}
		if err := unix.IoctlIfreq(fd, set.req, ifr); err != nil {
			return err
		}
	}
	return ifUp(fd, iface)
}

// netmask is the IPv4 mask of a prefix length.
func netmask(bits int) netip.Addr {
	m := ^uint32(0) << (32 - bits)
	return netip.AddrFrom4([4]byte{byte(m >> 24), byte(m >> 16), byte(m >> 8), byte(m)})
}

// ifUp sets IFF_UP on an interface, through an AF_INET socket fd.
func ifUp(fd int, iface string) error {
	ifr, err := unix.NewIfreq(iface)
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}
