package cli

import (
	"github.com/spf13/cobra"
)

// newOfficeForgetFailedCmd clears failed migration records, which stop
// every migration (and so every start) until they go. Editing
// office-registry.json by hand would race the daemon's writers and skip
// the file's checks; this takes the registry's lock like every writer.
func newOfficeForgetFailedCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "forget-failed [<conversation-id>...]",
		Short: "Clear failed migration records of the raw-id layout",
		Long: `Clear the records of migrations from the raw-id layout that failed (hutch
office list shows them, with their errors), for the conversation ids
given or, with none, every one of this workspace. A failed record stops
every migration, and so every start, until it goes: use this when the
conversation is gone (for "Neither legacy source nor office target
exists"), or to let the next migration look at its directory afresh.

Only the records go: no directory, vault or office is touched. An id
whose migration did not fail is refused, and then nothing is cleared.
To retry a failed migration whose cause you fixed, claim it instead
(hutch office claim).`,
		Example: "  hutch office forget-failed C0123ABC\n  hutch office forget-failed",
		RunE: func(cmd *cobra.Command, args []string) error {
			svc, err := g.service()
			if err != nil {
				return err
			}
			removed, err := svc.ForgetFailed(args)
			if err != nil {
				return err
			}
			out := &printer{w: g.stdout}
			if len(removed) == 0 {
				out.printf("No failed migrations recorded for %s.\n", svc.Layout().Workspace)
			}
			for _, m := range removed {
				out.printf("Forgot the failed migration of %s (%s): %s\n", m.RawConversationID, m.SourceDir, m.Error)
			}
			return out.err
		},
	}
}
