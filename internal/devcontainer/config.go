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

// Config is what hutch reads from a devcontainer.json, with variables
// substituted. Fields hold the file's values; what hutch applies of them
// is the project spec's decision.
type Config struct {
	// Path is the file the config came from.
	Path  string
	Name  string
	Image string
	// Dockerfile is build.dockerfile; hutch does not build it.
	Dockerfile string
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
	// (features, customizations, forwardPorts, postCreateCommand,
	// runArgs, ...), sorted.
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
