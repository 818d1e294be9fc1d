package cli

import (
	"os"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/hutchsandbox/hutch/internal/api"
	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/office"
	"github.com/hutchsandbox/hutch/internal/projection"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/service"
	"github.com/hutchsandbox/hutch/internal/settings"
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
	cmd.AddCommand(newOfficeKeyCmd(g), newOfficeListCmd(g), newOfficeShowCmd(g), newOfficeChannelKindCmd(g),
		newOfficeClaimCmd(g), newOfficePlatformsCmd(g))
	cmd.AddCommand(newOfficeForgetFailedCmd(g))
	return cmd
}

func newOfficeKeyCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "key (<platform>/<conversation-id> | <platform> <conversation-id>)",
		Short: "Print the office key of a conversation",
		Long: `Print the office key of a conversation. Nothing is created or recorded.

The conversation is written as everywhere else (slack/C0123ABC) or as two
words (slack C0123ABC). The conversation id is the platform's raw id:
non-empty, not . or .., with no / or \ and no control characters. A
negative id, as Telegram's group ids are, needs no -- before it.`,
		Example: "  hutch office key slack/C0123ABC\n  hutch office key telegram -100200300",
		Args:    cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			var addr office.Address
			var err error
			if len(args) == 1 {
				addr, err = office.ParseAddress(args[0])
			} else {
				addr, err = office.NewAddress(args[0], args[1])
			}
			if err != nil {
				return err
			}
			return printf(g.stdout, "%s\n", addr.Key())
		},
	}
}

func newOfficeListCmd(g *globals) *cobra.Command {
	var asJSON, quiet bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the registered offices",
		Long: `List every office recorded in the office registry
(<state-dir>/office-registry.json). An office is recorded before its
directory is ever created, so this is the full list of conversations hutch
has worked for. Migrations from the raw-id layout that are not finished
(needs-owner, prepared, moving, failed) follow, with their errors.

--json prints what GET /v1/offices answers: an array of {platform,
conversationId, officeKey, recordedAt}; unfinished migrations are then
only counted, in a note on stderr. -q prints one conversation a line
(<platform>/<conversation-id>), as other commands take it.`,
		Example: "  hutch office list\n  hutch office list --json | jq -r '.[].officeKey'\n  hutch office list -q",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if asJSON && quiet {
				return errdefs.New(errdefs.ErrInvalid, "Give --json or --quiet, not both")
			}
			svc, err := g.service()
			if err != nil {
				return err
			}
			pending, err := svc.PendingMigrations()
			if err != nil {
				return err
			}
			if asJSON {
				// The API's own answer, which reads the registry itself.
				body, err := api.OfficeList(svc)
				if err != nil {
					return err
				}
				if n := len(pending); n > 0 {
					note(g.stderr, "hutch: %d migration%s from the raw-id layout not finished; hutch office list shows them\n", n, plural(n, "", "s"))
				}
				_, err = g.stdout.Write(body)
				return err
			}
			recs, err := svc.Offices()
			if err != nil {
				return err
			}
			switch {
			case quiet:
				out := &printer{w: g.stdout}
				for _, r := range recs {
					out.println(office.Address{Platform: r.Platform, ConversationID: r.ConversationID}.String())
				}
				return out.err
			}
			if len(recs) == 0 {
				if err := printf(g.stdout, "No offices registered in %s.\n", svc.Layout().StateDir); err != nil {
					return err
				}
			} else {
				if err := printf(g.stdout, "Offices (%d):\n", len(recs)); err != nil {
					return err
				}
				tw := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
				out := &printer{w: tw}
				out.println("  PLATFORM\tCONVERSATION\tOFFICE KEY\tRECORDED")
				for _, r := range recs {
					addr := office.Address{Platform: r.Platform, ConversationID: r.ConversationID}
					out.printf("  %s\t%s\t%s\t%s\n", r.Platform, r.ConversationID, addr.Key(), r.RecordedAt.UTC().Format("2006-01-02 15:04:05Z"))
				}
				if err := out.flush(tw); err != nil {
					return err
				}
			}
			if len(pending) == 0 {
				return nil
			}
			if err := printf(g.stdout, "Pending migrations (%d):\n", len(pending)); err != nil {
				return err
			}
			tw := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
			out := &printer{w: tw}
			out.println("  STATUS\tCONVERSATION\tOWNER\tSOURCE\tERROR")
			for _, m := range pending {
				owner := string(m.OwnerPlatform)
				if owner == "" {
					owner = "-"
				}
				out.printf("  %s\t%s\t%s\t%s\t%s\n", m.Status, m.RawConversationID, owner, m.SourceDir, m.Error)
			}
			return out.flush(tw)
		},
	}
	jsonFlag(cmd, &asJSON)
	quietFlag(cmd, &quiet, "the conversations")
	return cmd
}

func newOfficeShowCmd(g *globals) *cobra.Command {
	var modeFlag, user string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "show <platform>/<conversation-id>",
		Short: "Show a conversation's office, door policy and projection",
		Long: `Show a conversation's office key, its host directory, the effective door
policy and where it came from (a conversation setting, the global setting,
or the recorded channel kind), and the projection: each path the runtime
of --sandbox would see, with its host path and whether it is read-write.
If the mode cannot enforce the policy, the refusal a command would get is
shown too. Nothing is created.

--json prints what POST /v1/policy answers for the mode of --sandbox:
{conversation, officeKey, officeDir, officeDirExists, stateDir, sandbox,
policy, origin, warning, mounts, refusal, projection, managedProjection,
vault: {key, env, files}}.`,
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
			if asJSON {
				return printJSON(g.stdout, api.PolicyAnswerOf(pol))
			}
			return printPolicy(g, pol)
		},
	}
	jsonFlag(cmd, &asJSON)
	cmd.Flags().StringVar(&modeFlag, "sandbox", sandbox.DefaultMode.String(), "mode to plan the projection for: host, container:<name>, image:<image>, cloudflare:<id>, gondolin:default, kube:<image>")
	cmd.Flags().StringVar(&user, "user", "", "platform user whose vault host mode uses")
	return cmd
}

