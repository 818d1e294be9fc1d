package image

import (
	"context"
	"fmt"

	"github.com/docker/go-units"
	"github.com/moby/moby/client"

	"github.com/hutchsandbox/hutch/internal/engine"
	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/metrics"
	"github.com/hutchsandbox/hutch/internal/sandbox"
)

// The disk ceiling. Docker and Podman cap a container's writable layer
// (--storage-opt size) only on XFS with project quotas; on the ext4 most
// hosts run, nothing stops a command writing until the host's disk is
// full. So hutch counts: what a container holds outside its mounts is
// its root filesystem less its base image (a re-create commits the old
// writable layer into the image the new container runs, so the writable
// layer alone would forget what was carried). Counting is a walk of the
// layer by the engine, so it happens where it matters and not on every
// command: before a stopped container starts, before a re-create
// commits the layer, and on the daemon's tick for every running one
// (EnforceDisk).

var _ sandbox.DiskEnforcer = (*Runtime)(nil)

// EnforceDisk stops every running container of this installation whose
// disk use is above ceiling, and returns their office keys. It kills
// them (SIGKILL, no grace: a runtime over its ceiling gets no more
// writes); the next command is refused by ensure's check.
func (r *Runtime) EnforceDisk(ctx context.Context, ceiling int64) ([]string, error) {
	if ceiling <= 0 {
		return nil, nil
	}
	res, err := r.api.ContainerList(ctx, client.ContainerListOptions{Filters: r.ownedFilter().Add("status", "running"), Size: true})
	if err != nil {
		return nil, engine.Classify(err, "list containers with their sizes")
	}
	var stopped []string
	var errs []error
	for _, c := range res.Items {
		key := r.officeOf(c)
		if key == "" || c.State != "running" {
			continue
		}
		use := r.diskUse(ctx, c.SizeRw, c.SizeRootFs, c.Labels[engine.LabelImageID])
		if use <= ceiling {
			continue
		}
		r.log.Warn("stopping a runtime over the disk ceiling", "office_key", key,
			"disk_use", units.BytesSize(float64(use)), "ceiling", units.BytesSize(float64(ceiling)))
		if err := r.kill(ctx, c.ID, key); err != nil {
			errs = append(errs, err)
			continue
		}
		r.event(metrics.EventDiskStop)
		stopped = append(stopped, key)
	}
	if len(errs) > 0 {
		return stopped, fmt.Errorf("stopping runtimes over the disk ceiling: %w", errs[0])
	}
	return stopped, nil
}

// kill stops a container at once. Its temporary limits end with it, as
// with any stop.
func (r *Runtime) kill(ctx context.Context, id, key string) error {
	zero := 0
	if _, err := r.api.ContainerStop(ctx, id, client.ContainerStopOptions{Signal: "SIGKILL", Timeout: &zero}); err != nil && !engine.IsNotFound(err) {
		return engine.Classify(err, "stop container "+ContainerName(key))
	}
	clearRuntimeState(r.cfg.StateDir, key)
	return nil
}

// diskUse is what a container holds outside its mounts, from the sizes
// the engine reported: its writable layer, plus what the image it runs
// holds beyond its base image (a re-create's snapshot). Docker counts
// the writable layer into the root filesystem's size; Podman reports
// the image's size there. When the base image cannot be measured, the
// writable layer alone.
func (r *Runtime) diskUse(ctx context.Context, rw, rootFS int64, baseImageID string) int64 {
	if rootFS <= 0 || baseImageID == "" {
		return rw
	}
	img, err := r.api.ImageInspect(ctx, baseImageID)
	if err != nil || img.Size <= 0 {
		return rw
	}
	carried := rootFS - img.Size
	if r.cfg.Engine.Flavor != engine.FlavorPodman {
		carried -= rw
	}
	return rw + max(carried, 0)
}

// checkDisk refuses to start or re-create an office's container whose
// disk use is above the spec's ceiling, and stops it if it runs. Errors
// are of class errdefs.ErrFailedPrecondition and say how to get the
// runtime back.
func (r *Runtime) checkDisk(ctx context.Context, spec sandbox.Spec, st containerState) error {
	err := r.measureDisk(ctx, spec, st.id)
	if err != nil && st.running && errdefs.IsFailedPrecondition(err) {
		if kerr := r.kill(ctx, st.id, spec.OfficeKey); kerr != nil {
			return kerr
		}
	}
	return err
}

func (r *Runtime) measureDisk(ctx context.Context, spec sandbox.Spec, id string) error {
	if spec.DiskCeiling <= 0 {
		return nil
	}
	res, err := r.api.ContainerInspect(ctx, id, client.ContainerInspectOptions{Size: true})
	if err != nil {
		return engine.Classify(err, "measure container "+ContainerName(spec.OfficeKey))
	}
	c := res.Container
	var rw, rootFS int64
	if c.SizeRw != nil {
		rw = *c.SizeRw
	}
	if c.SizeRootFs != nil {
		rootFS = *c.SizeRootFs
	}
	base := ""
	if c.Config != nil {
		base = c.Config.Labels[engine.LabelImageID]
	}
	use := r.diskUse(ctx, rw, rootFS, base)
	if use <= spec.DiskCeiling {
		return nil
	}
	return errdefs.New(errdefs.ErrFailedPrecondition, diskRefusal(spec, use))
}

// diskRefusal says that a runtime is over its disk ceiling and how to
// get it back; the office is not part of the count and is kept.
func diskRefusal(spec sandbox.Spec, use int64) string {
	return fmt.Sprintf("The runtime of %s/%s holds %s outside its office, above this installation's disk ceiling of %s; its commands were stopped and it does not start again. "+
		"Remove it to discard what it wrote outside the office (the office is kept): hutch sandbox rm %s/%s; or the operator raises the ceiling: hutch sandbox settings sandbox.ceiling.disk <value>",
		spec.Platform, spec.ConversationID, units.BytesSize(float64(use)), units.BytesSize(float64(spec.DiskCeiling)), spec.Platform, spec.ConversationID)
}
