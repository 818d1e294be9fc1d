package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/hutchsandbox/hutch/internal/engine"
	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/sandbox/managed"
)

// runtimeLimits are a pod's boost and temporary limits, read from its
// annotations: they live and die with the pod, and every replica sees them.
func runtimeLimits(pod *corev1.Pod) (boost, temp *sandbox.Limits) {
	read := func(key string) *sandbox.Limits {
		v, ok := pod.Annotations[key]
		if !ok {
			return nil
		}
		var l sandbox.Limits
		if json.Unmarshal([]byte(v), &l) != nil {
			return nil
		}
		return &l
	}
	return read(annotationBoost), read(annotationTemp)
}

// effective is what the pod's limits must be: the base limits, raised by
// a boost, overridden by temporary limits.
func effective(base sandbox.Limits, pod *corev1.Pod) sandbox.Limits {
	eff := base
	boost, temp := runtimeLimits(pod)
	if boost != nil {
		eff = boost.Over(eff)
	}
	if temp != nil {
		eff = temp.Over(eff)
	}
	return eff
}

func sandboxContainer(pod *corev1.Pod) *corev1.Container {
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == containerName {
			return &pod.Spec.Containers[i]
		}
	}
	return nil
}

// podLimits are the limits a pod asks for (its spec; a resize changes it
// first, the kubelet follows).
func podLimits(pod *corev1.Pod) sandbox.Limits {
	if c := sandboxContainer(pod); c != nil {
		return limitsOf(c.Resources)
	}
	return sandbox.Limits{}
}

// applyLimits brings a running pod's limits to what they must be (limits
// changed in settings). It reports whether the pod was replaced.
func (r *Runtime) applyLimits(ctx context.Context, spec sandbox.Spec, pod *corev1.Pod) (bool, error) {
	eff := effective(r.baseLimits(spec), pod)
	if sameLimits(eff, podLimits(pod)) {
		return false, nil
	}
	how, err := r.resize(ctx, pod, eff)
	return how == appliedRecreate, err
}

// How a change of limits was applied.
const (
	appliedInPlace  = "resized in place"
	appliedRecreate = sandbox.LimitsAppliedRecreated
)

// resize changes a running pod's CPU and memory in place (the pods/resize
// subresource). When the cluster cannot (no in-place resize, or the node
// has no room: the kubelet marks the resize infeasible), the pod is
// replaced by one made from the same spec with the new limits, its
// annotations (boost, temporary limits) carried over. It returns which
// happened.
func (r *Runtime) resize(ctx context.Context, pod *corev1.Pod, l sandbox.Limits) (string, error) {
	pods := r.cluster.Client.Pods(r.cluster.Namespace)
	want := pod.DeepCopy()
	if c := sandboxContainer(want); c != nil {
		// Only CPU and memory resize; ephemeral storage stays as made.
		c.Resources = withDisk(resources(l), diskOf(c.Resources))
	}
	got, err := pods.UpdateResize(ctx, pod.Name, want, metav1.UpdateOptions{})
	if err == nil {
		if err = r.waitResized(ctx, got, l); err == nil {
			r.log.Info("resized pod in place", "pod", pod.Name, "cpus", l.CPUs, "memory_bytes", l.MemoryBytes)
			r.event("resized")
			return appliedInPlace, nil
		}
	}
	if ctx.Err() != nil {
		return "", ctx.Err()
	}
	r.log.Info("re-creating pod: the cluster did not resize it in place", "pod", pod.Name, "cpus", l.CPUs, "memory_bytes", l.MemoryBytes, "reason", err)
	r.event("recreated")
	if err := r.deletePod(ctx, pod.Name, pod.UID, true); err != nil {
		return "", err
	}
	repl := resizeReplacement(want, time.Now())
	if _, err := pods.Create(ctx, repl, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", classify(err, "re-create pod "+pod.Name)
	}
	r.changed(ctx, pod.Annotations[engine.LabelOffice], recreatedResize)
	return appliedRecreate, nil
}

