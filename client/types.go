package client

import (
	"encoding/json"
	"io/fs"
	"time"
	"unicode/utf8"
)

// This file holds the API's wire types: the bodies it takes and the
// answers it gives. They are the daemon's own (its handlers use them
// through aliases), so what a Client sends and decodes is exactly what
// the daemon reads and writes. Keys are lower camelCase; a key is added
// to, never renamed or removed.

// Conversation names the conversation a request is for: a platform
// (slack, discord, telegram, github, web) and the platform's raw id of
// the conversation.
type Conversation struct {
	Platform       string `json:"platform"`
	ConversationID string `json:"conversationId"`
	// ChannelKind, when given, is recorded (what a chat adapter knows):
	// public_channel, private_channel, im or external. It decides the
	// door policy of a conversation that has none set.
	ChannelKind string `json:"channelKind,omitempty"`
	// User is the platform user whose vault host mode uses.
	User string `json:"user,omitempty"`
}

// ConversationRequest is the body of calls that name only a conversation
// (/v1/policy, /v1/channel-kind).
type ConversationRequest struct {
	Conversation Conversation `json:"conversation"`
}

// Health is GET /v1/health's answer.
type Health struct {
	// Status is "ok" when the daemon serves.
	Status string `json:"status"`
	// Version is the daemon's version, as Version.Version.
	Version string `json:"version"`
	// Mode is where the daemon runs commands, e.g. host or
	// image:debian:stable.
	Mode      string `json:"mode"`
	StateDir  string `json:"stateDir"`
	Workspace string `json:"workspace"`
	// ManagedProjection is false for the modes that do not mount exactly
	// the door's projection (host, container, cloudflare): they cannot
	// enforce an isolated office or read-only shared memory. Never
	// omitted, so false is said, not implied.
	ManagedProjection bool `json:"managedProjection"`
}

// Version is what a hutch binary says of its build: GET /v1/version's
// answer for the daemon, and the "client" of hutch version --json.
type Version struct {
	// Version is hutch's version as set at build time (-ldflags -X
	// .../internal/cli.Version=...), "dev" when not set; /v1/health and
	// hutch --version report the same.
	Version string `json:"version"`
	// Module is the main module's version in the build info: a tag such
	// as v1.2.0 when built with go install ...@v1.2.0, a pseudo-version
	// stamped from the checkout, or "(devel)".
	Module string `json:"module"`
	// Commit is the VCS revision the binary was built from (vcs.revision),
	// "" when the build recorded none (go test, -buildvcs=false, a build
	// outside a checkout).
	Commit string `json:"commit"`
	// CommitTime is the revision's commit time (vcs.time, RFC 3339), ""
	// when not recorded.
	CommitTime string `json:"commitTime,omitempty"`
	// Modified is true when the checkout had changes not committed
	// (vcs.modified).
	Modified bool `json:"modified"`
	// GoVersion is the Go toolchain that built the binary, e.g. go1.26.8.
	GoVersion string `json:"goVersion"`
}

// OfficeEntry is one registered office (GET /v1/offices lists them).
type OfficeEntry struct {
	Platform       string    `json:"platform"`
	ConversationID string    `json:"conversationId"`
	OfficeKey      string    `json:"officeKey"`
	RecordedAt     time.Time `json:"recordedAt"`
}

// ExecRequest is /v1/exec's body.
type ExecRequest struct {
	Conversation Conversation `json:"conversation"`
	// Command is a shell string (run with sh -c); Argv runs without a shell.
	Command string   `json:"command,omitempty"`
	Argv    []string `json:"argv,omitempty"`
	// Cwd is relative to the office, or absolute in the runtime.
	Cwd string `json:"cwd,omitempty"`
	// TimeoutSeconds ends the command (its whole process group) after so
	// long; 0 is no limit.
	TimeoutSeconds float64 `json:"timeoutSeconds,omitempty"`
	// Stdin is fed to the command. It travels in the request, whole:
	// text, up to the daemon's request-body limit (8 MiB by default).
	Stdin string `json:"stdin,omitempty"`
	// MaxOutput caps each stream's bytes (0: the default, 10 MiB); what
	// is cut is said by ExecResult's StdoutTruncated and StderrTruncated.
	MaxOutput int64 `json:"maxOutput,omitempty"`
}

