package devcontainer

import "path/filepath"

// Candidates are the files a project's devcontainer.json may be, relative
// to the project, in the order they are looked for; the first that exists
// is used.
var Candidates = []string{".devcontainer/devcontainer.json", ".devcontainer.json", ".devcontainer/devcontainer.jsonc"}

// Find returns the first of Candidates for which exists reports true, and
// false when none does. exists gets a path relative to the project; the
// caller does the stat.
func Find(exists func(rel string) bool) (rel string, ok bool) {
	for _, rel := range Candidates {
		if exists(rel) {
			return rel, true
		}
	}
	return "", false
}

// Mount is one mount a devcontainer.json asks for, from either the
// string (--mount syntax) or the object form.
type Mount struct {
	// Type is "bind" or "volume".
	Type string
	// Source is a host path (bind) or a volume name (volume; empty for
	// an anonymous volume).
	Source string
	// Target is the absolute path inside the container.
	Target string
	// ReadOnly is set by a readonly or ro option in the string form.
	ReadOnly bool
}

// Build is the file's build property: the image is built from a
// Dockerfile. Paths are as the file writes them, relative to the folder
// holding devcontainer.json (Config.Dir).
type Build struct {
	// Dockerfile is build.dockerfile (or the older top-level dockerFile).
	Dockerfile string
	// Context is build.context (or the older top-level context); "" is
	// the spec's default, ".".
	Context string
	// Args are build.args, substituted.
	Args map[string]string
	// Target is build.target: the stage to build ("" for the last).
	Target string
}

// Feature is one entry of the file's features object, in the file's
// order.
type Feature struct {
	// ID is the key as written: an OCI reference
	// (ghcr.io/devcontainers/features/node:1), a folder relative to
	// Config.Dir (./rust), or a tarball URL.
	ID string
	// Options are the entry's option values as the install script gets
	// them: strings, with booleans as "true"/"false" and numbers as
	// written. A string value in place of the object is the spec's short
	// form for {"version": value}.
	Options map[string]string
}

// Hooks are the lifecycle commands' keys, in the order the spec runs
// them. initializeCommand runs on the host and is never run by hutch.
var Hooks = []string{"initializeCommand", "onCreateCommand", "updateContentCommand", "postCreateCommand", "postStartCommand", "postAttachCommand"}

// Command is one command of a lifecycle hook. Exactly one of Shell and
// Argv is set: the string form runs in /bin/sh -c, the array form runs
// without a shell.
type Command struct {
	// Name is the key in the object form, whose commands run in
	// parallel; "" in the string and array forms.
	Name  string
	Shell string
	Argv  []string
}

// Lifecycle is one source's entry for a hook: a string or array (one
// Command) or an object (several, run in parallel).
type Lifecycle struct {
	// Origin says where the entry came from: "devcontainer.json", "the
	// image's metadata" or "feature <id>".
	Origin   string
	Commands []Command
}

// Config is what hutch reads from a devcontainer.json, with variables
// substituted. Fields hold the file's values; what hutch applies of them
// is the project spec's decision.
type Config struct {
	// Path is the file the config came from, and Dir the folder holding
	// it, which relative paths in the file (build.dockerfile, local
	// features) start from.
	Path  string
	Dir   string `json:",omitempty"`
	Name  string
	Image string
	// Dockerfile is build.dockerfile, kept for callers that only name it;
	// Build holds the whole build property (nil when the file has none).
	Dockerfile string
	Build      *Build `json:",omitempty"`
	// Features are the file's features, in its order, and
	// OverrideFeatureInstallOrder the IDs the file wants installed first.
	Features                    []Feature `json:",omitempty"`
	OverrideFeatureInstallOrder []string  `json:",omitempty"`
	// Lifecycle maps a hook (one of Hooks) to its entries, image
	// metadata first and devcontainer.json last, as the spec merges
	// them.
	Lifecycle map[string][]Lifecycle `json:",omitempty"`
	// CapAdd, SecurityOpt, Privileged and Init are what the file and the
	// image's metadata ask of the engine; hutch applies none of them and
	// says so.
	CapAdd      []string `json:",omitempty"`
	SecurityOpt []string `json:",omitempty"`
	Privileged  bool     `json:",omitempty"`
	Init        bool     `json:",omitempty"`
	// UpdateRemoteUserUID is the file's updateRemoteUserUID ("" unset).
	UpdateRemoteUserUID string `json:",omitempty"`
	// ComposeFiles and Service are dockerComposeFile and service: the
	// file describes a Docker Compose project, which hutch does not run.
	ComposeFiles []string `json:",omitempty"`
	Service      string   `json:",omitempty"`
	// WorkspaceFolder and WorkspaceMount are read to tell whether the
	// project is identity-mounted, never applied.
	WorkspaceFolder string
	WorkspaceMount  string
	ContainerEnv    map[string]string
	RemoteEnv       map[string]string
	ContainerUser   string
	RemoteUser      string
	Mounts          []Mount
	// ShutdownAction is "" when the file does not set it (the spec's
	// default is stopContainer).
	ShutdownAction string
	// Ignored lists the keys present that hutch does not apply
	// (customizations, forwardPorts, runArgs, ...), sorted.
	Ignored []string
	// Notes are advisories about entries that could not be used (a mount
	// that does not parse, a non-string env value); they never fail
	// parsing.
	Notes []string
}

// Vars are the values variables are substituted with.
type Vars struct {
	// LocalWorkspaceFolder is the project on the host.
	LocalWorkspaceFolder string
	// Getenv looks up ${localEnv:VAR}; nil finds nothing.
	Getenv func(string) (string, bool)
	// DevcontainerID is ${devcontainerId} (see ID); "" keeps the
	// variable as written.
	DevcontainerID string
	// ContainerWorkspaceFolder, when set, is ${containerWorkspaceFolder}
	// whatever the file's workspaceFolder says: where the caller really
	// mounts the project. Unset, it is the file's workspaceFolder or the
	// spec's default, /workspaces/<basename>.
	ContainerWorkspaceFolder string
}

// IdentityMapped reports whether the container sees the project at the
// same path as the host: the substituted workspaceFolder equals project,
// both cleaned. A file without workspaceFolder is not identity-mapped,
// whatever its workspaceMount says, since the spec's default folder is
// /workspaces/<basename>.
func (c *Config) IdentityMapped(project string) bool {
	if c.WorkspaceFolder == "" {
		return false
	}
	return filepath.Clean(c.WorkspaceFolder) == filepath.Clean(project)
}
