package egress

import (
	"fmt"
	"net"
	"net/netip"
	"syscall"
	"time"

	"github.com/hutchsandbox/hutch/internal/netpolicy"
)

// refusedAddr is the error of a dial whose name resolved only to internal
// addresses that are not themselves listed.
type refusedAddr struct {
	addr netip.AddrPort
}

func (e *refusedAddr) Error() string {
	return fmt.Sprintf("%s is an internal address and is not in sandbox.network.allow", e.addr)
}

// Ranges that reach the host itself or its local networks rather than the
// internet, beyond what netip's predicates cover.
var internalPrefixes = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),      // "this network"; 0.0.0.0 reaches the host on Linux
	netip.MustParsePrefix("100.64.0.0/10"),  // shared address space: carrier NAT, tailnets
	netip.MustParsePrefix("192.0.0.0/24"),   // IETF protocol assignments
	netip.MustParsePrefix("198.18.0.0/15"),  // benchmarking, used by some local setups
	netip.MustParsePrefix("240.0.0.0/4"),    // reserved, and the broadcast address
	netip.MustParsePrefix("fec0::/10"),      // deprecated site-local
	netip.MustParsePrefix("64:ff9b:1::/48"), // local-use NAT64
}

// nat64 is the well-known NAT64 prefix: its addresses stand for the IPv4
// address in their last four bytes, which is what the check must look at.
var nat64 = netip.MustParsePrefix("64:ff9b::/96")

// internal reports whether connecting to ip would reach the host, its
// local networks or a link-local service (cloud metadata at
// 169.254.169.254) rather than a public server.
func internal(ip netip.Addr) bool {
	ip = ip.Unmap()
	if nat64.Contains(ip) {
		b := ip.As16()
		ip = netip.AddrFrom4([4]byte(b[12:]))
	}
	if ip.IsLoopback() || ip.IsPrivate() || ip.IsUnspecified() ||
		ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() ||
		ip.IsInterfaceLocalMulticast() || ip.IsMulticast() {
		return true
	}
	for _, p := range internalPrefixes {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// guardedDialer is the default dialer: the host's resolver and a Control
// hook that sees every address right before connect(2). An internal
// address is refused unless it is listed itself for that port, so a DNS
// record pointing an allowed name (or a name under an allowed wildcard) at
// 127.0.0.1 cannot reach the host's own services. The hook runs per
// address, so a name with both internal and public addresses still
// connects to a public one.
func guardedDialer(policy func() netpolicy.Policy, timeout time.Duration) *net.Dialer {
	return &net.Dialer{
		Timeout: timeout,
		Control: func(_, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return fmt.Errorf("egress: unexpected dial address %q: %w", address, err)
			}
			ap = netip.AddrPortFrom(ap.Addr().Unmap().WithZone(""), ap.Port())
			if internal(ap.Addr()) && !policy().AllowsAddr(ap) {
				return &refusedAddr{addr: ap}
			}
			return nil
		},
	}
}