// Frame is one line of /v1/exec's streamed answer: output as it comes
// (Data is base64 in JSON, so any bytes pass), then exactly one Result or
// Error.
type Frame struct {
	// Stream is stdout or stderr, for a frame of output.
	Stream string      `json:"stream,omitempty"`
	Data   []byte      `json:"data,omitempty"`
	Result *ExecResult `json:"result,omitempty"`
	Error  *ErrorBody  `json:"error,omitempty"`
}

// ExecResult is how a command ended.
type ExecResult struct {
	// ExitCode is the command's exit status; -1 when it was killed by a
	// signal or never reported one.
	ExitCode int `json:"exitCode"`
	// Signal names the signal that ended the command on its own (e.g.
	// SIGSEGV), so a crash is not mistaken for a kill; empty when it
	// exited, timed out or was aborted.
	Signal string `json:"signal,omitempty"`
	// TimedOut: the command ran past TimeoutSeconds and was killed.
	TimedOut bool `json:"timedOut,omitempty"`
	// KillUnconfirmed, with TimedOut: the runtime stopped answering, so
	// hutch gave up on it a grace after the timeout without its word
	// that the command was killed; it may still run.
	KillUnconfirmed bool `json:"killUnconfirmed,omitempty"`
	// Aborted: the caller cancelled and the command was killed.
	Aborted bool `json:"aborted,omitempty"`
	// OOMKilled: the runtime's memory limit killed the command.
	OOMKilled bool `json:"oomKilled,omitempty"`
	// StdoutTruncated and StderrTruncated: a stream passed MaxOutput and
	// the rest was dropped.
	StdoutTruncated bool `json:"stdoutTruncated,omitempty"`
	StderrTruncated bool `json:"stderrTruncated,omitempty"`
	// StdoutBytes and StderrBytes count every byte the command wrote,
	// including any that were dropped.
	StdoutBytes     int64   `json:"stdoutBytes"`
	StderrBytes     int64   `json:"stderrBytes"`
	DurationSeconds float64 `json:"durationSeconds"`
	// Message says why the command did not end on its own ("" if it did).
	Message string `json:"message,omitempty"`
}

// LimitsRequest is the body of /v1/sandbox/{status,boost,limits,stop,
// remove}: the conversation, and for boost and limits the numbers, as
// text: cpus "1.5", memory "2g" or bytes, pids "512".
type LimitsRequest struct {
	Conversation Conversation `json:"conversation"`
	CPUs         string       `json:"cpus,omitempty"`
	Memory       string       `json:"memory,omitempty"`
	Pids         string       `json:"pids,omitempty"`
}

// Status is a managed runtime's state, as the /v1/sandbox calls answer
// it.
type Status struct {
	OfficeKey      string `json:"officeKey"`
	Platform       string `json:"platform,omitempty"`
	ConversationID string `json:"conversationId,omitempty"`
	// Name is the runtime's name in its engine.
	Name string `json:"name"`
	// ID is the runtime's id in its engine (a container id, a pod uid).
	ID string `json:"id,omitempty"`
	// State is running, stopped or missing.
	State string `json:"state"`
	// Image is the reference the runtime was made from; ImageID its id.
	Image   string `json:"image,omitempty"`
	ImageID string `json:"imageId,omitempty"`
	// CPUs, MemoryBytes and Pids are the limits in force (0: none).
	CPUs        float64 `json:"cpus,omitempty"`
	MemoryBytes int64   `json:"memoryBytes,omitempty"`
	Pids        int64   `json:"pids,omitempty"`
	// Boosted: a boost is in force; TempLimits: limits set for a while.
	// Both end when the runtime stops.
	Boosted    bool `json:"boosted"`
	TempLimits bool `json:"tempLimits"`
	// LimitsApplied says how the limits were applied.
	LimitsApplied string    `json:"limitsApplied,omitempty"`
	StartedAt     time.Time `json:"startedAt,omitzero"`
	// Fingerprint is the hash of what the runtime was built from.
	Fingerprint    string `json:"fingerprint,omitempty"`
	ActiveCommands int    `json:"activeCommands"`
	// LastActivity is when the last command started or ended, when known.
	LastActivity time.Time `json:"lastActivity,omitzero"`
	// Recreated and RecreatedBecause: when and why the runtime was last
	// re-created, when known.
	Recreated        time.Time `json:"recreated,omitzero"`
	RecreatedBecause string    `json:"recreatedBecause,omitempty"`
	// Mode is the managed mode the runtime belongs to (image, gondolin,
	// kube), given by the lists of runtimes (GET /v1/sandbox/runtimes,
	// hutch sandbox ls --json), which may span modes; omitted elsewhere.
	Mode string `json:"mode,omitempty"`
}

