package host

import (
	"github.com/hutchsandbox/hutch/internal/agent"
	"github.com/hutchsandbox/hutch/internal/sandbox"
)

// Files returns the conversation's file operations, run in this process
// with the agent's confinement: the roots are the door policy's plan at
// its host paths (host mode's mounts are the paths themselves), and
// relative paths start at the office.
func (r *Runtime) Files(spec sandbox.Spec) sandbox.Files {
	return agent.LocalFiles(spec.OfficeRuntimePath, spec.Roots())
}
