package devcontainer

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"math/big"
	"path"
	"path/filepath"
	"strings"
)

// defaultWorkspaces is where the spec mounts a project that sets no
// workspaceFolder: /workspaces/<basename>.
const defaultWorkspaces = "/workspaces"

// ID is ${devcontainerId} for a container with the given id labels
// (devcontainer.local_folder and devcontainer.config_file, the labels
// hutch and the reference CLI stamp), computed as the spec's reference
// implementation does: the labels as compact JSON with sorted keys,
// hashed with SHA-256, written in base 32 (digits 0-9a-v) and padded
// with zeros to 52 characters. The same project and file give the same
// id here and in an editor, so volumes named after it are shared.
func ID(labels map[string]string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	// JavaScript's JSON.stringify escapes neither HTML characters nor
	// the line and paragraph separators.
	enc.SetEscapeHTML(false)
	if err := enc.Encode(labels); err != nil {
		panic(err) // a map of strings always encodes
	}
	text := bytes.TrimSuffix(b.Bytes(), []byte("\n"))
	text = bytes.ReplaceAll(text, []byte(`\u2028`), []byte("\u2028"))
	text = bytes.ReplaceAll(text, []byte(`\u2029`), []byte("\u2029"))
	sum := sha256.Sum256(text)
	id := new(big.Int).SetBytes(sum[:]).Text(32)
	return strings.Repeat("0", max(0, 52-len(id))) + id
}

// substituter replaces the ${...} variables this package knows in one
// string value. Variables it does not know (${containerEnv:VAR}, which
// ExpandContainerEnv fills once the container's environment is known,
// ${devcontainerId} when Vars has none, anything misspelled) are kept
// verbatim, so a later stage or the user can see them.
type substituter struct {
	local, localBase string
	id               string
	getenv           func(string) (string, bool)
	// container is false while workspaceFolder itself is substituted:
	// ${containerWorkspaceFolder} is derived from it, so there it is
	// kept verbatim.
	container                      bool
	containerFolder, containerBase string
	// mounted is Vars.ContainerWorkspaceFolder.
	mounted string
}

func newSubstituter(vars Vars) *substituter {
	s := &substituter{local: vars.LocalWorkspaceFolder, getenv: vars.Getenv, id: vars.DevcontainerID, mounted: vars.ContainerWorkspaceFolder}
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
	if s.mounted != "" {
		s.containerFolder = s.mounted
	}
	if s.containerFolder == "" {
		s.containerFolder = path.Join(defaultWorkspaces, s.localBase)
	}
	s.containerBase = path.Base(s.containerFolder)
}

// expand substitutes every ${...} in v in one pass, left to right; a
// substituted value is not scanned again. As in the reference CLI a
// variable ends at the first "}".
func (s *substituter) expand(v string) string { return expandWith(v, s.lookup) }

// ExpandContainerEnv substitutes ${containerEnv:VAR} and
// ${containerEnv:VAR:default} in v with the container's environment
// (lookup), once it is known; an unset variable without a default is
// empty, as in the reference CLI. Other variables are left as they are.
func ExpandContainerEnv(v string, lookup func(string) (string, bool)) string {
	return expandWith(v, func(name string) (string, bool) {
		kind, rest, found := strings.Cut(name, ":")
		if !found || kind != "containerEnv" {
			return "", false
		}
		args := strings.Split(rest, ":")
		if val, set := lookup(args[0]); set {
			return val, true
		}
		if len(args) > 1 {
			return args[1], true
		}
		return "", true
	})
}

func expandWith(v string, lookup func(string) (string, bool)) string {
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
		if val, ok := lookup(v[start+2 : end]); ok {
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
	case "devcontainerId":
		return s.id, s.id != ""
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
