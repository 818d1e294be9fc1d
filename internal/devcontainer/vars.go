package devcontainer

import (
	"path"
	"path/filepath"
	"strings"
)

// defaultWorkspaces is where the spec mounts a project that sets no
// workspaceFolder: /workspaces/<basename>.
const defaultWorkspaces = "/workspaces"

// substituter replaces the ${...} variables this package knows in one
// string value. Variables it does not know (${devcontainerId},
// ${containerEnv:VAR}, anything misspelled) are kept verbatim, so a later
// stage or the user can see them.
type substituter struct {
	local, localBase string
	getenv           func(string) (string, bool)
	// container is false while workspaceFolder itself is substituted:
	// ${containerWorkspaceFolder} is derived from it, so there it is
	// kept verbatim.
	container                      bool
	containerFolder, containerBase string
}

func newSubstituter(vars Vars) *substituter {
	s := &substituter{local: vars.LocalWorkspaceFolder, getenv: vars.Getenv}
	if s.local != "" {
		s.localBase = filepath.Base(s.local)
	}
	return s
}

// setContainerFolder enables the container variables, from the
// substituted workspaceFolder or, when the file sets none, the spec's
// default.
func (s *substituter) setContainerFolder(workspaceFolder string) {
	s.container = true
	s.containerFolder = workspaceFolder
	if s.containerFolder == "" {
		s.containerFolder = path.Join(defaultWorkspaces, s.localBase)
	}
	s.containerBase = path.Base(s.containerFolder)
}

// expand substitutes every ${...} in v in one pass, left to right; a
// substituted value is not scanned again. As in the reference CLI a
// variable ends at the first "}".
func (s *substituter) expand(v string) string {
	if !strings.Contains(v, "${") {
		return v
	}
	var b strings.Builder
	for {
		start := strings.Index(v, "${")
		if start < 0 {
			break
		}
		end := strings.IndexByte(v[start+2:], '}')
		if end < 0 {
			break
		}
		end += start + 2
		b.WriteString(v[:start])
		if val, ok := s.lookup(v[start+2 : end]); ok {
			b.WriteString(val)
		} else {
			b.WriteString(v[start : end+1])
		}
		v = v[end+1:]
	}
	b.WriteString(v)
	return b.String()
}

// lookup resolves the text between "${" and "}"; ok is false for a
// variable to keep verbatim.
func (s *substituter) lookup(name string) (val string, ok bool) {
	switch name {
	case "localWorkspaceFolder":
		return s.local, true
	case "localWorkspaceFolderBasename":
		return s.localBase, true
	case "containerWorkspaceFolder":
		return s.containerFolder, s.container
	case "containerWorkspaceFolderBasename":
		return s.containerBase, s.container
	}
	kind, rest, found := strings.Cut(name, ":")
	if !found || (kind != "localEnv" && kind != "env") {
		return "", false
	}
	// ${localEnv:VAR:default}: like the reference CLI, the default is the
	// text up to the next ":", and an unset variable without a default is
	// empty.
	args := strings.Split(rest, ":")
	if s.getenv != nil {
		if val, set := s.getenv(args[0]); set {
			return val, true
		}
	}
	if len(args) > 1 {
		return args[1], true
	}
	return "", true
}