// resizeReplacement is the pod that replaces want's pod when the cluster
// could not resize it in place: the same spec with want's limits, on any
// node with room, annotated with when and why it was re-created.
func resizeReplacement(want *corev1.Pod, now time.Time) *corev1.Pod {
	ann := make(map[string]string, len(want.Annotations)+2)
	maps.Copy(ann, want.Annotations)
	sandbox.MarkRecreated(ann, now, recreatedResize)
	repl := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: want.Name, Namespace: want.Namespace, Labels: want.Labels, Annotations: ann},
		Spec:       *want.Spec.DeepCopy(),
	}
	repl.Spec.NodeName = "" // let the scheduler find a node with room
	return repl
}

// waitResized waits until the kubelet reports the container running with
// the new limits, or says it cannot (infeasible).
func (r *Runtime) waitResized(ctx context.Context, pod *corev1.Pod, l sandbox.Limits) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	pods := r.cluster.Client.Pods(r.cluster.Namespace)
	for {
		for _, c := range pod.Status.Conditions {
			if c.Type == corev1.PodResizePending && c.Status == corev1.ConditionTrue && c.Reason == corev1.PodReasonInfeasible {
				return fmt.Errorf("resize infeasible: %s", c.Message)
			}
		}
		for _, cs := range pod.Status.ContainerStatuses {
			if cs.Name == containerName && cs.Resources != nil && sameLimits(limitsOf(*cs.Resources), l) && !resizeInProgress(pod) {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return errors.New("the kubelet did not apply the resize within 30 s")
		case <-time.After(100 * time.Millisecond):
		}
		var err error
		if pod, err = pods.Get(ctx, pod.Name, getOpts); err != nil {
			return classify(err, "pod "+pod.Name)
		}
	}
}

func resizeInProgress(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if (c.Type == corev1.PodResizeInProgress || c.Type == corev1.PodResizePending) && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// selector selects every pod and Secret of this installation.
func (r *Runtime) selector() string {
	return labels.SelectorFromSet(labels.Set{
		engine.LabelManaged: "true",
		engine.LabelMode:    string(sandbox.KindKube),
		labelInstallation:   installation(r.cfg.StateDir),
	}).String()
}

// List returns every pod this hutch manages.
func (r *Runtime) List(ctx context.Context) ([]sandbox.Status, error) {
	list, err := r.cluster.Client.Pods(r.cluster.Namespace).List(ctx, metav1.ListOptions{LabelSelector: r.selector()})
	if err != nil {
		return nil, classify(err, "list pods")
	}
	out := make([]sandbox.Status, 0, len(list.Items))
	for i := range list.Items {
		key := list.Items[i].Annotations[engine.LabelOffice]
		if key == "" {
			continue
		}
		out = append(out, r.status(key, &list.Items[i]))
	}
	return out, nil
}

// Status describes one office's pod.
func (r *Runtime) Status(ctx context.Context, key string) (sandbox.Status, error) {
	pod, err := r.cluster.Client.Pods(r.cluster.Namespace).Get(ctx, PodName(key), getOpts)
	if apierrors.IsNotFound(err) {
		return r.status(key, nil), nil
	}
	if err != nil {
		return sandbox.Status{}, classify(err, "pod "+PodName(key))
	}
	if err := r.checkOwned(pod); err != nil {
		return sandbox.Status{}, err
	}
	return r.status(key, pod), nil
}

// status describes a pod (nil: none). A pod that is being deleted, or
// ended, counts as stopped: the next command makes a new one.
func (r *Runtime) status(key string, pod *corev1.Pod) sandbox.Status {
	out := sandbox.Status{OfficeKey: key, Name: PodName(key), State: sandbox.StateMissing}
	if s, ok := r.sessions.Lookup(key); ok {
		s.Lock()
		out.ActiveCommands, out.LastActivity = s.Active(), s.LastActivity()
		s.Unlock()
	}
	if pod == nil {
		return out
	}
	out.ID = string(pod.UID)
	out.State = sandbox.StateStopped
	if pod.Status.Phase == corev1.PodRunning && pod.DeletionTimestamp == nil {
		out.State = sandbox.StateRunning
		if pod.Status.StartTime != nil {
			out.StartedAt = pod.Status.StartTime.Time
		}
	}
	out.Platform = pod.Annotations[engine.LabelPlatform]
	out.ConversationID = pod.Annotations[engine.LabelConversation]
	out.Image = pod.Annotations[engine.LabelImage]
	out.Fingerprint = pod.Annotations[engine.LabelFingerprint]
	out.Recreated, out.RecreatedBecause = sandbox.RecreatedFrom(pod.Annotations)
	out.Limits = podLimits(pod)
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name == containerName {
			out.ImageID = cs.ImageID
			if cs.Resources != nil {
				out.Limits = limitsOf(*cs.Resources) // what the kubelet applied
			}
		}
	}
	boost, temp := runtimeLimits(pod)
	out.Boosted, out.TempLimits = boost != nil, temp != nil
	return out
}

