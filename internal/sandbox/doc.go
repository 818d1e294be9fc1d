// Package sandbox is the contract every execution mode implements: mode
// parsing, the capability table each mode declares, the refusals policy
// derives from that table, and the exec request and result types.
//
// Capabilities decide refusals before any call: a mode that cannot enforce
// what a conversation's door policy or vault asks for is refused with the
// exact texts operators know, never silently downgraded. One package per
// mode (internal/sandbox/<mode>) implements Runtime.
package sandbox
