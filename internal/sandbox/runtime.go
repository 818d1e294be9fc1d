package sandbox

import (
	"context"
	"io"
	"time"

	"github.com/hutchsandbox/hutch/internal/netpolicy"
)

// Runtime is one mode's way of running commands for conversations.
// Implementations live in internal/sandbox/<mode> and are pinned with
// `var _ sandbox.Runtime = (*Runtime)(nil)`.
type Runtime interface {
	// Mode returns the parsed mode this runtime serves.
	Mode() Mode
	// Capabilities returns what the mode can enforce; it never changes
	// for the life of the runtime.
	Capabilities() Capabilities
	// Exec runs one command for the conversation described by spec and
	// blocks until it ends. The spec has already been admitted by policy
	// (see Admit). A command that ran and exited non-zero is not an error:
	// its code is in the result. Errors mean the command could not be
	// started (class errdefs.ErrInvalid for a bad request,
	// errdefs.ErrUnavailable when the runtime cannot be reached).
	// Cancelling ctx aborts the command: its whole process group is killed
	// and the result has Aborted set.
	Exec(ctx context.Context, spec Spec, req ExecRequest) (ExecResult, error)
	// Files returns the file operations of the conversation spec
	// describes, confined to the roots the mode gives it (spec.Roots() in
	// every mode that sees the host workspace). It does no work itself:
	// each operation reaches the runtime as Exec does, creating or
	// starting it when needed.
	Files(spec Spec) Files
}

// Mount is one path projected into a runtime.
type Mount struct {
	// HostPath is the path on the host.
	HostPath string
	// RuntimePath is where the runtime sees it.
	RuntimePath string
	// ReadOnly marks a mount the runtime cannot write.
	ReadOnly bool
}

// Spec describes the conversation a command runs for: what a mode needs
// to find, create or verify its runtime.
type Spec struct {
	// OfficeKey names the conversation's office (and, in managed modes, its runtime).
	OfficeKey string
	// Platform and ConversationID are the conversation's address, recorded
	// on managed runtimes so an operator can tell whose runtime it is.
	Platform, ConversationID string
	// OfficeDir is the office on the host.
	OfficeDir string
	// OfficeRuntimePath is where the runtime sees the office; commands start there.
	OfficeRuntimePath string
	// Mounts is the door policy's projection: what hutch mounts in the
	// managed modes, the paths themselves in host mode, and what an
	// existing container is expected to mount (container:); file
	// operations are confined to their runtime paths.
	Mounts []Mount
	// VaultFiles are the vault's file credentials, projected read-only;
	// their contents are part of the runtime's fingerprint, so rotating a
	// credential re-creates the runtime on the next command.
	VaultFiles []Mount
	// Limits are the conversation's base resource limits (from settings);
	// a boost or temporary limits override them until the runtime stops.
	Limits Limits
	// DiskCeiling is the most the runtime may write outside its office
	// and mounts (sandbox.ceiling.disk), in the managed modes that
	// enforce it; 0: none.
	DiskCeiling int64
	// Network is the effective sandbox.network. Under a proxied mode the
	// runtime has no route of its own, only hutch's egress proxy; "" is
	// open in the modes that have a route (and none in a microVM).
	Network netpolicy.Mode
	// NetworkAllow lists the hosts reachable through hutch's egress proxy
	// under the allowlist mode (sandbox.network.allow).
	NetworkAllow []string
	// Placeholders: the conversation's vault holds placeholder secrets,
	// so commands get the proxy (and trust its CA) even when the network
	// is open.
	Placeholders bool
}

// DefaultOutputLimit bounds how many bytes of each stream an exec keeps in
// memory when the caller asks for captured output.
const DefaultOutputLimit = 10 << 20