// owned returns the office's pod, refusing one this hutch did not make.
func (r *Runtime) owned(ctx context.Context, key string) (*corev1.Pod, error) {
	pod, err := r.cluster.Client.Pods(r.cluster.Namespace).Get(ctx, PodName(key), getOpts)
	if apierrors.IsNotFound(err) {
		return nil, errdefs.New(errdefs.ErrNotFound, fmt.Sprintf("No runtime for office %s", key))
	}
	if err != nil {
		return nil, classify(err, "pod "+PodName(key))
	}
	return pod, r.checkOwned(pod)
}

// Stop deletes the office's pod (a pod cannot be stopped and started
// again); the office stays on its volume and the next command makes a new
// pod. What the pod wrote outside its mounts is lost: that is the price
// of running anywhere in the cluster. The vault Secret goes with the pod.
func (r *Runtime) Stop(ctx context.Context, key string) error {
	s := r.sessions.Get(key)
	s.Lock()
	defer s.Unlock()
	pod, err := r.owned(ctx, key)
	if err != nil {
		return err
	}
	return r.stopLocked(ctx, s, pod)
}

func (r *Runtime) stopLocked(ctx context.Context, s *session, pod *corev1.Pod) error {
	if pod.DeletionTimestamp != nil {
		return nil
	}
	if err := r.deletePod(ctx, pod.Name, pod.UID, false); err != nil {
		return err
	}
	r.stopped(ctx, s, pod)
	return nil
}

// stopIdleLocked deletes an idle pod unless it changed since it was read
// (another replica used it). It reports whether the pod went.
func (r *Runtime) stopIdleLocked(ctx context.Context, s *session, pod *corev1.Pod) (bool, error) {
	uid, rv := pod.UID, pod.ResourceVersion
	err := r.cluster.Client.Pods(r.cluster.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &rv}})
	switch {
	case apierrors.IsConflict(err):
		return false, nil // used or changed meanwhile: not idle
	case apierrors.IsNotFound(err):
		// Gone already: as stopped as the delete would have made it.
	case err != nil:
		return false, classify(err, "delete pod "+pod.Name)
	}
	r.stopped(ctx, s, pod)
	return true, nil
}

// stopped forgets a deleted pod and removes its Secret.
func (r *Runtime) stopped(ctx context.Context, s *session, pod *corev1.Pod) {
	r.deleteSecret(ctx, s.Key)
	s.egress.Stop()
	if s.client != nil {
		_ = s.client.Close()
		s.client = nil
	}
	s.verified = ""
	r.log.Info("deleted pod", "office_key", s.Key, "pod", pod.Name)
}

