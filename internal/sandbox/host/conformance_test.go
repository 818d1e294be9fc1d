package host_test

import (
	"os"
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

// TestFiles runs the files suite against host mode's Files, over an
// office in a workspace of its own.
func TestFiles(t *testing.T) {
	t.Parallel()
	sandboxtest.RunFiles(t, sandboxtest.Harness{
		New: func(t *testing.T) (sandbox.Runtime, sandbox.Spec) {
			ws, err := filepath.EvalSymlinks(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			dir := filepath.Join(ws, "office")
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			return host.New(nil), sandbox.Spec{
				OfficeKey: "files", OfficeDir: dir, OfficeRuntimePath: dir,
				Mounts: []sandbox.Mount{{HostPath: dir, RuntimePath: dir}},
			}
		},
	})
}
