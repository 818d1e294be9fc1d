// Package kube is the mode kube:<image>: one Kubernetes pod per
// conversation, created by hutch through the API server (client-go, no
// kubectl), for operators whose conversations outgrow one machine.
//
// The contract is image:'s. The pod runs the operator's image with the
// static hutch binary as its pid 1; an init container made from hutch's
// agent image (hutch kube agent-image) copies that binary into an
// emptyDir, after checking it is the very build the daemon runs. Commands
// and file operations travel to the agent over one long-lived exec stream
// per office (`hutch agent --stdio`), so a warm command costs what it
// costs in image: plus the network, and vault env travels per command,
// never into the pod spec.
//
// The workspace root lives on storage every node reaches (a hostPath on
// a single node, a ReadWriteMany claim in production) and the door
// policy's projection becomes volume mounts of it with subPath and
// readOnly, as image:'s bind mounts. Vault files become a Secret owned by
// the pod, projected read-only and owner-only at their targets; their
// digest is part of the pod's fingerprint, so a rotated credential
// re-creates the pod on the next command.
//
// A conversation whose sandbox.network is allowlist or none, or whose
// vault holds placeholder secrets, goes out through hutch's egress proxy
// only: the agent of hutch's exec stream relays its commands'
// connections over that stream, and a proxied pod is selected by a
// NetworkPolicy that denies it all egress (see egress.go).
//
// Boosts and temporary limits resize the running pod in place when the
// cluster allows it, else re-create it; they live in the pod's
// annotations, so they end with the pod and every hutch replica sees them.
// Pod names are unique in a namespace, and re-creates delete with a UID
// precondition: two replicas racing for one conversation end with one
// pod, by the API server's own concurrency control, not a lock of ours.
package kube
