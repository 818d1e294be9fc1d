package sandbox

import (
	"slices"

	"github.com/hutchsandbox/hutch/internal/netpolicy"
)

// WorkspaceAccess says how a mode's runtime reaches the host workspace.
type WorkspaceAccess string

const (
	// WorkspaceHost: commands run on the host and see every host path.
	WorkspaceHost WorkspaceAccess = "host"
	// WorkspaceSelfManaged: the operator mounted what the runtime sees.
	WorkspaceSelfManaged WorkspaceAccess = "self-managed"
	// WorkspaceManaged: hutch mounts exactly the door policy's projection.
	WorkspaceManaged WorkspaceAccess = "managed"
	// WorkspaceNone: the runtime is remote; the host workspace is not synced.
	WorkspaceNone WorkspaceAccess = "none"
)

// Capabilities is what a mode can enforce. Policy reads it before anything
// runs; a false field that a conversation needs is a refusal, never a
// silent downgrade. The fields mirror the capability table of the seeds.
type Capabilities struct {
	// CommandExecution: the mode runs commands at all.
	CommandExecution bool
	// ManagedLifecycle: hutch creates, stops and re-creates the runtime.
	ManagedLifecycle bool
	// PerConversationRuntime: each conversation gets a runtime of its own.
	PerConversationRuntime bool
	// VaultEnv: vault env variables are injected into each command.
	VaultEnv bool
	// PerConversationVault: the vault is keyed by the conversation's office
	// (otherwise by the platform user or the container name).
	PerConversationVault bool
	// VaultFileMounts: vault file credentials are projected into the runtime.
	VaultFileMounts bool
	// Workspace says how the runtime reaches the host workspace.
	Workspace WorkspaceAccess
	// IsolatedOffice: the runtime can be limited to the conversation's office.
	IsolatedOffice bool
	// ReadOnlyMemory: the shared MEMORY.md can be mounted read-only.
	ReadOnlyMemory bool
	// IdleStop: idle runtimes are stopped and re-created on the next command.
	IdleStop bool
	// Limits: default CPU, memory and process limits are enforced.
	Limits bool
	// Boost: a conversation's limits can be raised temporarily.
	Boost bool
	// AgentLimits: the agent's sandbox tool may set limits.
	AgentLimits bool
	// Egress lists the sandbox.network modes the runtime can enforce.
	// Open means a route of the runtime's own (or the host's); the
	// proxied modes mean no route but hutch's egress proxy.
	Egress []netpolicy.Mode
	// PlaceholderSecrets: vault entries marked as placeholders reach
	// commands as placeholders, and hutch's proxy substitutes them.
	PlaceholderSecrets bool
	// Recommendation is the mode's standing, as the seeds rate it.
	Recommendation string
}

// openOnly is the egress of a mode whose network hutch does not own.
var openOnly = []netpolicy.Mode{netpolicy.ModeOpen}

// managed is what a mode that creates one runtime per conversation and
// mounts exactly the door policy's projection enforces: image:, and the
// modes built on the same contract (gondolin:, kube:). They differ only
// in their standing.
func managed(recommendation string) Capabilities {
	return Capabilities{
		CommandExecution:       true,
		ManagedLifecycle:       true,
		PerConversationRuntime: true,
		VaultEnv:               true,
		PerConversationVault:   true,
		VaultFileMounts:        true,
		Workspace:              WorkspaceManaged,
		IsolatedOffice:         true,
		ReadOnlyMemory:         true,
		IdleStop:               true,
		Limits:                 true,
		Boost:                  true,
		AgentLimits:            true,
		Egress:                 netpolicy.Modes,
		PlaceholderSecrets:     true,
		Recommendation:         recommendation,
	}
}

// microVM is managed, with no route of its own: its network is the proxy
// (allowlist) or nothing (none). Placeholders are substituted by the VM's
// proxy, which terminates TLS with the office's CA that the guest trusts;
// under none nothing leaves, placeholders included.
func microVM(recommendation string) Capabilities {
	c := managed(recommendation)
	c.Egress = []netpolicy.Mode{netpolicy.ModeAllowlist, netpolicy.ModeNone}
	return c
}

// capabilityTable is seed 000's table, with gondolin from seed 001 and
// kube, the Kubernetes mode.
var capabilityTable = map[Kind]Capabilities{
	KindHost: {
		CommandExecution: true,
		Workspace:        WorkspaceHost,
		Egress:           openOnly,
		Recommendation:   "local dev",
	},
	KindContainer: {
		CommandExecution: true,
		VaultEnv:         true,
		Workspace:        WorkspaceSelfManaged,
		Egress:           openOnly,
		Recommendation:   "legacy / compatibility",
	},
	KindImage: managed("mainline"),
	KindCloudflare: {
		CommandExecution:       true,
		PerConversationRuntime: true, // the bridge sandbox id is scoped per office
		VaultEnv:               true,
		PerConversationVault:   true,
		Workspace:              WorkspaceNone,
		Egress:                 openOnly,
		Recommendation:         "under construction",
	},
	KindGondolin: microVM("preview"),
	KindKube:     managed("scale-out"),
}

// CapabilitiesOf returns the capabilities a kind declares. An unknown kind
// declares nothing, so every check on it refuses.
func CapabilitiesOf(k Kind) Capabilities {
	return capabilityTable[k]
}

// ManagedProjection reports whether the mode mounts exactly the door
// policy's projection, which is what enforcing isolation requires.
func (c Capabilities) ManagedProjection() bool {
	return c.Workspace == WorkspaceManaged
}

// EnforcesEgress reports whether the mode can hold a runtime to m.
func (c Capabilities) EnforcesEgress(m netpolicy.Mode) bool {
	return slices.Contains(c.Egress, m)
}
