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
