package host_test

import (
	"path/filepath"
	"testing"

	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/sandbox/host"
	"github.com/hutchsandbox/hutch/internal/sandbox/sandboxtest"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	sandboxtest.Run(t, sandboxtest.Harness{
		New: func(t *testing.T) (sandbox.Runtime, sandbox.Spec) {
			// The office as pwd prints it: no symlinks in the path.
			dir, err := filepath.EvalSymlinks(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			return host.New(nil), sandbox.Spec{OfficeKey: "conformance", OfficeDir: dir, OfficeRuntimePath: dir}
		},
	})
}
