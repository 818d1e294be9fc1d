package kube

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/hutchsandbox/hutch/internal/agent"
	"github.com/hutchsandbox/hutch/internal/engine"
	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/sandbox/managed"
)

// desired computes what the office's pod must be built from.
func (r *Runtime) desired(spec sandbox.Spec) (desired, error) {
	if r.cfg.Image == "" {
		return desired{}, errdefs.New(errdefs.ErrInvalid, "kube mode needs an image: --sandbox kube:<image>")
	}
	mounts, err := planMounts(r.cfg.Workspace, spec.Mounts)
	if err != nil {
		return desired{}, err
	}
	vault, err := planVault(spec.VaultFiles)
	if err != nil {
		return desired{}, err
	}
	d := desired{
		Namespace:    r.cluster.Namespace,
		Image:        r.cfg.Image,
		AgentImage:   r.cfg.AgentImage,
		Agent:        r.cfg.Agent.SHA256,
		WorkDir:      spec.OfficeRuntimePath,
		Storage:      r.cfg.Storage,
		Mounts:       mounts,
		Vault:        vault,
		NodeSelector: r.cfg.NodeSelector,
		RuntimeClass: r.cfg.RuntimeClass,
		Hardening:    hardeningVersion,
		Disk:         spec.DiskCeiling,
	}
	if err := r.egressDesired(spec, &d); err != nil {
		return desired{}, err
	}
	return d, nil
}

func (r *Runtime) owner(spec sandbox.Spec) owner {
	return owner{stateDir: r.cfg.StateDir, officeKey: spec.OfficeKey, platform: spec.Platform, conv: spec.ConversationID}
}

// maxEnsureRounds bounds how often ensure goes round (a pod replaced,
// deleted or created by another replica meanwhile) before it gives up.
const maxEnsureRounds = 6

// ensureLocked brings the office's pod to the desired state and returns
// its agent client. The office's lock is held.
//
// Every decision is taken on what the API server says now, and every
// change is conditional on it: a pod is created under its name (one
// wins), deleted with its UID as precondition (a pod another replica
// made since is never deleted by mistake). A round that lost a race
// looks again.
func (r *Runtime) ensureLocked(ctx context.Context, s *session, spec sandbox.Spec) (*agent.Client, error) {
	d, err := r.desired(spec)
	if err != nil {
		return nil, err
	}
	fp := d.fingerprint()
	name := PodName(spec.OfficeKey)
	pods := r.cluster.Client.Pods(r.cluster.Namespace)
	because := "" // why this call deleted the pod, for its replacement
	for round := 0; round < maxEnsureRounds; round++ {
		pod, err := pods.Get(ctx, name, getOpts)
		if apierrors.IsNotFound(err) {
			pod, err = r.create(ctx, spec, d, fp, because)
			if apierrors.IsAlreadyExists(err) {
				continue // another replica made it: look at theirs
			}
		}
		if err != nil {
			return nil, classify(err, "pod "+name)
		}
		if err := r.checkOwned(pod); err != nil {
			return nil, err
		}
		switch {
		case pod.DeletionTimestamp != nil:
			if err := r.waitGone(ctx, name, pod.UID); err != nil {
				return nil, err
			}
			continue
		case pod.Annotations[engine.LabelFingerprint] != fp || pod.Labels[labelEgress] != d.Egress:
			// What the pod was made from changed (mounts, a rotated
			// credential, the image, the agent, its network; or its
			// egress label, which selects it for the NetworkPolicy, was
			// edited): wait for this process's commands in it, then
			// replace it.
			if err := s.WaitIdle(ctx); err != nil {
				return nil, err
			}
			because = recreatedDrift
			if pod.Labels[labelEgress] != d.Egress {
				because = recreatedNetwork
			}
			r.log.Info("re-creating pod: "+because, "office_key", spec.OfficeKey, "pod", name)
			r.event("recreated")
			if err := r.deletePod(ctx, name, pod.UID, true); err != nil {
				return nil, err
			}
			continue
		case pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded:
			// The agent ended or the pod was evicted: it never runs again.
			r.log.Warn("pod ended; re-creating it", "office_key", spec.OfficeKey, "pod", name, "phase", pod.Status.Phase, "reason", podReason(pod))
			because = recreatedEnded + podReason(pod)
			r.event("recreated")
			if err := r.deletePod(ctx, name, pod.UID, true); err != nil {
				return nil, err
			}
			continue
		}
		if pod.Status.Phase != corev1.PodRunning {
			if pod, err = r.waitRunning(ctx, pod); err != nil {
				return nil, err
			}
		}
		uid := string(pod.UID)
		cl := r.clientLocked(s, pod)
		if s.verified != uid {
			// First use of this pod by this process: a proxied pod must
			// be cut off still, and the agent must answer.
			if d.Egress == egressProxied {
				if err := r.ensureEgressPolicy(ctx); err != nil {
					return nil, err
				}
			}
			if _, err := cl.Ping(ctx); err != nil {
				return nil, fmt.Errorf("the agent in pod %s does not answer: %w", name, err)
			}
			if err := r.verifyMounts(ctx, cl, spec, name, pod.UID); err != nil {
				return nil, err
			}
			s.verified = uid
		}
		replaced, err := r.applyLimits(ctx, spec, pod)
		if err != nil {
			return nil, err
		}
		if replaced {
			continue // the new pod runs the new limits: use it
		}
		r.touch(ctx, s)
		return cl, nil
	}
	return nil, errdefs.New(errdefs.ErrUnavailable, fmt.Sprintf("Pod %s kept changing under hutch (created, replaced or deleted by another hutch or by hand); try again", name))
}

