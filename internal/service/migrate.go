package service

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"

	"github.com/hutchsandbox/hutch/internal/atomicfile"
	"github.com/hutchsandbox/hutch/internal/engine"
	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/migrate"
	"github.com/hutchsandbox/hutch/internal/migrate/apply"
	"github.com/hutchsandbox/hutch/internal/office"
	"github.com/hutchsandbox/hutch/internal/sandbox/image"
	"github.com/hutchsandbox/hutch/internal/settings"
	"github.com/hutchsandbox/hutch/internal/vault"
)

// MigrateOptions say how to run the raw-id layout migration.
type MigrateOptions struct {
	// Platforms are the enabled platforms; nil takes the "platforms"
	// setting, then the platforms the registry recorded last time.
	Platforms []office.Platform
	DryRun    bool
	// Batch is apply.Options.Batch (0: the default).
	Batch    int
	Progress func(done, total int)
	// Hook is apply.Options.Hook (crash-injection tests).
	Hook func(point string)
	// Startup marks the run at a daemon's start. Once a migration has
	// completed, a start no longer looks at the workspace: a conversation
	// whose door grants the workspace can make raw-id-shaped directories
	// there, which would otherwise stop the next start on a conflict or be
	// moved into the office of a conversation that does not exist yet.
	// `hutch migrate`, run by the operator, always looks.
	Startup bool
}

// migratedMarker, in the state dir, records that a migration completed:
// from then on the workspace is on the office layout.
const migratedMarker = "workspace-migrated"

// MigrateReport is what a migration did or, on a dry run, would do.
type MigrateReport struct {
	apply.Report
	Platforms []office.Platform
	// Containers is what bringing managed containers onto the office
	// paths did (zero when there was nothing to bring or no engine).
	Containers image.RelayoutReport
	// Skipped is set when a start did not look at the workspace because a
	// migration completed before (see MigrateOptions.Startup).
	Skipped bool
}

// Platforms returns the enabled platforms: the "platforms" setting, else
// what the registry recorded at the last migration.
func (s *Service) Platforms() ([]office.Platform, error) {
	ps, err := settings.LoadPlatforms(settings.GlobalPath(s.layout.StateDir))
	if err != nil || len(ps) > 0 {
		return ps, err
	}
	f, err := s.registry.Load()
	if err != nil {
		return nil, err
	}
	return f.EnabledPlatforms, nil
}

// SetPlatforms stores the "platforms" setting.
func (s *Service) SetPlatforms(ps []office.Platform) error {
	return settings.SetPlatforms(settings.GlobalPath(s.layout.StateDir), ps)
}

// Migrate moves a workspace of the raw-id layout (and the vaults and host
// state that go with it) to offices, journaled in the office registry.
// It must run before any work is accepted: `hutch serve` calls it at every
// start and `hutch migrate` on its own. Blockers return an error of class
// ErrFailedPrecondition whose message is the operator's instructions.
func (s *Service) Migrate(ctx context.Context, o MigrateOptions) (MigrateReport, error) {
	ps := o.Platforms
	if ps == nil {
		var err error
		if ps, err = s.Platforms(); err != nil {
			return MigrateReport{}, err
		}
	}
	rep := MigrateReport{Platforms: ps}
	marker := filepath.Join(s.layout.StateDir, migratedMarker)
	if o.Startup && !o.DryRun {
		if _, err := os.Stat(marker); err == nil {
			rep.Skipped = true
			return rep, nil
		}
	}
	var err error
	rep.Report, err = apply.Run(ctx, apply.Options{
		Workspace: s.layout.Workspace,
		StateDir:  s.layout.StateDir,
		Registry:  s.registry,
		Enabled:   ps,
		DryRun:    o.DryRun,
		Batch:     o.Batch,
		Progress:  o.Progress,
		Hook:      o.Hook,
		Relayout: func(ctx context.Context, moves []migrate.Move) error {
			var err error
			rep.Containers, err = s.relayout(ctx, moves)
			return err
		},
		Containers: s.foreignContainers,
	})
	if err == nil && rep.RelayoutError != nil {
		s.log.Warn("managed containers of the raw-id layout were not brought onto the office paths; the next start tries again", "error", rep.RelayoutError)
	}
	if err == nil && !o.DryRun && rep.RelayoutError == nil {
		text := "The workspace is on the office layout: hutch serve no longer migrates at start; hutch migrate still does.\n"
		if werr := atomicfile.WriteFile(marker, []byte(text), 0o600); werr != nil {
			return rep, fmt.Errorf("record the completed migration: %w", werr)
		}
	}
	return rep, err
}

