// Package testenv holds the helpers tests share to reach real components:
// the Docker engine (Docker skips without one, except in CI where it
// fails), a tiny busybox image built locally without a registry, a static
// hutch binary built once per test process, unique resource names derived
// from the test, and label-based cleanup of what a test created.
//
// It may import testing and is imported only by tests.
package testenv
