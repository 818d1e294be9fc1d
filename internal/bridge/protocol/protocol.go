// Package protocol holds the wire types of the bridge protocol
// (docs/bridge.md): the JSON bodies of GET /health, POST /exec (base and
// streamed) and POST /cancel, and the names of the extensions. It imports
// nothing of hutch, so both ends (hutch bridge serve and the cloudflare:
// mode's client) share it without an import cycle.
package protocol

// BridgeName is what hutch's own bridge reports as "bridge" in /health.
const BridgeName = "hutch"

// The extensions a bridge may list in Health.Extensions. A client uses one
// only when the bridge lists it.
const (
	// ExtStream: "stream": true answers /exec with NDJSON frames.
	ExtStream = "stream"
	// ExtCancel: closing a streamed exec, or POST /cancel, kills it.
	ExtCancel = "cancel"
	// ExtExecID: "execId" makes a repeat answer 409 without running.
	ExtExecID = "execId"
	// ExtArgv: "argv" / "argvBase64" run a program without a shell.
	ExtArgv = "argv"
	// ExtStdin: "stdin" (base64) is the command's standard input.
	ExtStdin = "stdin"
)

// The paths of the protocol.
const (
	PathHealth = "/health"
	PathExec   = "/exec"
	PathCancel = "/cancel"
)

// ContentTypeJSON and ContentTypeNDJSON are the response types: JSON for
// every answer but a streamed exec, which is NDJSON.
const (
	ContentTypeJSON   = "application/json"
	ContentTypeNDJSON = "application/x-ndjson"
)

// DefaultCwd is the working directory of a command that names none.
const DefaultCwd = "/workspace"

// Health is the body of GET /health from a bridge with extensions.
type Health struct {
	OK         bool     `json:"ok"`
	Bridge     string   `json:"bridge"`
	Version    string   `json:"version"`
	Extensions []string `json:"extensions"`
}

// Has reports whether the bridge lists extension ext.
func (h Health) Has(ext string) bool {
	for _, e := range h.Extensions {
		if e == ext {
			return true
		}
	}
	return false
}

// ExecRequest is the body of POST /exec: the base fields, then the
// extensions' fields (omitted when unused, so a base bridge sees a base
// request).
type ExecRequest struct {
	// SandboxID names the remote runtime; a bridge creates it on first use.
	SandboxID string `json:"sandboxId"`
	// Command is run with sh -c.
	Command string `json:"command,omitempty"`
	// Cwd is the working directory in the runtime; "" means DefaultCwd.
	Cwd string `json:"cwd,omitempty"`
	// TimeoutSeconds, when positive, kills the command and everything it
	// started after that long.
	TimeoutSeconds float64 `json:"timeoutSeconds,omitempty"`
	// Env is added to this command only. A bridge never logs or keeps it.
	Env map[string]string `json:"env,omitempty"`
	// TimeZone, when set, is the command's TZ unless Env sets one (the
	// caller's sandbox.timezone). A bridge that does not know the field
	// ignores it, which is why it is not sent inside Env: a bridge serving
	// host mode refuses any env.
	TimeZone string `json:"timeZone,omitempty"`

	// Argv (extension argv) runs a program directly, instead of Command.
	Argv []string `json:"argv,omitempty"`
	// ArgvBase64 (extension argv) is Argv with every argument in standard
	// base64, for arguments that are not valid UTF-8.
	ArgvBase64 []string `json:"argvBase64,omitempty"`
	// Stdin (extension stdin) is the command's standard input, in
	// standard base64; without it stdin is empty.
	Stdin string `json:"stdin,omitempty"`
	// ExecID (extension execId) is 32 hex digits, unique per command.
	ExecID string `json:"execId,omitempty"`
	// Stream (extension stream) asks for an NDJSON answer of Frames.
	Stream bool `json:"stream,omitempty"`
}

// ExecResponse is the 200 body of a base (not streamed) POST /exec.
type ExecResponse struct {
	Stdout string `json:"stdout"`
	Stderr string `json:"stderr"`
	// Code is the exit status; -1 when the command was killed or never
	// reported one.
	Code int `json:"code"`
	// Error is empty when the command ran to its end on its own; else it
	// says what happened (a timeout, truncated output, ...).
	Error string `json:"error"`
}

// Frame is one line of a streamed POST /exec: exactly one field is set.
// Output is base64 on the wire ([]byte), so any bytes pass. The Exit line
// is last; a stream that ends without one means the command's end is
// unknown.
type Frame struct {
	Stdout []byte `json:"stdout,omitempty"`
	Stderr []byte `json:"stderr,omitempty"`
	Exit   *Exit  `json:"exit,omitempty"`
}

// Exit is how a streamed command ended.
type Exit struct {
	Code int `json:"code"`
	// Signal names the signal that ended the command on its own
	// ("SIGSEGV"); empty when it exited, timed out or was cancelled.
	Signal string `json:"signal"`
	// TimedOut: timeoutSeconds killed it.
	TimedOut bool `json:"timedOut"`
	// OOMKilled: the runtime's memory limit killed it. Optional: a bridge
	// that cannot tell leaves it out.
	OOMKilled bool `json:"oomKilled,omitempty"`
	// Error is empty when the command ended on its own; else what happened.
	Error string `json:"error"`
}

// CancelRequest is the body of POST /cancel.
type CancelRequest struct {
	SandboxID string `json:"sandboxId"`
	ExecID    string `json:"execId"`
}

// CancelResponse is the 200 body of POST /cancel: true when the command
// was running and is now killed, false when it had ended or is unknown.
type CancelResponse struct {
	Cancelled bool `json:"cancelled"`
}

// ErrorBody is the body of every non-2xx answer.
type ErrorBody struct {
	Error string `json:"error"`
}
