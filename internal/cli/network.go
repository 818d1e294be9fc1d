package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/netpolicy"
	"github.com/hutchsandbox/hutch/internal/office"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/settings"
)

const networkWordsHelp = `  open       a network of the runtime's own with a route to anywhere (the
             default of image:* and kube:*; agents install packages and
             fetch pages). A command can send anything anywhere.
  allowlist  no route at all but hutch's egress proxy, which lets through
             only the hosts of --allow (sandbox.network.allow); a process
             that ignores HTTPS_PROXY gets nowhere
  none       no route; not even the proxy lets anything through
  default    clear the setting (the conversation falls back to the global
             setting, then to open; a microVM to its allowlist, or none)`

func newSandboxNetworkCmd(g *globals) *cobra.Command {
	var global bool
	var allow, modeFlag string
	cmd := &cobra.Command{
		Use:   "network (<platform>/<conversation-id> | --global) [open|allowlist|none|default] [--allow HOSTS]",
		Short: "Show or set how a conversation's runtime reaches the network",
		Long: `Show or set sandbox.network, the egress policy of one conversation's
runtime, or with --global the default of every conversation without one of
its own. With no policy word, show the effective policy in the mode
$HUTCH_SANDBOX (or --sandbox) names.

Policies:
` + networkWordsHelp + `

--allow sets the hosts, comma-separated: github.com (ports 80 and 443),
*.npmjs.org (any subdomain), registry.npmjs.org:8443 (that port only),
10.0.0.5 (an address reaches only when listed). An empty --allow "" clears
them. A new allowlist applies to the next connection; a change between open
and allowlist or none re-creates the runtime on its next command.

Vault entries marked as placeholders (hutch vault placeholder) are
substituted by the same proxy under every policy, only toward their hosts.`,
		Example: "  hutch sandbox network slack/C0123ABC\n  hutch sandbox network slack/C0123ABC allowlist --allow github.com,*.npmjs.org\n  hutch sandbox network --global none\n  hutch sandbox network slack/C0123ABC default",
		RunE: func(cmd *cobra.Command, args []string) error {
			var addr *office.Address
			if global {
				if len(args) > 1 {
					return errdefs.New(errdefs.ErrInvalid, "With --global, give only the policy: hutch sandbox network --global <open|allowlist|none|default>")
				}
			} else {
				if len(args) < 1 || len(args) > 2 {
					return errdefs.New(errdefs.ErrInvalid, "Give a conversation and, to change it, a policy: hutch sandbox network <platform>/<conversation-id> [open|allowlist|none|default] (or --global)")
				}
				a, err := office.ParseAddress(args[0])
				if err != nil {
					return err
				}
				addr, args = &a, args[1:]
			}
			svc, err := g.service()
			if err != nil {
				return err
			}
			defer func() { _ = svc.Close() }()
			// show prints the effective policy after head: globally, or
			// in the mode the conversation's commands would run in.
			show := func(global, conv string) error {
				if addr == nil {
					n, err := svc.GlobalNetwork()
					if err != nil {
						return err
					}
					return printf(g.stdout, global, n.Describe())
				}
				mode, err := g.sandboxMode(modeFlag)
				if err != nil {
					return err
				}
				n, err := svc.Network(*addr, mode)
				if err != nil {
					return err
				}
				return printf(g.stdout, conv+"%s", addr, mode, n.Describe(), enforceNote(mode, n))
			}
			allowSet := cmd.Flags().Changed("allow")
			if len(args) == 0 && !allowSet {
				return show("Global network: %s\n", "Network of %s in %s: %s\n")
			}
			word := ""
			if len(args) == 1 {
				word = args[0]
				if word != "default" {
					m, err := netpolicy.ParseMode(word)
					if err != nil {
						return err
					}
					word = string(m)
				} else {
					word = ""
				}
			} else {
				// --allow alone keeps the mode that is set.
				n, err := svc.StoredNetwork(addr)
				if err != nil {
					return err
				}
				word = string(n)
			}
			var allowP *string
			if allowSet {
				allowP = &allow
			}
			if err := svc.SetNetwork(addr, word, allowP); err != nil {
				return err
			}
			return show("Global network set.\nEffective:     %s\n", "Network of %s set.\nEffective in %s: %s\n")
		},
	}
	cmd.Flags().BoolVar(&global, "global", false, "set the global default instead of one conversation's")
	cmd.Flags().StringVar(&modeFlag, "sandbox", "", "the mode to show the effective policy in (default: $HUTCH_SANDBOX, else host)")
	cmd.Flags().StringVar(&allow, "allow", "", "hosts the allowlist lets through, comma-separated (github.com,*.npmjs.org)")
	return cmd
}

// enforceNote says, when the mode cannot hold a runtime to the policy,
// that its commands are refused rather than run with more network.
func enforceNote(mode sandbox.Mode, n settings.Network) string {
	caps := sandbox.CapabilitiesOf(mode.Kind)
	if caps.EnforcesEgress(n.Mode) {
		return ""
	}
	return fmt.Sprintf("%s cannot enforce %s, so it refuses this conversation's commands; image:* and kube:* can.\n", mode.Kind, n.Mode)
}
