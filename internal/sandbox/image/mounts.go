package image

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/moby/moby/client"

	"github.com/hutchsandbox/hutch/internal/beneath"
	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/sandbox"
)

// The engine resolves a bind mount's source by name each time it starts
// a container. A runtime whose door grants the workspace (full) can
// rename any office, or MEMORY.md, and put a link in its place, pointing
// at hutch's state dir or anywhere on the host; a check by path before
// the start proves nothing about what the engine then mounts. So each
// start pins the sources (opened beneath the workspace, no link
// followed) and, once the agent answers and before any command runs,
// asks it which file each mount target is: a mismatch removes the
// container.

// pinMounts opens every mount source of spec. The caller closes them.
func (r *Runtime) pinMounts(spec sandbox.Spec) ([]*beneath.File, error) {
	pins := make([]*beneath.File, 0, len(spec.Mounts))
	for _, m := range spec.Mounts {
		root := filepath.Dir(m.HostPath)
		if ws := r.cfg.Workspace; ws != "" && (m.HostPath == ws || strings.HasPrefix(m.HostPath, ws+"/")) {
			root = ws
		}
		f, err := beneath.Open(root, m.HostPath)
		if err != nil {
			beneath.CloseAll(pins)
			return nil, fmt.Errorf("mount source for %s: %w", m.RuntimePath, err)
		}
		pins = append(pins, f)
	}
	return pins, nil
}

// verifyMounts checks, through the container's freshly started agent,
// that every mount target is the source pinned before the start. On a
// mismatch it removes the container: nothing has run in it yet.
// It also seals the socket dir: every start passes here once its agent
// listens, before any command.
func (r *Runtime) verifyMounts(ctx context.Context, s *session, id string, spec sandbox.Spec, pins []*beneath.File) error {
	r.sealChannel(s)
	cl, err := r.clientLocked(s)
	if err != nil {
		return err
	}
	for i, m := range spec.Mounts {
		got, err := cl.Identity(ctx, m.RuntimePath)
		if err != nil {
			return err
		}
		if pins[i].Same(got.Dev, got.Ino) {
			continue
		}
		r.log.Warn("a mount source changed between its check and the container's start; removing the container",
			"office_key", s.Key, "source", m.HostPath, "target", m.RuntimePath)
		if _, rerr := r.api.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true}); rerr != nil {
			r.log.Warn("could not remove the container", "office_key", s.Key, "error", rerr)
		}
		return errdefs.New(errdefs.ErrFailedPrecondition, fmt.Sprintf(
			"Container %s was removed before anything ran in it: what the engine mounted at %s is not the %s hutch checked (something replaced it between the check and the start). Nothing ran; the next command tries again.",
			ContainerName(s.Key), m.RuntimePath, m.HostPath))
	}
	return nil
}