func printPolicy(g *globals, p service.Policy) error {
	out := &printer{w: g.stdout}
	dirState := "not created yet"
	if fi, err := os.Lstat(p.Dir); err == nil && fi.IsDir() {
		dirState = "exists"
	}
	caps := sandbox.CapabilitiesOf(p.Mode.Kind)
	out.printf("Conversation:  %s\n", p.Address)
	out.printf("Office key:    %s\n", p.Key)
	out.printf("Office dir:    %s (%s)\n", p.Dir, dirState)
	out.printf("State dir:     %s\n", p.StateDir)
	out.printf("Sandbox:       %s (%s)\n", p.Mode, caps.Recommendation)
	out.printf("Door policy:   %s\n", service.Describe(p.Decision))
	if p.Decision.Warning != "" {
		out.printf("Warning:       %s\n", p.Decision.Warning)
	}
	out.printf("Projection:    %s\n", p.Projection)
	out.printf("Managed:       managedProjection: %t\n", p.ManagedProjection)
	if len(p.Mounts) > 0 && out.err == nil {
		tw := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
		rows := &printer{w: tw}
		rows.println("  HOST PATH\tRUNTIME PATH\tACCESS")
		for _, m := range p.Mounts {
			rows.printf("  %s\t%s\t%s\n", m.HostPath, m.RuntimePath, access(m))
		}
		out.err = rows.flush(tw)
	}
	switch p.VaultKey {
	case "":
		out.printf("Vault:         none (host mode uses the vault of --user)\n")
	default:
		var env, files int
		for _, e := range p.Vault {
			if e.Kind == vault.EntryEnv {
				env++
			} else {
				files++
			}
		}
		out.printf("Vault:         %s (%d env, %d files)\n", p.VaultKey, env, files)
	}
	switch {
	case p.Refusal != nil:
		out.printf("Refused:       %s\n", p.Refusal)
	case !service.Runnable(p.Mode):
		out.printf("Admitted:      yes, but this build cannot run %s: yet\n", p.Mode.Kind)
	default:
		out.printf("Admitted:      yes\n")
	}
	return out.err
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

Without an explicit door policy a Slack conversation's kind decides it:
public_channel gets trusted/shared-support/public, private_channel gets
trusted/shared-support/private, and im, external or no kind get isolated.
Other platforms record no visibility hutch trusts: whatever kind is
recorded there, they get isolated unless a door policy is set
(hutch door set).`,
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
			return printf(g.stdout, "Recorded channel kind %s for %s.\nDoor policy:   %s\n", args[1], addr, service.Describe(pol.Decision))
		},
	}
}

func newOfficeClaimCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "claim <conversation-id> <platform>",
		Short: "Name the platform of a raw-id conversation directory",
		Long: `Name the platform that owns a conversation directory of the raw-id layout
when its id does not tell (several platforms are enabled and none or more
than one of their id formats match, as with a purely numeric id under
telegram and discord). Run it with the daemon stopped; the next start (or
hutch migrate) moves the directory to its office.

The platform must be enabled (hutch office platforms). Claiming again
replaces an earlier claim, and retries a migration that failed once its
cause is fixed.`,
		Example: "  hutch office claim 123456789 discord",
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			svc, err := g.service()
			if err != nil {
				return err
			}
			owner, err := office.ParsePlatform(args[1])
			if err != nil {
				return err
			}
			if _, running := g.daemon(cmd.Context(), svc, ""); running {
				return errdefs.New(errdefs.ErrFailedPrecondition, "A hutch daemon is serving this state dir; stop it, claim, then start it again (it migrates at start).")
			}
			if err := svc.Claim(args[0], owner); err != nil {
				return err
			}
			return printf(g.stdout, "Claimed %s for %s; the next start (or hutch migrate) moves it to its office.\n", args[0], owner)
		},
	}
}

func newOfficePlatformsCmd(g *globals) *cobra.Command {
	var clear bool
	cmd := &cobra.Command{
		Use:   "platforms [P,...]",
		Short: "Show or set the enabled platforms",
		Long: `Show or set the "platforms" setting: the platforms whose conversations this
installation serves. Migration from the raw-id layout gives every raw-id
directory to the single enabled platform, or with several to the one
whose id format alone matches. hutch serve and hutch migrate take
--platforms to override it for one run.`,
		Example: "  hutch office platforms\n  hutch office platforms slack,telegram\n  hutch office platforms --clear",
		Args:    cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			svc, err := g.service()
			if err != nil {
				return err
			}
			switch {
			case clear && len(args) > 0:
				return errdefs.New(errdefs.ErrInvalid, "Give platforms or --clear, not both")
			case clear:
				return svc.SetPlatforms(nil)
			case len(args) == 1:
				ps, err := settings.ParsePlatforms(args[0])
				if err != nil {
					return err
				}
				if len(ps) == 0 {
					return errdefs.New(errdefs.ErrInvalid, "Name at least one platform, or use --clear")
				}
				return svc.SetPlatforms(ps)
			}
			ps, err := svc.Platforms()
			if err != nil {
				return err
			}
			if len(ps) == 0 {
				return printf(g.stdout, "No platforms enabled.\n")
			}
			return printf(g.stdout, "%s\n", settings.FormatPlatforms(ps))
		},
	}
	cmd.Flags().BoolVar(&clear, "clear", false, "remove the setting")
	return cmd
}
