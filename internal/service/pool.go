package service

import (
	"context"
	"fmt"
	"time"

	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/sandbox/image"
	"github.com/hutchsandbox/hutch/internal/settings"
)

// poolInterval is how often the daemon checks the warm pool besides
// after each hand-out: members a crash left behind, a size changed in
// settings.
const poolInterval = 15 * time.Second

// KeepPool keeps the warm pool of image mode (mode's image, and every
// image a command was served from) at sandbox.pool ready runtimes per
// image until ctx ends, then removes the ready ones: the pool lives as
// long as the daemon that fills it. Other modes keep no pool. Where the
// engine or this process cannot keep one (Podman, a remote engine, not
// root) it says why once and returns.
func (s *Service) KeepPool(ctx context.Context, mode sandbox.Mode) {
	if mode.Kind != sandbox.KindImage {
		return
	}
	rt, err := s.runtime(ctx, mode)
	if err != nil {
		s.log.Warn("the warm pool is not kept", "error", err)
		return
	}
	ir, ok := rt.(*image.Runtime)
	if !ok {
		return // a test put another runtime in place
	}
	if why := ir.PoolUnusable(); why != "" {
		s.log.Info("no warm pool: "+why, "setting", "sandbox.pool")
		return
	}
	if err := ir.SweepPool(ctx); err != nil {
		s.log.Warn("clear what earlier warm pools left", "error", err)
	}
	ir.KeepPool(ctx, s.PoolSize, poolInterval)
	// Not ctx: it has ended.
	dctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := ir.DrainPool(dctx); err != nil {
		s.log.Warn("remove the warm pool", "error", err)
	}
}

// PoolSize is sandbox.pool now (read at each call, so a change applies
// at the next fill); a settings file that cannot be read keeps no pool.
func (s *Service) PoolSize() int {
	rs, err := settings.LoadRuntime(settings.GlobalPath(s.layout.StateDir))
	if err != nil {
		s.log.Warn("the warm pool keeps nothing while the settings cannot be read", "error", err)
		return 0
	}
	return rs.PoolSize()
}

// PoolBanner says, in a line of hutch serve's banner, what warm pool the
// daemon keeps for mode (image mode).
func (s *Service) PoolBanner(ctx context.Context, mode sandbox.Mode) string {
	n := s.PoolSize()
	if n == 0 {
		return "off (sandbox.pool is 0)"
	}
	rt, err := s.runtime(ctx, mode)
	if err != nil {
		return "off (" + err.Error() + ")"
	}
	if ir, ok := rt.(*image.Runtime); ok {
		if why := ir.PoolUnusable(); why != "" {
			return "off: " + why
		}
	}
	return fmt.Sprintf("%d started runtime(s) ready per image in use (sandbox.pool)", n)
}
