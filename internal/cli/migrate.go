package cli

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/hutchsandbox/hutch/internal/api"
	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/office"
	"github.com/hutchsandbox/hutch/internal/service"
	"github.com/hutchsandbox/hutch/internal/settings"
)

func newMigrateCmd(g *globals) *cobra.Command {
	var (
		dryRun    bool
		asJSON    bool
		platforms string
		batch     int
	)
	cmd := &cobra.Command{
		Use:   "migrate [--dry-run] [--platforms P,...] [--workspace DIR]",
		Short: "Move a workspace of the raw-id layout to offices",
		Long: `Workspaces made before offices hold one directory per raw conversation id.
This moves each to its office (<workspace>/<office-key>), with its vault
(<state-dir>/vaults/<legacy-key>) and host state
(<state-dir>/conversations/<raw-id>), and re-creates managed containers of
the old layout on the new paths, keeping their writable layer. hutch serve
does the same at its start, before it accepts work, until a migration has
completed (recorded in <state-dir>/workspace-migrated); after that it no
longer looks, since a conversation whose door grants the workspace can
make directories shaped like raw ids there. This command always looks,
runs it alone and exits.

Every move is journaled in <state-dir>/office-registry.json, so a run
killed at any point is finished by the next one. Names that are not
conversations (dot-names, MEMORY.md, skills, events, agents, office keys,
directories without log.jsonl or sessions/) are left alone.

Who owns a raw-id directory: with one enabled platform, that platform; with
several, the one whose id format alone matches (slack C0123ABC, telegram
-100123, discord 123, github GH_owner_repo_1). Anything else stops the
migration, with nothing moved, and says what to do: with no platform
enabled, enable them first (hutch office platforms); unowned directories
are claimed with hutch office claim; failed records of conversations that
are gone are cleared with hutch office forget-failed; where both the
legacy and the office directory exist, you merge them by hand. Vaults the
oldest releases named by the sanitized raw id (<state-dir>/vaults/c0123abc)
move too, or stop the migration when the name fits no single
conversation, and so do containers not managed by hutch that bind a
raw-id path.

--dry-run prints the plan and exits 1 when anything would stop the
migration, 0 when it would run to the end. With --json the plan is one
JSON object: {workspace, platforms, moves, steps, skipped, blockers}
(docs/api.md, "Machine-readable output"), printed before the exit 1.

Enabled platforms come from --platforms, else the "platforms" setting
(hutch office platforms), else those recorded by the last migration.`,
		Example: "  hutch migrate --dry-run --platforms slack,telegram\n  hutch migrate --dry-run --json | jq .blockers\n  hutch migrate --workspace /srv/agents",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if asJSON && !dryRun {
				return errdefs.New(errdefs.ErrInvalid, "--json goes with --dry-run: a migration prints only what it did")
			}
			svc, err := g.service()
			if err != nil {
				return err
			}
			ps, err := platformsFlag(platforms)
			if err != nil {
				return err
			}
			if !dryRun {
				if _, running := g.daemon(cmd.Context(), svc, ""); running {
					return errdefs.New(errdefs.ErrFailedPrecondition, "A hutch daemon is serving this state dir; it migrated at its start. Stop it to run hutch migrate.")
				}
			}
			return runMigrate(cmd.Context(), g, svc, service.MigrateOptions{Platforms: ps, DryRun: dryRun, Batch: batch}, migrateOutput{verbose: true, json: asJSON})
		},
	}
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print every move and every blocker; change nothing")
	jsonFlag(cmd, &asJSON)
	cmd.Flags().StringVar(&platforms, "platforms", "", "enabled platforms, comma-separated (slack,discord,telegram,github,web)")
	// Moves per pair of journal writes; tests use small batches to stop a
	// run between them.
	cmd.Flags().IntVar(&batch, "batch", 0, "moves per journal batch")
	_ = cmd.Flags().MarkHidden("batch")
	return cmd
}

// platformsFlag parses --platforms; "" (not given) is nil, so the
// setting applies.
func platformsFlag(s string) ([]office.Platform, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	return settings.ParsePlatforms(s)
}

// migrateOutput is how runMigrate reports.
type migrateOutput struct {
	// verbose prints a line when there was nothing to do (hutch serve
	// stays quiet then).
	verbose bool
	// json prints a dry run's plan as api.MigratePlan.
	json bool
}

