package netpolicy

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/hutchsandbox/hutch/internal/errdefs"
)

// Mode is sandbox.network: how a sandbox reaches the network.
type Mode string

const (
	// ModeOpen is a network of the runtime's own with a route to anywhere:
	// what containers had before egress policies, and still the default
	// for them (agents install packages and fetch pages).
	ModeOpen Mode = "open"
	// ModeAllowlist gives the sandbox no route at all except hutch's proxy,
	// which lets through the hosts of sandbox.network.allow.
	ModeAllowlist Mode = "allowlist"
	// ModeNone gives the sandbox no route; the proxy, when there is one for
	// placeholder secrets, refuses every host.
	ModeNone Mode = "none"
)

// Modes lists the modes in the order help texts show them.
var Modes = []Mode{ModeOpen, ModeAllowlist, ModeNone}

// ParseMode reads a sandbox.network value.
func ParseMode(s string) (Mode, error) {
	for _, m := range Modes {
		if strings.EqualFold(s, string(m)) {
			return m, nil
		}
	}
	return "", errdefs.New(errdefs.ErrInvalid,
		fmt.Sprintf("sandbox.network %q: use open, allowlist or none", s))
}

// Proxied reports whether the sandbox has no route of its own, so that
// every connection out goes through hutch's proxy.
func (m Mode) Proxied() bool { return m == ModeAllowlist || m == ModeNone }

// OrOpen is the mode with the empty value read as ModeOpen.
func (m Mode) OrOpen() Mode {
	if m == "" {
		return ModeOpen
	}
	return m
}

// Policy is what the egress proxy enforces for one sandbox.
type Policy struct {
	Mode  Mode
	Allow Allowlist
}

// Allows reports whether a client may reach host on port: every host under
// ModeOpen (the proxy still refuses internal addresses, see AllowsAddr), the
// listed ones under ModeAllowlist, none under ModeNone.
func (p Policy) Allows(host string, port int) bool {
	switch p.Mode.OrOpen() {
	case ModeOpen:
		return port >= 1 && port <= 65535
	case ModeAllowlist:
		return p.Allow.Allows(host, port)
	}
	return false
}

// AllowsAddr reports whether an internal address (loopback, private,
// link-local, ...) may be connected to: only when it is listed itself,
// whatever the mode but ModeNone.
func (p Policy) AllowsAddr(ap netip.AddrPort) bool {
	if p.Mode == ModeNone {
		return false
	}
	return p.Allow.AllowsAddr(ap)
}

// Refusal is the text a refused client gets for host:port.
func (p Policy) Refusal(host string, port int) string {
	if p.Mode == ModeNone {
		return fmt.Sprintf("hutch egress: %s is refused: sandbox.network is none", hostPort(host, port))
	}
	return fmt.Sprintf("hutch egress: %s is not in sandbox.network.allow", hostPort(host, port))
}

func hostPort(host string, port int) string {
	if strings.Contains(host, ":") && !strings.HasPrefix(host, "[") {
		host = "[" + host + "]"
	}
	return fmt.Sprintf("%s:%d", host, port)
}
