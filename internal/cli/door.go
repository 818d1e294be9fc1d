package cli

import (
	"github.com/spf13/cobra"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/office"
	"github.com/hutchsandbox/hutch/internal/projection"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/service"
)

const doorWordsHelp = `  default         clear the setting (the conversation falls back to the
                  global setting, then to its channel kind)
  isolated        only the conversation's own office
  shared          the office plus the workspace's MEMORY.md, skills/ and
                  events/, all read-write (trusted / shared-support / public)
  shared-private  the same, with MEMORY.md read-only
                  (trusted / shared-support / private)
  full            the whole workspace root, every office included
                  (trusted / full)`

func newDoorCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "door",
		Short: "Set which parts of the workspace a conversation's runtime sees",
		Long: `The door policy decides which host paths a conversation's runtime sees.
It is set globally or per conversation; the conversation's setting wins
field by field. A trusted door is not an extra sandbox: host mode runs
commands on the host whatever the policy.

Policies:
` + doorWordsHelp,
	}
	cmd.AddCommand(newDoorSetCmd(g))
	return cmd
}

func newDoorSetCmd(g *globals) *cobra.Command {
	var global bool
	cmd := &cobra.Command{
		Use:   "set (<platform>/<conversation-id> | --global) <policy>",
		Short: "Set the door policy of one conversation, or globally",
		Long: `Set the door policy of one conversation, or with --global the default of
every conversation that has none of its own.

Policies:
` + doorWordsHelp,
		Example: "  hutch door set slack/C0123ABC shared\n  hutch door set --global isolated\n  hutch door set slack/C0123ABC default",
		RunE: func(cmd *cobra.Command, args []string) error {
			if global && len(args) != 1 {
				return errdefs.New(errdefs.ErrInvalid, "With --global, give only the policy: hutch door set --global <policy>")
			}
			if !global && len(args) != 2 {
				return errdefs.New(errdefs.ErrInvalid, "Give a conversation and a policy: hutch door set <platform>/<conversation-id> <policy> (or --global <policy>)")
			}
			setting, err := projection.ParseDoorWord(args[len(args)-1])
			if err != nil {
				return err
			}
			svc, err := g.service()
			if err != nil {
				return err
			}
			if global {
				if err := svc.SetGlobalDoor(cmd.Context(), setting); err != nil {
					return err
				}
				if setting == nil {
					return printf(g.stdout, "Cleared the global door policy; conversations without their own fall back to their channel kind.\n")
				}
				return printf(g.stdout, "Global door policy set to %s.\n", args[0])
			}
			addr, err := office.ParseAddress(args[0])
			if err != nil {
				return err
			}
			if err := svc.SetDoor(cmd.Context(), addr, setting); err != nil {
				return err
			}
			pol, err := svc.Resolve(addr, sandbox.DefaultMode, "")
			if err != nil {
				return err
			}
			return printf(g.stdout, "Door policy of %s set to %s.\nEffective:     %s\n", addr, args[1], service.Describe(pol.Decision))
		},
	}
	cmd.Flags().BoolVar(&global, "global", false, "set the global default instead of one conversation's")
	return cmd
}