// checkOwned refuses a pod of that name this installation did not make.
func (r *Runtime) checkOwned(pod *corev1.Pod) error {
	if pod.Labels[engine.LabelManaged] != "true" || pod.Labels[engine.LabelMode] != string(sandbox.KindKube) ||
		pod.Labels[labelInstallation] != installation(r.cfg.StateDir) {
		return errdefs.New(errdefs.ErrConflict, fmt.Sprintf(
			"Pod %s in namespace %s exists but was not made by this hutch (state dir %s); hutch never touches it. Delete it or use another namespace.",
			pod.Name, pod.Namespace, r.cfg.StateDir))
	}
	return nil
}

// create makes the office's Secret (when it has vault files) and pod.
// The Secret comes first, so the kubelet finds it when it mounts the
// pod's volumes. It is not owned by the pod: the garbage collector would
// delete it some time after a pod is deleted, possibly just after the
// replacement pod was made to mount it. hutch deletes it itself with the
// pod it stops, and at start with the pods it cannot account for.
// because, when not empty, says why the pod replaces one this process
// deleted; the pod carries it (sandbox.MarkRecreated).
func (r *Runtime) create(ctx context.Context, spec sandbox.Spec, d desired, fp, because string) (*corev1.Pod, error) {
	r.ensurePolicy(ctx)
	if d.Egress == egressProxied {
		// The policy comes first, so the pod never has a moment of the
		// cluster's open network.
		if err := r.ensureEgressPolicy(ctx); err != nil {
			return nil, err
		}
	}
	o := r.owner(spec)
	sec, err := buildSecret(o, d)
	if err != nil {
		return nil, err
	}
	if sec != nil {
		if err := r.putSecret(ctx, sec); err != nil {
			return nil, err
		}
	} else {
		// The vault was emptied since the last pod: its Secret goes, so
		// no copy of a withdrawn credential stays in the cluster.
		r.deleteSecret(ctx, o.officeKey)
	}
	pod := buildPod(o, d, r.cfg.Workspace, r.cfg.Agent.SHA256, fp, r.baseLimits(spec))
	if because != "" {
		sandbox.MarkRecreated(pod.Annotations, time.Now(), because)
	}
	created, err := r.cluster.Client.Pods(r.cluster.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		return nil, err
	}
	r.log.Info("created pod", "office_key", spec.OfficeKey, "pod", created.Name, "uid", created.UID, "image", r.cfg.Image)
	r.event("created")
	r.changed(ctx, spec.OfficeKey, because)
	return created, nil
}

// changed tells the Changed hook that key's pod was made: re-created
// when because says why.
func (r *Runtime) changed(ctx context.Context, key, because string) {
	if r.cfg.Changed != nil {
		r.cfg.Changed(ctx, sandbox.Made(key, because))
	}
}