// relayout re-creates managed containers of the raw-id layout on the
// office paths. Without committed moves there is nothing to do and no
// engine is contacted, so host-mode installations never need one.
func (s *Service) relayout(ctx context.Context, moves []migrate.Move) (image.RelayoutReport, error) {
	if len(moves) == 0 {
		return image.RelayoutReport{}, nil
	}
	s.rt.mu.Lock()
	eng, err := s.engineLocked(ctx)
	s.rt.mu.Unlock()
	if err != nil {
		return image.RelayoutReport{}, fmt.Errorf("managed containers not checked: %w", err)
	}
	lms := make([]image.LayoutMove, 0, len(moves))
	for _, m := range moves {
		lms = append(lms, image.LegacyLayoutMove(s.layout.Workspace, s.layout.StateDir, m.RawID, vault.ConversationKey(m.RawID), string(m.Owner), string(m.Key)))
	}
	rep, err := image.Relayout(ctx, eng, s.layout.StateDir, lms, s.log)
	if err == nil && len(rep.Failed) > 0 {
		names := make([]string, 0, len(rep.Failed))
		for n := range rep.Failed {
			names = append(names, n)
		}
		slices.Sort(names)
		err = errdefs.New(errdefs.ErrUnavailable, fmt.Sprintf("%d managed container(s) left on the raw-id layout: %v", len(names), names))
	}
	return rep, err
}

// foreignContainers lists the engine's containers that hutch does not
// manage (no hutch.managed label), with the host sources of their bind
// mounts: an earlier installation's containers bound to raw-id paths are
// among them. The listing carries the mounts, so one call does.
func (s *Service) foreignContainers(ctx context.Context) ([]migrate.Container, error) {
	s.rt.mu.Lock()
	eng, err := s.engineLocked(ctx)
	s.rt.mu.Unlock()
	if err != nil {
		return nil, err
	}
	res, err := eng.Client.ContainerList(ctx, client.ContainerListOptions{All: true})
	if err != nil {
		return nil, engine.Classify(err, "list containers")
	}
	var out []migrate.Container
	for _, c := range res.Items {
		if c.Labels[engine.LabelManaged] == "true" {
			continue
		}
		mc := migrate.Container{ID: c.ID, Name: c.ID}
		if len(c.Names) > 0 {
			mc.Name = strings.TrimPrefix(c.Names[0], "/")
		}
		for _, m := range c.Mounts {
			if m.Type == mount.TypeBind {
				mc.Sources = append(mc.Sources, m.Source)
			}
		}
		if len(mc.Sources) > 0 {
			out = append(out, mc)
		}
	}
	return out, nil
}

// ForgetFailed clears failed migration records of the workspace (those
// of ids, or all): see apply.ForgetFailed.
func (s *Service) ForgetFailed(ids []string) ([]office.MigrationRecord, error) {
	return apply.ForgetFailed(s.registry, s.layout.Workspace, ids)
}

// Claim names the owner of an unowned raw-id conversation; the next
// migration moves it. The owner must be an enabled platform.
func (s *Service) Claim(rawID string, owner office.Platform) error {
	ps, err := s.Platforms()
	if err != nil {
		return err
	}
	return apply.Claim(s.registry, s.layout.Workspace, s.layout.StateDir, ps, rawID, owner)
}

// PendingMigrations returns the migration records not yet committed
// (needs-owner, prepared, moving, failed), as `hutch office list` shows
// them.
func (s *Service) PendingMigrations() ([]office.MigrationRecord, error) {
	f, err := s.registry.Load()
	if err != nil {
		return nil, err
	}
	var out []office.MigrationRecord
	for _, m := range f.Migrations {
		if m.Status != office.MigrationCommitted {
			out = append(out, m)
		}
	}
	slices.SortFunc(out, func(a, b office.MigrationRecord) int {
		if c := strings.Compare(a.WorkspaceRoot, b.WorkspaceRoot); c != 0 {
			return c
		}
		return strings.Compare(a.RawConversationID, b.RawConversationID)
	})
	return out, nil
}
