package sandbox

import (
	"fmt"
	"strings"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/netpolicy"
)

// Requirements is what one conversation's run asks of a mode: derived from
// its effective door policy and the contents of its vault.
type Requirements struct {
	// IsolatedOffice: the door policy is isolated (only the office is visible).
	IsolatedOffice bool
	// ReadOnlyMemory: shared MEMORY.md must be read-only (private visibility).
	ReadOnlyMemory bool
	// VaultFiles: the vault holds file credentials that must be projected.
	VaultFiles bool
	// Network is the conversation's effective sandbox.network.
	Network netpolicy.Mode
	// Placeholders: the vault marks entries to be delivered as placeholders.
	Placeholders bool
}

// Admit checks requirements against the mode's declared capabilities and
// returns the first refusal, or nil. Refusals are of class
// errdefs.ErrFailedPrecondition and carry the seed's exact texts, followed
// by what to do instead.
func Admit(kind Kind, caps Capabilities, req Requirements) error {
	if req.IsolatedOffice && !caps.IsolatedOffice {
		return errdefs.New(errdefs.ErrFailedPrecondition, fmt.Sprintf(
			"Sandbox '%s' cannot provide an isolated conversation office; use image:*, or explicitly choose trusted workspace policy", kind))
	}
	if req.ReadOnlyMemory && !caps.ReadOnlyMemory {
		return errdefs.New(errdefs.ErrFailedPrecondition, fmt.Sprintf(
			"Sandbox '%s' cannot enforce read-only shared workspace memory; use image:*, or explicitly choose isolated or trusted read-write workspace policy", kind))
	}
	if req.VaultFiles && !caps.VaultFileMounts {
		return errdefs.New(errdefs.ErrFailedPrecondition, fmt.Sprintf(
			"Sandbox type %q does not support vault file mounts; keep credentials in vault env, or use image:* to project files", string(kind)))
	}
	if req.Network != "" && !caps.EnforcesEgress(req.Network) {
		return errdefs.New(errdefs.ErrFailedPrecondition, fmt.Sprintf(
			"Sandbox '%s' cannot enforce sandbox.network %s (it can: %s); use image:* or kube:*, or set the conversation's network with hutch sandbox network", kind, req.Network, egressList(caps.Egress)))
	}
	if req.Placeholders && !caps.PlaceholderSecrets {
		return errdefs.New(errdefs.ErrFailedPrecondition, fmt.Sprintf(
			"Sandbox '%s' cannot deliver placeholder secrets (they need hutch's egress proxy in front of the runtime); use image:*, kube:* or gondolin:default, or turn the marks off with hutch vault placeholder <vault> NAME off", kind))
	}
	return nil
}

// NotImplemented is the refusal for a mode this build parses and plans
// for but cannot run yet.
func NotImplemented(m Mode) error {
	return errdefs.New(errdefs.ErrNotSupported, fmt.Sprintf(
		"Sandbox '%s' is not available in this build yet; use host, container:<name>, image:<image>, cloudflare:<sandbox-id>, gondolin:default or kube:<image>", m.Kind))
}

// NotRunning is the refusal of a boost or temporary limits for an office
// whose runtime does not run: they last one run of it.
func NotRunning(officeKey string) error {
	return errdefs.New(errdefs.ErrFailedPrecondition, fmt.Sprintf(
		"The runtime of office %s is not running; boosts and temporary limits last one run, so run a command first", officeKey))
}

func egressList(ms []netpolicy.Mode) string {
	if len(ms) == 0 {
		return "none of them"
	}
	s := make([]string, len(ms))
	for i, m := range ms {
		s[i] = string(m)
	}
	return strings.Join(s, ", ")
}
