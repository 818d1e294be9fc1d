// Package testenv holds the helpers tests share to reach real components:
// the Docker engine (Docker skips without one, except in CI where it
// fails), a tiny busybox image built locally without a registry, a static
// hutch binary built once per test process, unique resource names derived
// from the test, and label-based cleanup of what a test created; the
// repo's Kubernetes test cluster (hack/kube-up) and the images it needs;
// a headless Chromium for browser tests, with screenshots as artefacts;
// Debian images of git and of network clients built from a debootstrap
// base; an HTTPS server with a CA of its own that records what it gets;
// running a container, loading an image, a real hutch serve; the
// reference devcontainer CLI (hack/devcontainer-cli).
//
// It may import testing and is imported only by tests.
package testenv
