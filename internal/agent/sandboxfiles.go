package agent

import (
	"context"
	"io"
	"os"

	"github.com/hutchsandbox/hutch/internal/sandbox"
)

var _ sandbox.Confined = (*Client)(nil)

// Files returns sandbox.Files served by the agent that connect reaches
// (connecting is the mode's business: creating or starting the runtime,
// dialling its agent), confined to roots, with relative paths starting at
// office. Every mode whose runtime runs an agent returns this from
// Runtime.Files, and the project sandbox serves its tools with it.
func Files(connect func(ctx context.Context) (*Client, error), office string, roots []string) sandbox.Files {
	return sandbox.ConfinedFiles(func(ctx context.Context) (sandbox.Confined, error) {
		c, err := connect(ctx)
		if err != nil {
			return nil, err
		}
		return c, nil
	}, office, roots)
}

// SpecFiles is Files for a managed mode whose agentOf creates or starts
// spec's runtime and returns its agent: office and roots are the spec's.
func SpecFiles(agentOf func(ctx context.Context, spec sandbox.Spec) (*Client, error), spec sandbox.Spec) sandbox.Files {
	return Files(func(ctx context.Context) (*Client, error) { return agentOf(ctx, spec) }, spec.OfficeRuntimePath, spec.Roots())
}

// LocalFiles returns sandbox.Files run in this process with the same
// confinement the agent applies: host mode's file access, where the
// runtime is the host itself.
func LocalFiles(office string, roots []string) sandbox.Files {
	return sandbox.ConfinedFiles(func(context.Context) (sandbox.Confined, error) { return local{}, nil }, office, roots)
}

// local is the confined file functions of this package as sandbox.Confined.
type local struct{}

func (local) ReadFileWithin(_ context.Context, p string, roots []string, w io.Writer) error {
	return ReadFileWithin(p, roots, w)
}

func (local) WriteFileWithin(_ context.Context, p string, roots []string, r io.Reader, mode os.FileMode) error {
	return WriteFileWithin(p, roots, r, mode)
}

func (local) Stat(_ context.Context, p string, roots []string) (sandbox.FileInfo, error) {
	return StatWithin(p, roots)
}

func (local) List(_ context.Context, p string, roots []string) ([]sandbox.FileInfo, error) {
	return ListWithin(p, roots)
}
