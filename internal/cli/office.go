package cli

import (
	"fmt"
	"os"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/hutchsandbox/hutch/internal/office"
	"github.com/hutchsandbox/hutch/internal/projection"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/service"
	"github.com/hutchsandbox/hutch/internal/vault"
)

func newOfficeCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "office",
		Short: "Inspect conversation offices: keys, registry, door policy, projection",
		Long: `Every conversation owns one directory under the workspace root, its office,
named by its office key v1-<platform>-<readable-id>-<digest>. The digest
comes from the platform and the raw conversation id, so two ids that read
alike (foo:bar, foo.bar) still get different offices.`,
	}
	cmd.AddCommand(newOfficeKeyCmd(g), newOfficeListCmd(g), newOfficeShowCmd(g), newOfficeChannelKindCmd(g))
	return cmd
}

func newOfficeKeyCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "key <platform> <conversation-id>",
		Short: "Print the office key of a conversation",
		Long: `Print the office key of a conversation. Nothing is created or recorded.

The conversation id is the platform's raw id: non-empty, not . or .., with
no / or \ and no control characters.`,
		Example: "  hutch office key slack C0123ABC\n  hutch office key telegram -100200300",
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			addr, err := office.NewAddress(args[0], args[1])
			if err != nil {
				return err
			}
			fmt.Fprintln(g.stdout, addr.Key())
			return nil
		},
	}
}

func newOfficeListCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the registered offices",
		Long: `List every office recorded in the office registry
(<state-dir>/office-registry.json). An office is recorded before its
directory is ever created, so this is the full list of conversations hutch
has worked for.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			svc, err := g.service()
			if err != nil {
				return err
			}
			recs, err := svc.Offices()
			if err != nil {
				return err
			}
			if len(recs) == 0 {
				fmt.Fprintf(g.stdout, "No offices registered in %s.\n", svc.Layout().StateDir)
				return nil
			}
			fmt.Fprintf(g.stdout, "Offices (%d):\n", len(recs))
			tw := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "  PLATFORM\tCONVERSATION\tOFFICE KEY\tRECORDED")
			for _, r := range recs {
				addr := office.Address{Platform: r.Platform, ConversationID: r.ConversationID}
				fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", r.Platform, r.ConversationID, addr.Key(), r.RecordedAt.UTC().Format("2006-01-02 15:04:05Z"))
			}
			return tw.Flush()
		},
	}
}

func newOfficeShowCmd(g *globals) *cobra.Command {
	var modeFlag, user string
	cmd := &cobra.Command{
		Use:   "show <platform>/<conversation-id>",
		Short: "Show a conversation's office, door policy and projection",
		Long: `Show a conversation's office key, its host directory, the effective door
policy and where it came from (a conversation setting, the global setting,
or the recorded channel kind), and the projection: each path the runtime
of --sandbox would see, with its host path and whether it is read-write.
If the mode cannot enforce the policy, the refusal a command would get is
shown too. Nothing is created.`,
		Example: "  hutch office show slack/C0123ABC\n  hutch office show slack/C0123ABC --sandbox image:debian:12",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			addr, err := office.ParseAddress(args[0])
			if err != nil {
				return err
			}
			mode, err := sandbox.ParseMode(modeFlag)
			if err != nil {
				return err
			}
			svc, err := g.service()
			if err != nil {
				return err
			}
			pol, err := svc.Resolve(addr, mode, user)
			if err != nil {
				return err
			}
			printPolicy(g, pol)
			return nil
		},
	}
	cmd.Flags().StringVar(&modeFlag, "sandbox", sandbox.DefaultMode.String(), "mode to plan the projection for: host, container:<name>, image:<image>, cloudflare:<id>, gondolin:default")
	cmd.Flags().StringVar(&user, "user", "", "platform user whose vault host mode uses")
	return cmd
}

func printPolicy(g *globals, p service.Policy) {
	w := g.stdout
	dirState := "not created yet"
	if fi, err := os.Lstat(p.Dir); err == nil && fi.IsDir() {
		dirState = "exists"
	}
	caps := sandbox.CapabilitiesOf(p.Mode.Kind)
	fmt.Fprintf(w, "Conversation:  %s\n", p.Address)
	fmt.Fprintf(w, "Office key:    %s\n", p.Key)
	fmt.Fprintf(w, "Office dir:    %s (%s)\n", p.Dir, dirState)
	fmt.Fprintf(w, "State dir:     %s\n", p.StateDir)
	fmt.Fprintf(w, "Sandbox:       %s (%s)\n", p.Mode, caps.Recommendation)
	fmt.Fprintf(w, "Door policy:   %s\n", service.Describe(p.Decision))
	if p.Decision.Warning != "" {
		fmt.Fprintf(w, "Warning:       %s\n", p.Decision.Warning)
	}
	fmt.Fprintf(w, "Projection:    %s\n", p.Projection)
	if len(p.Mounts) > 0 {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  HOST PATH\tRUNTIME PATH\tACCESS")
		for _, m := range p.Mounts {
			fmt.Fprintf(tw, "  %s\t%s\t%s\n", m.HostPath, m.RuntimePath, access(m))
		}
		tw.Flush()
	}
	switch {
	case p.VaultKey == "":
		fmt.Fprintf(w, "Vault:         none (host mode uses the vault of --user)\n")
	default:
		var env, files int
		for _, e := range p.Vault {
			if e.Kind == vault.EntryEnv {
				env++
			} else {
				files++
			}
		}
		fmt.Fprintf(w, "Vault:         %s (%d env, %d files)\n", p.VaultKey, env, files)
	}
	switch {
	case p.Refusal != nil:
		fmt.Fprintf(w, "Refused:       %s\n", p.Refusal)
	case !service.Runnable(p.Mode):
		fmt.Fprintf(w, "Admitted:      yes, but this build cannot run %s: yet\n", p.Mode.Kind)
	default:
		fmt.Fprintf(w, "Admitted:      yes\n")
	}
}

func access(m projection.Mount) string {
	if m.ReadOnly {
		return "ro"
	}
	return "rw"
}

func newOfficeChannelKindCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "channel-kind <platform>/<conversation-id> <kind>",
		Short: "Record the platform's channel kind of a conversation",
		Long: `Record what kind of channel a conversation is, as a chat adapter would:
public_channel, private_channel, im (a direct message) or external (shared
with another organisation).

Without an explicit door policy the kind decides it: public_channel gets
trusted/shared-support/public, private_channel gets
trusted/shared-support/private, and im, external or no kind get isolated.`,
		Example: "  hutch office channel-kind slack/C0123ABC public_channel",
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			addr, err := office.ParseAddress(args[0])
			if err != nil {
				return err
			}
			svc, err := g.service()
			if err != nil {
				return err
			}
			if err := svc.SetChannelKind(addr, args[1]); err != nil {
				return err
			}
			pol, err := svc.Resolve(addr, sandbox.DefaultMode, "")
			if err != nil {
				return err
			}
			fmt.Fprintf(g.stdout, "Recorded channel kind %s for %s.\nDoor policy:   %s\n", args[1], addr, service.Describe(pol.Decision))
			return nil
		},
	}
}