// deleteSecret removes the office's vault Secret (the garbage collector
// would, once the pod is gone; hutch does not leave credentials around
// for it).
func (r *Runtime) deleteSecret(ctx context.Context, key string) {
	err := r.cluster.Client.Secrets(r.cluster.Namespace).Delete(ctx, SecretName(key), metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		r.log.Warn("could not delete the vault secret", "office_key", key, "error", err)
	}
}

// Remove deletes the office's pod and Secret; the office and vault stay.
func (r *Runtime) Remove(ctx context.Context, key string) error {
	s := r.sessions.Get(key)
	s.Lock()
	defer s.Unlock()
	pod, err := r.owned(ctx, key)
	if errdefs.IsNotFound(err) {
		r.deleteSecret(ctx, key)
		return err
	}
	if err != nil {
		return err
	}
	if err := r.stopLocked(ctx, s, pod); err != nil {
		return err
	}
	r.log.Info("removed runtime", "office_key", key)
	return nil
}

// Boost raises an office's limits until its pod ends.
func (r *Runtime) Boost(ctx context.Context, key string, boost sandbox.Limits) (sandbox.Status, error) {
	if boost == (sandbox.Limits{}) {
		boost = r.cfg.Boost
	}
	return r.setRuntimeLimits(ctx, key, func(_, _ *sandbox.Limits) (*sandbox.Limits, *sandbox.Limits, bool) {
		return &boost, nil, true
	})
}

// SetLimits sets temporary limits until the office's pod ends.
func (r *Runtime) SetLimits(ctx context.Context, key string, l sandbox.Limits) (sandbox.Status, error) {
	return r.setRuntimeLimits(ctx, key, func(_, temp *sandbox.Limits) (*sandbox.Limits, *sandbox.Limits, bool) {
		if temp != nil {
			l = l.Over(*temp)
		}
		return nil, &l, false
	})
}

// setRuntimeLimits records a boost or temporary limits in the pod's
// annotations (conditional on the pod read: a replica changing them at
// the same time makes one of the two try again), then resizes the pod.
// change returns the new boost and temp; keepTemp tells which one it set.
func (r *Runtime) setRuntimeLimits(ctx context.Context, key string, change func(boost, temp *sandbox.Limits) (*sandbox.Limits, *sandbox.Limits, bool)) (sandbox.Status, error) {
	s := r.sessions.Get(key)
	s.Lock()
	pod, how, err := r.setRuntimeLimitsLocked(ctx, key, change)
	s.Unlock()
	if err != nil {
		return sandbox.Status{}, err
	}
	st := r.status(key, pod)
	st.LimitsApplied = how
	return st, nil
}

func (r *Runtime) setRuntimeLimitsLocked(ctx context.Context, key string, change func(boost, temp *sandbox.Limits) (*sandbox.Limits, *sandbox.Limits, bool)) (*corev1.Pod, string, error) {
	pods := r.cluster.Client.Pods(r.cluster.Namespace)
	for range maxEnsureRounds {
		pod, err := r.owned(ctx, key)
		if err != nil {
			return nil, "", err
		}
		if pod.Status.Phase != corev1.PodRunning || pod.DeletionTimestamp != nil {
			return nil, "", sandbox.NotRunning(key)
		}
		boost, temp := runtimeLimits(pod)
		nb, nt, isBoost := change(boost, temp)
		upd := pod.DeepCopy()
		if upd.Annotations == nil {
			upd.Annotations = map[string]string{}
		}
		if isBoost {
			data, _ := json.Marshal(nb)
			upd.Annotations[annotationBoost] = string(data)
		} else {
			data, _ := json.Marshal(nt)
			upd.Annotations[annotationTemp] = string(data)
		}
		// Unset fields keep the pod's current values.
		eff := podLimits(pod)
		nb, nt = runtimeLimits(upd)
		if nb != nil {
			eff = nb.Over(eff)
		}
		if nt != nil {
			eff = nt.Over(eff)
		}
		if eff.CPUs <= 0 || eff.MemoryBytes <= 0 {
			eff = eff.Over(managed.DefaultLimits)
		}
		updated, err := pods.Update(ctx, upd, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			continue
		}
		if err != nil {
			return nil, "", classify(err, "annotate pod "+pod.Name)
		}
		how, err := r.resize(ctx, updated, eff)
		if err != nil {
			return nil, "", err
		}
		got, err := pods.Get(ctx, pod.Name, getOpts)
		if err != nil {
			return nil, "", classify(err, "pod "+pod.Name)
		}
		if how == appliedRecreate {
			if got, err = r.waitRunning(ctx, got); err != nil {
				return nil, "", err
			}
		}
		return got, how, nil
	}
	return nil, "", errdefs.New(errdefs.ErrUnavailable, fmt.Sprintf("Pod %s kept changing under hutch; try again", PodName(key)))
}

