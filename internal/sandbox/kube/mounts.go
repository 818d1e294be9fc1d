package kube

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/types"

	"github.com/hutchsandbox/hutch/internal/agent"
	"github.com/hutchsandbox/hutch/internal/beneath"
	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/sandbox"
)

// The kubelet resolves a subPath's links before it opens it safely
// (subpath_linux.go: EvalSymlinks, then a no-follow walk of the result,
// which must stay inside the volume). A runtime whose door grants the
// workspace (full) can rename another office and put a link to a third
// one in its place: the kubelet then mounts the third office as the
// victim's, a path inside the volume. So before a pod's first command
// from this process, hutch asks its agent which file each mount target
// is, opens the source itself beneath the workspace with no link
// followed, and compares inode numbers (device numbers differ between
// the node and hutch when the workspace is shared storage). A link or a
// mismatch deletes the pod: nothing has run in it yet. With a claim
// (pvc:) hutch does not see the workspace as the node does, and cannot
// check.

// verifyMounts checks spec's mounts in the pod through its agent.
func (r *Runtime) verifyMounts(ctx context.Context, cl *agent.Client, spec sandbox.Spec, name string, uid types.UID) error {
	if r.cfg.Storage.Claim != "" {
		return nil
	}
	for _, m := range spec.Mounts {
		got, err := cl.Identity(ctx, m.RuntimePath)
		if err != nil {
			return err
		}
		pin, err := beneath.Open(r.cfg.Workspace, m.HostPath)
		same := err == nil && pin.Ino == got.Ino
		if pin != nil {
			_ = pin.Close()
		}
		if same {
			continue
		}
		r.log.Warn("a mount source is not what the node mounted; deleting the pod", "office_key", spec.OfficeKey, "pod", name, "source", m.HostPath, "target", m.RuntimePath, "error", err)
		if derr := r.deletePod(ctx, name, uid, false); derr != nil {
			r.log.Warn("could not delete the pod", "pod", name, "error", derr)
		}
		why := "something replaced it between the check and the mount"
		if err != nil {
			why = err.Error()
		}
		return errdefs.New(errdefs.ErrFailedPrecondition, fmt.Sprintf(
			"Pod %s was deleted before anything ran in it: what the node mounted at %s is not the %s hutch checked (%s). Nothing ran; the next command tries again.",
			name, m.RuntimePath, m.HostPath, why))
	}
	return nil
}
