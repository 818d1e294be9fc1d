package container_test

import (
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/sandbox/sandboxtest"
)

// TestConformance runs the exec contract against one operator container
// shared by every check, each as a conversation of its own (its own
// office), through one runtime: that is how the mode is used.
func TestConformance(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.newBox(t, boxOptions{})
	rt := e.runtime(t, b, nil)
	var n atomic.Int64
	sandboxtest.Run(t, sandboxtest.Harness{
		New: func(t *testing.T) (sandbox.Runtime, sandbox.Spec) {
			return rt, b.office(t, "conformance-"+strconv.FormatInt(n.Add(1), 10))
		},
	})
}

// TestFiles runs the files suite against one operator container, each
// check a conversation whose office the container mounts under
// /workspace, as the mode expects the operator to have done.
func TestFiles(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.newBox(t, boxOptions{})
	rt := e.runtime(t, b, nil)
	var n atomic.Int64
	sandboxtest.RunFiles(t, sandboxtest.Harness{
		New: func(t *testing.T) (sandbox.Runtime, sandbox.Spec) {
			spec := b.office(t, "files-"+strconv.FormatInt(n.Add(1), 10))
			spec.Mounts = []sandbox.Mount{{HostPath: spec.OfficeDir, RuntimePath: spec.OfficeRuntimePath}}
			return rt, spec
		},
	})
}
