package tools

import (
	"context"

	"github.com/hutchsandbox/hutch/internal/sandbox"
)

// Sandbox is what the tools need of one conversation's runtime: its file
// operations (sandbox.Files: paths absolute as the runtime sees them,
// confined to Roots; the tools resolve relative paths against Office
// first) and its commands.
type Sandbox interface {
	sandbox.Files
	// Exec runs one command (the exec contract of internal/sandbox).
	Exec(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error)
}