// putSecret creates the vault Secret, or replaces its data when it holds
// other files (a rotated credential). The update carries the resource
// version read, so of two replicas writing at once one re-reads.
func (r *Runtime) putSecret(ctx context.Context, want *corev1.Secret) error {
	secrets := r.cluster.Client.Secrets(r.cluster.Namespace)
	for range maxEnsureRounds {
		cur, err := secrets.Get(ctx, want.Name, getOpts)
		if apierrors.IsNotFound(err) {
			_, err = secrets.Create(ctx, want, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				continue
			}
			return classify(err, "create secret "+want.Name)
		}
		if err != nil {
			return classify(err, "secret "+want.Name)
		}
		if cur.Labels[labelInstallation] != want.Labels[labelInstallation] {
			return errdefs.New(errdefs.ErrConflict, fmt.Sprintf("Secret %s in namespace %s exists but was not made by this hutch; hutch never touches it", want.Name, want.Namespace))
		}
		if cur.Annotations[annotationVault] == want.Annotations[annotationVault] {
			return nil
		}
		upd := cur.DeepCopy()
		upd.Data = want.Data
		upd.Annotations = want.Annotations
		_, err = secrets.Update(ctx, upd, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			continue
		}
		return classify(err, "update secret "+want.Name)
	}
	return errdefs.New(errdefs.ErrUnavailable, "Secret "+want.Name+" kept changing under hutch; try again")
}

// deletePod deletes the pod with that UID (never a newer one of the same
// name) and, when wait is set, waits until it is gone.
func (r *Runtime) deletePod(ctx context.Context, name string, uid types.UID, wait bool) error {
	err := r.cluster.Client.Pods(r.cluster.Namespace).Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	switch {
	case apierrors.IsNotFound(err), apierrors.IsConflict(err):
		return nil // gone already, or another pod by now: the caller looks again
	case err != nil:
		return classify(err, "delete pod "+name)
	}
	if !wait {
		return nil
	}
	return r.waitGone(ctx, name, uid)
}

// waitGone waits until the pod with that UID no longer exists.
func (r *Runtime) waitGone(ctx context.Context, name string, uid types.UID) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	pods := r.cluster.Client.Pods(r.cluster.Namespace)
	for {
		list, err := pods.List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
		if err != nil {
			return classify(err, "pod "+name)
		}
		if len(list.Items) == 0 || list.Items[0].UID != uid {
			return nil
		}
		w, err := pods.Watch(ctx, metav1.ListOptions{
			FieldSelector:   fields.OneTermEqualSelector("metadata.name", name).String(),
			ResourceVersion: list.ResourceVersion,
		})
		if err != nil {
			return classify(err, "watch pod "+name)
		}
		for ev := range w.ResultChan() {
			if ev.Type == watch.Deleted {
				w.Stop()
				return nil
			}
		}
		w.Stop()
		if ctx.Err() != nil {
			return errdefs.New(errdefs.ErrUnavailable, fmt.Sprintf("Pod %s is still terminating after a minute", name))
		}
	}
}

// waitRunning waits until the pod runs, and fails early, with what the
// cluster says, when it cannot: an image the node does not have, an agent
// image of another build, a pod no node can take.
func (r *Runtime) waitRunning(ctx context.Context, pod *corev1.Pod) (*corev1.Pod, error) {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.StartTimeout)
	defer cancel()
	pods := r.cluster.Client.Pods(r.cluster.Namespace)
	sel := fields.OneTermEqualSelector("metadata.name", pod.Name).String()
	for {
		if done, err := r.podStarted(pod); done || err != nil {
			return pod, err
		}
		w, err := pods.Watch(ctx, metav1.ListOptions{FieldSelector: sel, ResourceVersion: pod.ResourceVersion})
		if err != nil {
			if ctx.Err() != nil {
				return nil, r.startTimeout(pod)
			}
			return nil, classify(err, "watch pod "+pod.Name)
		}
		for ev := range w.ResultChan() {
			switch ev.Type {
			case watch.Deleted:
				w.Stop()
				return nil, errdefs.New(errdefs.ErrUnavailable, fmt.Sprintf("Pod %s was deleted while it started", pod.Name))
			case watch.Added, watch.Modified:
				p, ok := ev.Object.(*corev1.Pod)
				if !ok || p.UID != pod.UID {
					continue
				}
				pod = p
				if done, err := r.podStarted(pod); done || err != nil {
					w.Stop()
					return pod, err
				}
			}
		}
		w.Stop()
		if ctx.Err() != nil {
			return nil, r.startTimeout(pod)
		}
		// The watch ended (the API server closes them now and then):
		// read the pod again and go on.
		if pod, err = pods.Get(ctx, pod.Name, getOpts); err != nil {
			return nil, classify(err, "pod "+pod.Name)
		}
	}
}

