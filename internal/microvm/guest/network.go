package guest

import (
	"fmt"
	"io/fs"
	"net/netip"

	"github.com/hutchsandbox/hutch/internal/agent"
	"github.com/hutchsandbox/hutch/internal/errdefs"
)

// netClassDir lists the network interfaces.
const netClassDir = "/sys/class/net"

// pickInterface returns the guest's network card in sysfs (the directory
// /sys/class/net): a hutch VM has at most one besides lo.
func pickInterface(sysfs fs.FS) (string, error) {
	entries, err := fs.ReadDir(sysfs, ".")
	if err != nil {
		return "", fmt.Errorf("list the network interfaces: %w", err)
	}
	for _, e := range entries {
		if e.Name() != "lo" {
			return e.Name(), nil
		}
	}
	return "", errdefs.New(errdefs.ErrFailedPrecondition, "Guest has no network card to configure (the VM was started without one)")
}

// configureNetwork gives the card its address and brings it up; the
// proxy is the agent's business (commands' env).
func (o *Ops) configureNetwork(n *agent.GuestNetwork) error {
	prefix, err := netip.ParsePrefix(n.Address)
	if err != nil {
		return errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("Guest network address %q: %v", n.Address, err))
	}
	iface, err := pickInterface(o.netClass)
	if err != nil {
		return err
	}
	if err := o.sys.setAddress(iface, prefix); err != nil {
		return fmt.Errorf("guest: configure %s: %w", iface, err)
	}
	o.log().Info("guest: network configured", "interface", iface, "address", prefix.String())
	return nil
}
