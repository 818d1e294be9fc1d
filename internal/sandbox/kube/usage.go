package kube

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/sandbox"
)

var _ sandbox.UsageReader = (*Runtime)(nil)

// Usage reads the resource use of the office's pod from the agent in it,
// which reads its container's cgroup: the cluster's metrics API is often
// not installed, and has no process counts. It runs no command and
// records no use, so it keeps no pod from its idle stop. A pod another
// replica made is read over this process's own exec stream to it.
func (r *Runtime) Usage(ctx context.Context, key string) (sandbox.Usage, error) {
	pod, err := r.owned(ctx, key)
	if err != nil {
		return sandbox.Usage{}, err
	}
	if pod.Status.Phase != corev1.PodRunning || pod.DeletionTimestamp != nil {
		return sandbox.Usage{}, errdefs.New(errdefs.ErrNotFound, fmt.Sprintf("Pod %s is not running.", pod.Name))
	}
	s := r.sessions.Get(key)
	if !s.TryLock() {
		return sandbox.Usage{}, errdefs.New(errdefs.ErrUnavailable, "The runtime is being provisioned; its use is read next time.")
	}
	c := r.clientLocked(s, pod)
	s.Unlock()
	u, err := c.Usage(ctx)
	if err != nil {
		return sandbox.Usage{}, err
	}
	return u.Reading(string(pod.UID)), nil
}