// StopIdle deletes every pod this process has used that runs no command
// and ran none within idle, unless another replica used it within idle
// (its last-used annotation). The delete is conditional on the pod as
// read: a replica that used it meanwhile changed its resource version,
// and the pod stays.
func (r *Runtime) StopIdle(ctx context.Context, idle time.Duration) ([]string, error) {
	var stopped []string
	var errs []error
	for _, s := range r.sessions.All() {
		s.Lock()
		if !s.IdleFor(idle) {
			s.Unlock()
			continue
		}
		pod, err := r.owned(ctx, s.Key)
		if errdefs.IsNotFound(err) {
			// Deleted behind hutch's back: its credentials go too.
			r.deleteSecret(ctx, s.Key)
			err = nil
		} else if err == nil && pod.DeletionTimestamp == nil && time.Since(lastUsed(pod)) >= idle {
			var gone bool
			if gone, err = r.stopIdleLocked(ctx, s, pod); err == nil && gone {
				stopped = append(stopped, s.Key)
			}
		}
		if err != nil {
			errs = append(errs, err)
		}
		s.Unlock()
	}
	return stopped, errors.Join(errs...)
}

// Reconcile runs at start: it adopts the pods of known offices (their
// idle clocks start now), and deletes pods and Secrets this hutch
// labelled whose office it can no longer account for, and pods that
// ended (the next command makes them again).
func (r *Runtime) Reconcile(ctx context.Context, known func(officeKey string) bool) (sandbox.ReconcileReport, error) {
	var rep sandbox.ReconcileReport
	pods := r.cluster.Client.Pods(r.cluster.Namespace)
	list, err := pods.List(ctx, metav1.ListOptions{LabelSelector: r.selector()})
	if err != nil {
		return rep, classify(err, "list pods")
	}
	now := time.Now()
	live := map[string]bool{}
	for i := range list.Items {
		pod := &list.Items[i]
		key := pod.Annotations[engine.LabelOffice]
		switch {
		case key != "" && known(key) && pod.Status.Phase != corev1.PodFailed && pod.Status.Phase != corev1.PodSucceeded:
			s := r.sessions.Get(key)
			s.Lock()
			s.Adopt(now)
			s.Unlock()
			live[key] = true
			rep.Adopted = append(rep.Adopted, key)
		default:
			if err := r.deletePod(ctx, pod.Name, pod.UID, false); err != nil {
				return rep, err
			}
			if key != "" {
				r.deleteSecret(ctx, key)
			}
			rep.Removed = append(rep.Removed, key)
		}
	}
	secrets, err := r.cluster.Client.Secrets(r.cluster.Namespace).List(ctx, metav1.ListOptions{LabelSelector: r.selector()})
	if err != nil {
		return rep, classify(err, "list secrets")
	}
	for _, sec := range secrets.Items {
		if key := sec.Annotations[engine.LabelOffice]; !live[key] {
			uid := sec.UID
			err := r.cluster.Client.Secrets(r.cluster.Namespace).Delete(ctx, sec.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
			if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
				return rep, classify(err, "delete secret "+sec.Name)
			}
		}
	}
	return rep, nil
}