// podStarted reports whether the pod runs, or why it never will.
func (r *Runtime) podStarted(pod *corev1.Pod) (bool, error) {
	switch pod.Status.Phase {
	case corev1.PodRunning:
		return true, nil
	case corev1.PodFailed, corev1.PodSucceeded:
		return true, errdefs.New(errdefs.ErrUnavailable, fmt.Sprintf("Pod %s ended before it ran: %s", pod.Name, podReason(pod)))
	}
	for _, cs := range pod.Status.InitContainerStatuses {
		if t := cs.State.Terminated; t != nil && t.ExitCode != 0 {
			return true, errdefs.New(errdefs.ErrFailedPrecondition, fmt.Sprintf(
				"The agent image %s could not install hutch in pod %s: %s", r.cfg.AgentImage, pod.Name, strings.TrimSpace(t.Message)))
		}
		if err := waitingError(pod, cs, r.cfg.AgentImage, "the agent image"); err != nil {
			return true, err
		}
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if err := waitingError(pod, cs, r.cfg.Image, "the image"); err != nil {
			return true, err
		}
	}
	return false, nil
}

// waitingError turns a container stuck waiting for a reason that will not
// pass on its own into an error that says what to do.
func waitingError(pod *corev1.Pod, cs corev1.ContainerStatus, ref, what string) error {
	w := cs.State.Waiting
	if w == nil {
		return nil
	}
	switch w.Reason {
	case "ErrImageNeverPull", "ErrImagePull", "ImagePullBackOff", "InvalidImageName":
		return errdefs.New(errdefs.ErrFailedPrecondition, fmt.Sprintf(
			"Pod %s cannot start: %s %s is not on node %s and cannot be pulled (%s: %s). Load it into the node's container runtime or push it to a registry the nodes reach.",
			pod.Name, what, ref, pod.Spec.NodeName, w.Reason, firstLineText(w.Message)))
	case "CreateContainerConfigError", "CreateContainerError", "RunContainerError":
		return errdefs.New(errdefs.ErrFailedPrecondition, fmt.Sprintf("Pod %s cannot start its container %s: %s: %s", pod.Name, cs.Name, w.Reason, firstLineText(w.Message)))
	}
	return nil
}

// startTimeout is the error of a pod that did not run in time: the last
// thing the cluster said about it (unschedulable, pulling, ...).
func (r *Runtime) startTimeout(pod *corev1.Pod) error {
	return errdefs.New(errdefs.ErrUnavailable, fmt.Sprintf("Pod %s did not start within %s: %s", pod.Name, r.cfg.StartTimeout, podReason(pod)))
}

// podReason is the most telling thing a pod's status says: the pod's own
// reason (Evicted), a condition that failed, a container waiting or one
// that failed.
func podReason(pod *corev1.Pod) string {
	if pod.Status.Reason != "" {
		return pod.Status.Reason + ": " + pod.Status.Message
	}
	for _, c := range pod.Status.Conditions {
		if c.Status == corev1.ConditionFalse && c.Message != "" {
			return string(c.Type) + ": " + c.Message
		}
	}
	statuses := append(slices.Clone(pod.Status.InitContainerStatuses), pod.Status.ContainerStatuses...)
	for _, cs := range statuses {
		if w := cs.State.Waiting; w != nil && w.Reason != "" {
			return cs.Name + " " + w.Reason + " " + firstLineText(w.Message)
		}
	}
	for _, cs := range statuses {
		if t := cs.State.Terminated; t != nil && (t.ExitCode != 0 || cs.Name == containerName) {
			return fmt.Sprintf("%s exited %d (%s) %s", cs.Name, t.ExitCode, t.Reason, firstLineText(t.Message))
		}
	}
	return "phase " + string(pod.Status.Phase)
}

func firstLineText(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}

// baseLimits are the office's limits from settings, with defaults.
func (r *Runtime) baseLimits(spec sandbox.Spec) sandbox.Limits {
	return spec.Limits.Over(managed.DefaultLimits)
}

// ensurePolicy makes, once per process, the namespace's NetworkPolicy
// that lets nothing connect to hutch's pods: conversations must not reach
// each other (image: gives each its own network for that). It needs a
// network plugin that enforces policies; without the right to make it,
// hutch warns and goes on.
func (r *Runtime) ensurePolicy(ctx context.Context) {
	r.policy.Do(func() {
		sel := r.installationLabels()
		np := &networkingv1.NetworkPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: "hutch-" + installation(r.cfg.StateDir) + "-no-ingress", Namespace: r.cluster.Namespace, Labels: sel},
			Spec: networkingv1.NetworkPolicySpec{
				PodSelector: metav1.LabelSelector{MatchLabels: sel},
				PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			},
		}
		_, err := r.cluster.Client.NetworkPolicies(r.cluster.Namespace).Create(ctx, np, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			r.log.Warn("could not make the NetworkPolicy that keeps conversations' pods apart; pods may reach each other", "namespace", r.cluster.Namespace, "error", err)
		}
	})
}
