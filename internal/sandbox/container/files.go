package container

import (
	"github.com/hutchsandbox/hutch/internal/agent"
	"github.com/hutchsandbox/hutch/internal/sandbox"
)

// Files returns the conversation's file operations, served by the agent
// hutch copies into the operator's container and confined to the runtime
// paths of the door policy's plan: the container is expected to mount the
// workspace at /workspace, and file operations reach no further than the
// policy grants there, whatever else the operator mounted.
func (r *Runtime) Files(spec sandbox.Spec) sandbox.Files {
	return agent.Files(r.agent, spec.OfficeRuntimePath, spec.Roots())
}