// DoorRequest is /v1/door's body: one conversation's policy, or with
// Global the default of all.
type DoorRequest struct {
	Conversation *Conversation `json:"conversation,omitempty"`
	Global       bool          `json:"global,omitempty"`
	// Policy is default, isolated, shared, shared-private or full.
	Policy string `json:"policy"`
}

// PolicyAnswer is a conversation's effective door policy and projection.
type PolicyAnswer struct {
	// Conversation is "platform/id".
	Conversation string `json:"conversation"`
	OfficeKey    string `json:"officeKey"`
	// OfficeDir is the office's directory on the daemon's host, and
	// OfficeDirExists whether it is there yet (the first command makes
	// it); StateDir holds hutch's records of the conversation.
	OfficeDir       string `json:"officeDir"`
	OfficeDirExists bool   `json:"officeDirExists"`
	StateDir        string `json:"stateDir"`
	// Sandbox is the mode the answer is for.
	Sandbox string `json:"sandbox"`
	// Policy is the effective policy, e.g. isolated/conversation.
	Policy string `json:"policy"`
	// Origin says where it came from (set, channel kind, default).
	Origin  string  `json:"origin"`
	Warning string  `json:"warning,omitempty"`
	Mounts  []Mount `json:"mounts"`
	// Refusal is why the daemon's mode cannot serve this policy, when it
	// cannot: its commands are then refused.
	Refusal string `json:"refusal,omitempty"`
	// Projection describes the projection in one line.
	Projection string `json:"projection"`
	// ManagedProjection: the mode mounts exactly Mounts (see Health).
	ManagedProjection bool `json:"managedProjection"`
	// Vault is the vault the conversation's commands get in this mode;
	// absent in host mode, which uses the vault of the request's user.
	Vault *VaultSummary `json:"vault,omitempty"`
}

// VaultSummary names a vault and counts its entries, never valued.
type VaultSummary struct {
	Key string `json:"key"`
	// Env counts its variables, Files its files and directories.
	Env   int `json:"env"`
	Files int `json:"files"`
}

// Mount is one projected path.
type Mount struct {
	HostPath    string `json:"hostPath"`
	RuntimePath string `json:"runtimePath"`
	ReadOnly    bool   `json:"readOnly"`
}

// VaultRequest names a vault (a conversation's, or a user's or
// container's) and what to do with it.
type VaultRequest struct {
	Conversation *Conversation `json:"conversation,omitempty"`
	User         string        `json:"user,omitempty"`
	Container    string        `json:"container,omitempty"`
	// Vars are set by /v1/vault/set; their values are never echoed.
	Vars map[string]string `json:"vars,omitempty"`
	// Name is removed by /v1/vault/remove.
	Name string `json:"name,omitempty"`
}

// VaultEntry is one vault entry, named, never valued.
type VaultEntry struct {
	Name string `json:"name"`
	// Kind is env (a variable), file or dir.
	Kind string `json:"kind"`
	// Placeholder is set on a variable delivered as a placeholder
	// (hutch vault placeholder): commands see a token, and the egress
	// proxy puts the value in requests to Hosts only.
	Placeholder *VaultPlaceholder `json:"placeholder,omitempty"`
}

// VaultPlaceholder is how a variable marked as a placeholder is
// delivered; it holds neither the value nor the token.
type VaultPlaceholder struct {
	// Hosts are the hosts the value is sent to, as allowlist entries.
	Hosts []string `json:"hosts"`
	// Body: the value is put in request bodies too, not only in headers,
	// paths and queries.
	Body bool `json:"body,omitempty"`
	// Expires is when the proxy stops putting the value in; absent:
	// never. Expired says that time has passed.
	Expires *time.Time `json:"expires,omitempty"`
	Expired bool       `json:"expired,omitempty"`
}

