package box_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/hutchsandbox/hutch/internal/project/box"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/sandbox/sandboxtest"
)

// TestFiles runs the files suite against the project sandbox: each check
// works in a directory of its own in the project, which the container
// mounts at its own path, with file operations confined to the project
// as the team MCP server's are.
func TestFiles(t *testing.T) {
	f := newFixture(t, nil)
	tg := up(t, f.box(t))
	rt := targetRuntime{tg}
	var n atomic.Int64
	sandboxtest.RunFiles(t, sandboxtest.Harness{New: func(t *testing.T) (sandbox.Runtime, sandbox.Spec) {
		dir := filepath.Join(f.project, "files-"+strconv.FormatInt(n.Add(1), 10))
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		return rt, sandbox.Spec{OfficeDir: dir, OfficeRuntimePath: dir, Mounts: []sandbox.Mount{{HostPath: f.project, RuntimePath: f.project}}}
	}})
}

// targetRuntime is the project sandbox seen as a runtime: commands and
// files through its agent, the project's mounts managed by its spec.
type targetRuntime struct{ tg *box.Target }

func (r targetRuntime) Mode() sandbox.Mode {
	return sandbox.Mode{Kind: sandbox.KindContainer, Target: r.tg.Name}
}

func (r targetRuntime) Capabilities() sandbox.Capabilities {
	return sandbox.CapabilitiesOf(sandbox.KindContainer)
}

func (r targetRuntime) Exec(ctx context.Context, spec sandbox.Spec, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	if req.Dir == "" {
		req.Dir = spec.OfficeRuntimePath
	}
	return r.tg.Agent().Exec(ctx, req)
}

func (r targetRuntime) Files(spec sandbox.Spec) sandbox.Files {
	return r.tg.Files(spec.OfficeRuntimePath, spec.Roots())
}