// ExecRequest is one command. The same contract holds in every mode.
type ExecRequest struct {
	// Argv is the command. A single element is a shell string run with
	// `sh -c`; more elements are run directly, without a shell.
	Argv []string
	// Dir is the working directory as the runtime sees it. Relative paths
	// resolve against the office; empty means the office.
	Dir string
	// Env is injected into this command only (vault env in modes that
	// inject it). It is never written to a runtime's config, argv or logs.
	Env map[string]string
	// TimeZone, when set, is the command's TZ unless Env sets one: the
	// configured sandbox.timezone, honoured in every mode (host mode
	// included, which injects no Env).
	TimeZone string
	// Stdin feeds the command; nil means an empty stdin.
	Stdin io.Reader
	// Stdout and Stderr receive the streams, kept apart, as they come.
	// nil discards.
	Stdout, Stderr io.Writer
	// Timeout, when positive, kills the whole command after that long.
	Timeout time.Duration
	// OutputLimit, when positive, caps how many bytes of each stream reach
	// Stdout and Stderr; the rest is read and dropped, and the result says
	// so. Zero means no cap (streaming callers that hold nothing).
	OutputLimit int64
}

// ExecResult is how a command ended.
type ExecResult struct {
	// ExitCode is the command's exit status; -1 when it was killed by a
	// signal or never reported one.
	ExitCode int
	// Signal names the signal that ended the command on its own (e.g.
	// "SIGSEGV"), so a crash is not mistaken for a kill; empty when it
	// exited, timed out or was aborted.
	Signal string
	// TimedOut: the command ran past its Timeout and was killed.
	TimedOut bool
	// KillUnconfirmed, with TimedOut: the runtime stopped answering (it
	// was paused, frozen or starved), so hutch gave up on it a grace
	// after the timeout without its word that the command was killed.
	// The command may still run once the runtime answers again.
	KillUnconfirmed bool
	// Aborted: the caller cancelled and the command was killed.
	Aborted bool
	// OOMKilled: the runtime's memory limit killed the command.
	OOMKilled bool
	// StdoutTruncated and StderrTruncated: output past OutputLimit was dropped.
	StdoutTruncated, StderrTruncated bool
	// StdoutBytes and StderrBytes count every byte the command wrote,
	// including any that were dropped.
	StdoutBytes, StderrBytes int64
	// Duration is the wall time from start to end.
	Duration time.Duration
	// Timeout echoes the request's timeout, so Message can name it.
	Timeout time.Duration
}

// Message is the line hutch shows when a command did not end on its own,
// or "" when it did. The texts are the ones agents and operators know.
func (r ExecResult) Message() string {
	switch {
	case r.TimedOut && r.KillUnconfirmed:
		return "Command timed out after " + formatSeconds(r.Timeout) + " seconds; the sandbox stopped answering, so hutch could not confirm the command was killed"
	case r.TimedOut:
		return "Command timed out after " + plural(formatSeconds(r.Timeout), "second", "seconds")
	case r.Aborted:
		return "Command aborted"
	case r.OOMKilled:
		return "Command was killed: the sandbox ran out of memory"
	case r.Signal != "":
		return "Command was killed by " + r.Signal
	}
	return ""
}

// TruncationNotice says how much output was dropped, or "" when none was.
func (r ExecResult) TruncationNotice(limit int64) string {
	switch {
	case r.StdoutTruncated && r.StderrTruncated:
		return "[output truncated: stdout " + ByteCount(r.StdoutBytes) + " and stderr " + ByteCount(r.StderrBytes) + ", only the first " + ByteCount(limit) + " of each kept]"
	case r.StdoutTruncated:
		return "[output truncated: stdout " + ByteCount(r.StdoutBytes) + ", only the first " + ByteCount(limit) + " kept]"
	case r.StderrTruncated:
		return "[output truncated: stderr " + ByteCount(r.StderrBytes) + ", only the first " + ByteCount(limit) + " kept]"
	}
	return ""
}

// EnvWithTimeZone returns the env a command gets: Env, plus TZ set to
// TimeZone when that is set and Env has no TZ. Env is not modified.
func (r ExecRequest) EnvWithTimeZone() map[string]string {
	if _, set := r.Env["TZ"]; r.TimeZone == "" || set {
		return r.Env
	}
	env := make(map[string]string, len(r.Env)+1)
	for k, v := range r.Env {
		env[k] = v
	}
	env["TZ"] = r.TimeZone
	return env
}