// ChatRequest is /v1/chat's body: a chat message such as "/sandbox boost"
// that a bot received in a conversation.
type ChatRequest struct {
	Conversation Conversation `json:"conversation"`
	Message      string       `json:"message"`
}

// ChatReply is the text the bot should post back.
type ChatReply struct {
	Text string `json:"text"`
}

// AdminLinkRequest asks for a one-time admin portal link.
type AdminLinkRequest struct {
	// Who is recorded as the actor of what the link's session does (a
	// chat bot names the platform user who typed /admin).
	Who string `json:"who"`
	// TTL is how long the link is good for, e.g. "30m" (default 30m,
	// at most 24h).
	TTL string `json:"ttl,omitempty"`
}

// AdminLinkResponse is the link and when it expires.
type AdminLinkResponse struct {
	URL     string    `json:"url"`
	Expires time.Time `json:"expires"`
}

// TrailerError carries, after a file's bytes, the error that cut a
// /v1/files/read short (an ErrorBody as JSON); a read that ended whole
// has none.
const TrailerError = "Hutch-Error"

// The headers that name where a call comes from, for the daemon's event
// log (Client.Surface, Client.Who). The daemon takes only the surface
// "cli", the one of hutch's own commands, and only on its unix socket;
// Who is then the user who ran the command, cut to the log's bound.
const (
	HeaderSurface = "Hutch-Surface"
	HeaderWho     = "Hutch-Who"
)

// FileRequest is the body of /v1/files/stat, /v1/files/read and
// /v1/files/list.
type FileRequest struct {
	Conversation Conversation `json:"conversation"`
	// Path is relative to the office, or absolute in the runtime.
	Path string `json:"path"`
}

// WriteAnswer is what /v1/files/write answers.
type WriteAnswer struct {
	// Path is the file written, absolute as the runtime sees it.
	Path  string `json:"path"`
	Bytes int64  `json:"bytes"`
}

// FileInfo describes one path in a runtime. Name and Link are bytes, as
// Linux names are; see MarshalJSON for how they travel.
type FileInfo struct {
	Name    string
	Size    int64
	Mode    fs.FileMode
	ModTime time.Time
	IsDir   bool
	// Link is the target of a symlink ("" otherwise).
	Link string
}

// fileInfoJSON is FileInfo on the wire.
type fileInfoJSON struct {
	Name      string      `json:"name"`
	NameBytes []byte      `json:"nameBytes,omitempty"`
	Size      int64       `json:"size"`
	Mode      fs.FileMode `json:"mode"`
	ModTime   time.Time   `json:"modTime"`
	IsDir     bool        `json:"isDir"`
	Link      string      `json:"link,omitempty"`
	LinkBytes []byte      `json:"linkBytes,omitempty"`
}

// MarshalJSON writes name and link as strings, and, when one is not valid
// UTF-8 (which a JSON string cannot carry: it would arrive with
// replacement characters, naming another file), also its exact bytes in
// base64 as nameBytes or linkBytes.
func (fi FileInfo) MarshalJSON() ([]byte, error) {
	w := fileInfoJSON{Name: fi.Name, Size: fi.Size, Mode: fi.Mode, ModTime: fi.ModTime, IsDir: fi.IsDir, Link: fi.Link}
	if !utf8.ValidString(fi.Name) {
		w.NameBytes = []byte(fi.Name)
	}
	if !utf8.ValidString(fi.Link) {
		w.LinkBytes = []byte(fi.Link)
	}
	return json.Marshal(w)
}

// UnmarshalJSON reads what MarshalJSON writes; the bytes win over the
// strings when both are there.
func (fi *FileInfo) UnmarshalJSON(b []byte) error {
	var w fileInfoJSON
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*fi = FileInfo{Name: w.Name, Size: w.Size, Mode: w.Mode, ModTime: w.ModTime, IsDir: w.IsDir, Link: w.Link}
	if w.NameBytes != nil {
		fi.Name = string(w.NameBytes)
	}
	if w.LinkBytes != nil {
		fi.Link = string(w.LinkBytes)
	}
	return nil
}
