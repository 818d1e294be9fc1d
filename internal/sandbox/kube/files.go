package kube

import (
	"github.com/hutchsandbox/hutch/internal/agent"
	"github.com/hutchsandbox/hutch/internal/sandbox"
)

// Files returns the conversation's file operations, served by the agent
// of its runtime (created or started on first use, as for a command) and
// confined to the runtime paths of its mounts.
func (r *Runtime) Files(spec sandbox.Spec) sandbox.Files { return agent.SpecFiles(r.Agent, spec) }
