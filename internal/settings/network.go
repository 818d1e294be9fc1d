package settings

import (
	"strings"

	"github.com/hutchsandbox/hutch/internal/netpolicy"
)

// Network is a conversation's effective egress policy and where it came
// from, for enforcing and for display.
type Network struct {
	Mode  netpolicy.Mode
	Allow []string
	// Origin is "conversation", "global" or "default".
	Origin string
}

// ResolveNetwork is the egress policy of a conversation: its own
// sandbox.network when set, else the global one, else the default. The
// allowlist travels with the mode: a conversation that sets its own mode
// takes its own allowlist when it has one, the global one otherwise.
//
// The default is open for containers and pods (the seeds' agents install
// packages and fetch pages; nothing breaks on upgrade) and, for a microVM,
// which has no route of its own, allowlist when sandbox.network.allow
// names hosts and none when it does not, as before this setting existed.
func ResolveNetwork(global, conv Runtime, microVM bool) Network {
	n := Network{Mode: global.Network, Allow: global.NetworkAllow, Origin: "global"}
	if conv.Network != "" {
		n.Mode, n.Origin = conv.Network, "conversation"
	}
	if len(conv.NetworkAllow) > 0 {
		n.Allow = conv.NetworkAllow
	}
	if n.Mode == "" {
		n.Origin = "default"
		n.Mode = netpolicy.ModeOpen
		if microVM {
			n.Mode = netpolicy.ModeNone
			if len(n.Allow) > 0 {
				n.Mode = netpolicy.ModeAllowlist
			}
		}
	}
	return n
}

// Policy is what the egress proxy enforces. The allowlist was checked
// when it was set; an entry that no longer parses allows nothing.
func (n Network) Policy() netpolicy.Policy {
	p := netpolicy.Policy{Mode: n.Mode}
	if n.Mode == netpolicy.ModeAllowlist {
		p.Allow, _ = netpolicy.ParseAllowlist(n.Allow)
	}
	return p
}

// Describe renders the policy for status lines: "allowlist
// (github.com, *.npmjs.org), from the conversation's settings".
func (n Network) Describe() string {
	s := string(n.Mode)
	switch n.Mode {
	case netpolicy.ModeOpen:
		s += " (a route to anywhere)"
	case netpolicy.ModeAllowlist:
		if len(n.Allow) == 0 {
			s += " (no host listed: nothing gets through)"
		} else {
			s += " (" + strings.Join(n.Allow, ", ") + ")"
		}
	case netpolicy.ModeNone:
		s += " (no route)"
	}
	switch n.Origin {
	case "conversation":
		return s + ", from the conversation's settings"
	case "global":
		return s + ", from the global settings"
	}
	return s + ", the default"
}