// runMigrate migrates and reports; a dry run prints its plan.
func runMigrate(ctx context.Context, g *globals, svc *service.Service, o service.MigrateOptions, how migrateOutput) error {
	o.Hook = testHook(g)
	o.Progress = func(done, total int) {
		if total >= progressThreshold {
			note(g.stderr, "hutch: migrated %d of %d conversations\n", done, total)
		}
	}
	rep, err := svc.Migrate(ctx, o)
	if rep.ContainerCheckError != nil {
		note(g.stderr, "hutch: warning: containers not managed by hutch were not checked for raw-id paths: %v\n", rep.ContainerCheckError)
	}
	if o.DryRun {
		if err != nil {
			return err
		}
		show := printPlan
		if how.json {
			show = printPlanJSON
		}
		if err := show(g.stdout, svc, rep); err != nil {
			return err
		}
		// A script (or an operator's && chain) must not take a plan that
		// cannot run for one that can.
		if n := len(rep.Plan.Blockers()); n > 0 {
			return &exitError{code: 1, msg: fmt.Sprintf("%d blocker%s: hutch migrate would stop without moving anything.", n, plural(n, "", "s"))}
		}
		return nil
	}
	if err != nil {
		return err
	}
	out := &printer{w: g.stdout}
	moved := rep.Moved + rep.Recovered + rep.HostMoved
	switch {
	case moved > 0:
		out.printf("Migrated %d conversation director%s to offices (%d finished from an interrupted run), %d vault and host state director%s.\n",
			rep.Moved+rep.Recovered, plural(rep.Moved+rep.Recovered, "y", "ies"), rep.Recovered, rep.HostMoved, plural(rep.HostMoved, "y", "ies"))
	case how.verbose:
		out.println("Nothing to migrate: the workspace is on the office layout.")
	}
	if n := len(rep.Containers.Migrated) + len(rep.Containers.Resumed); n > 0 {
		out.printf("Re-created %d managed container%s on the office paths, keeping their files.\n", n, plural(n, "", "s"))
	}
	if rep.RelayoutError != nil {
		note(g.stderr, "hutch: warning: %v; the next start tries again\n", rep.RelayoutError)
	}
	return out.err
}

// progressThreshold is the number of moves from which progress is shown.
const progressThreshold = 1000

func printPlan(w io.Writer, svc *service.Service, rep service.MigrateReport) error {
	out := &printer{w: w}
	names := make([]string, len(rep.Platforms))
	for i, p := range rep.Platforms {
		names[i] = string(p)
	}
	enabled := strings.Join(names, ", ")
	if enabled == "" {
		enabled = "none"
	}
	out.printf("Migration plan for %s (enabled platforms: %s)\n", svc.Layout().Workspace, enabled)
	steps := rep.Plan.Steps()
	if len(steps) == 0 {
		out.println("No moves.")
	} else {
		out.printf("Moves (%d):\n", len(steps))
		for _, s := range steps {
			out.println("  " + s)
		}
	}
	if len(rep.Plan.Skipped) > 0 {
		out.printf("Left alone (%d):\n", len(rep.Plan.Skipped))
		for _, s := range rep.Plan.Skipped {
			out.printf("  %s  (%s)\n", s.Name, s.Reason)
		}
	}
	if s := rep.Plan.Summary(); s != "" {
		out.println(s)
		out.println("Nothing will move until every blocker is resolved.")
	}
	return out.err
}

// printPlanJSON prints the plan of a dry run as api.MigratePlan.
func printPlanJSON(w io.Writer, svc *service.Service, rep service.MigrateReport) error {
	out := api.MigratePlan{Workspace: svc.Layout().Workspace, Platforms: []string{}, Moves: []api.MigrateMove{},
		Steps: []string{}, Skipped: []api.MigrateSkip{}, Blockers: []string{}}
	for _, p := range rep.Platforms {
		out.Platforms = append(out.Platforms, string(p))
	}
	for _, m := range rep.Plan.Moves {
		out.Moves = append(out.Moves, api.MigrateMove{RawID: m.RawID, Platform: string(m.Owner), OfficeKey: string(m.Key), Source: m.Source, Target: m.Target})
	}
	out.Steps = append(out.Steps, rep.Plan.Steps()...)
	for _, s := range rep.Plan.Skipped {
		out.Skipped = append(out.Skipped, api.MigrateSkip{Name: s.Name, Reason: s.Reason})
	}
	out.Blockers = append(out.Blockers, rep.Plan.Blockers()...)
	return printJSON(w, out)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// testHook returns the crash-injection hook of HUTCH_TEST_MIGRATE_HOOK
// ("<point>" or "<point>:<n>", n counting from 1): at the n-th time the
// migration passes that point it says so on stderr and stops dead, so a
// test can kill -9 the process there. Unset, it is nil.
func testHook(g *globals) func(string) {
	spec := g.env("HUTCH_TEST_MIGRATE_HOOK")
	if spec == "" {
		return nil
	}
	point, nth, _ := strings.Cut(spec, ":")
	want, err := strconv.Atoi(nth)
	if err != nil || want < 1 {
		want = 1
	}
	seen := 0
	return func(p string) {
		if p != point {
			return
		}
		if seen++; seen == want {
			note(g.stderr, "hutch-test-hook: %s\n", p)
			for {
				time.Sleep(time.Hour)
			}
		}
	}
}
