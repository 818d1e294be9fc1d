package box

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/moby/moby/client"

	"github.com/hutchsandbox/hutch/internal/beneath"
	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/project"
)

// The engine resolves every bind source by name when it starts the
// container, and the sandbox writes the project: a mount source inside
// it (a data directory in devcontainer.json) replaced with a link to
// /var/lib/docker or ~/.ssh would be mounted read-write at the next
// start, whatever was trusted. Each start therefore opens the sources
// without following a link (beneath the project for those in it, beneath
// their parent for the others), and once the agent answers, before
// anything runs, compares them with what the container sees; a mismatch
// stops the container.

// pinMounts opens the spec's bind sources; the caller closes them.
func (b *Box) pinMounts() ([]*beneath.File, error) {
	var pins []*beneath.File
	for _, m := range b.spec.Mounts {
		if m.Type != project.MountBind {
			continue
		}
		root := filepath.Dir(m.Source)
		if m.Source == b.project || strings.HasPrefix(m.Source, b.project+"/") {
			root = b.project
		}
		f, err := beneath.Open(root, m.Source)
		if err != nil {
			beneath.CloseAll(pins)
			return nil, fmt.Errorf("mount source for %s: %w", m.Target, err)
		}
		pins = append(pins, f)
	}
	return pins, nil
}

// verifyMounts checks, through the freshly started agent, that every bind
// target is the source pinned before the start; on a mismatch it stops
// the container, which nothing has run in yet.
func (b *Box) verifyMounts(ctx context.Context, t *Target, pins []*beneath.File) error {
	i := 0
	for _, m := range b.spec.Mounts {
		if m.Type != project.MountBind {
			continue
		}
		got, err := t.agent.Identity(ctx, m.Target)
		if err != nil {
			return err
		}
		p := pins[i]
		i++
		if p.Same(got.Dev, got.Ino) {
			continue
		}
		timeout := 0
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		_, serr := b.opts.Engine.Client.ContainerStop(sctx, b.spec.Name, client.ContainerStopOptions{Timeout: &timeout})
		cancel()
		stopped := "was stopped"
		if serr != nil {
			stopped = "could not be stopped (" + serr.Error() + "); stop it"
		}
		return errdefs.New(errdefs.ErrFailedPrecondition, fmt.Sprintf(
			"The sandbox %s %s before anything ran in it: what the engine mounted at %s is not the %s hutch checked (something replaced it between the check and the start).",
			b.spec.Name, stopped, m.Target, m.Source))
	}
	return nil
}

// testHookBeforeStart, set by tests only, runs between the pinning of
// the mount sources and the start: where a racing sandbox would swap one.
var testHookBeforeStart atomic.Pointer[func(project.Spec)]
