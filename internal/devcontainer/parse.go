package devcontainer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/tailscale/hujson"

	"github.com/hutchsandbox/hutch/internal/errdefs"
)

// ignored are the keys hutch reads past: it never builds, runs lifecycle
// commands, forwards ports, passes engine flags or drives compose. When
// present they are listed in Config.Ignored so the caller can say so.
var ignored = map[string]bool{
	"appPort":              true,
	"capAdd":               true,
	"customizations":       true,
	"dockerComposeFile":    true,
	"features":             true,
	"forwardPorts":         true,
	"hostRequirements":     true,
	"init":                 true,
	"initializeCommand":    true,
	"onCreateCommand":      true,
	"otherPortsAttributes": true,
	"overrideCommand":      true,
	"portsAttributes":      true,
	"postAttachCommand":    true,
	"postCreateCommand":    true,
	"postStartCommand":     true,
	"privileged":           true,
	"runArgs":              true,
	"runServices":          true,
	"securityOpt":          true,
	"service":              true,
	"updateContentCommand": true,
	"updateRemoteUserUID":  true,
	"userEnvProbe":         true,
	"waitFor":              true,
}

// utf8BOM is skipped at the start of a file; editors on Windows write it.
var utf8BOM = []byte("\ufeff")

// Parse reads the devcontainer.json at path (used only in messages) from
// data and returns it with vars substituted.
//
// It fails, with an error of class errdefs.ErrInvalid whose text starts
// with path, only when data is not JSON with comments ("<path>: line L,
// column C: <what>"), nests objects and arrays deeper than 1000 levels, or
// its top level is not an object ("<path>: expected a { ... } object"). Anything else it cannot use becomes a Note, and keys
// hutch does not apply are listed in Ignored.
//
// workspaceFolder is substituted first, with the local variables only;
// ${containerWorkspaceFolder} is then its value, or /workspaces/<basename
// of the local folder> when the file sets none. Every other string taken
// is substituted with all variables.
func Parse(path string, data []byte, vars Vars) (*Config, error) {
	data = bytes.TrimPrefix(data, utf8BOM)
	if off := tooDeep(data); off >= 0 {
		line, col := lineColumn(data, int64(off))
		return nil, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("%s: line %d, column %d: nested deeper than %d levels", path, line, col, maxDepth))
	}
	// hujson blanks comments in the buffer it parses, so it gets a copy.
	// The copy ends in a newline: hujson ends a line comment only there,
	// and editors do not all write one at the end of the file.
	in := make([]byte, 0, len(data)+1)
	in = append(in, data...)
	if !bytes.HasSuffix(in, []byte("\n")) {
		in = append(in, '\n')
	}
	std, err := hujson.Standardize(in)
	if err != nil {
		return nil, syntaxError(path, data, err)
	}
	// Standardize keeps byte offsets, so an offset encoding/json reports
	// is one in data.
	var top json.RawMessage
	if err := json.Unmarshal(std, &top); err != nil {
		var serr *json.SyntaxError
		if errors.As(err, &serr) {
			line, col := lineColumn(data, serr.Offset)
			return nil, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("%s: line %d, column %d: %v", path, line, col, err))
		}
		return nil, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("%s: %v", path, err))
	}
	if kindOf(top) != kindObject {
		return nil, errdefs.New(errdefs.ErrInvalid, path+": expected a { ... } object")
	}

	p := &parser{c: &Config{Path: path}, sub: newSubstituter(vars)}
	mems := members(top)
	for _, m := range mems {
		if m.name == "workspaceFolder" {
			p.str(m, &p.c.WorkspaceFolder)
		}
	}
	p.sub.setContainerFolder(p.c.WorkspaceFolder)
	for _, m := range mems {
		p.member(m)
	}
	slices.Sort(p.c.Ignored)
	return p.c, nil
}

// parser fills a Config from the members of the top-level object.
type parser struct {
	c   *Config
	sub *substituter
}

func (p *parser) member(m member) {
	c := p.c
	switch m.name {
	case "name":
		p.str(m, &c.Name)
	case "image":
		p.str(m, &c.Image)
	case "build":
		p.build(m)
	case "dockerFile":
		// The spec's deprecated spelling; build.dockerfile wins over it.
		if c.Dockerfile == "" {
			p.str(m, &c.Dockerfile)
		}
	case "workspaceFolder":
		// Taken before the others, to derive ${containerWorkspaceFolder}.
	case "workspaceMount":
		p.str(m, &c.WorkspaceMount)
	case "containerEnv":
		c.ContainerEnv = p.env(m, false)
	case "remoteEnv":
		c.RemoteEnv = p.env(m, true)
	case "containerUser":
		p.str(m, &c.ContainerUser)
	case "remoteUser":
		p.str(m, &c.RemoteUser)
	case "mounts":
		c.Mounts = p.mounts(m)
	case "shutdownAction":
		p.str(m, &c.ShutdownAction)
	default:
		if ignored[m.name] {
			c.Ignored = append(c.Ignored, m.name)
		}
	}
}

// note adds an advisory about the entry at key.
func (p *parser) note(key, format string, args ...any) {
	p.c.Notes = append(p.c.Notes, "devcontainer.json "+key+": "+fmt.Sprintf(format, args...))
}

// str sets *dst to m's substituted string value. null leaves *dst alone;
// another kind is noted.
func (p *parser) str(m member, dst *string) {
	p.strAt(m.name, m.raw, dst)
}

func (p *parser) strAt(key string, raw json.RawMessage, dst *string) {
	if s, ok := stringValue(raw); ok {
		*dst = p.sub.expand(s)
	} else if k := kindOf(raw); k != kindNull {
		p.note(key, "expected a string, got %s", kindName(k))
	}
}

func (p *parser) build(m member) {
	if k := kindOf(m.raw); k != kindObject {
		if k != kindNull {
			p.note(m.name, "expected an object, got %s", kindName(k))
		}
		return
	}
	for _, b := range members(m.raw) {
		if b.name == "dockerfile" {
			p.strAt("build.dockerfile", b.raw, &p.c.Dockerfile)
		}
	}
}

// env reads an object of string values. In remoteEnv (nullMeansUnset) a
// null value unsets the variable and is skipped; any other value that is
// not a string is noted and skipped. It returns nil when nothing is set.
func (p *parser) env(m member, nullMeansUnset bool) map[string]string {
	if k := kindOf(m.raw); k != kindObject {
		if k != kindNull {
			p.note(m.name, "expected an object, got %s", kindName(k))
		}
		return nil
	}
	var env map[string]string
	for _, e := range members(m.raw) {
		s, ok := stringValue(e.raw)
		if !ok {
			if k := kindOf(e.raw); k != kindNull || !nullMeansUnset {
				p.note(m.name+" `"+e.name+"`", "expected a string, got %s", kindName(k))
			}
			continue
		}
		if env == nil {
			env = make(map[string]string)
		}
		env[e.name] = p.sub.expand(s)
	}
	return env
}

// mounts reads the mounts array; an item that does not parse is noted and
// skipped.
func (p *parser) mounts(m member) []Mount {
	if k := kindOf(m.raw); k != kindArray {
		if k != kindNull {
			p.note(m.name, "expected an array, got %s", kindName(k))
		}
		return nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(m.raw, &items); err != nil {
		// m.raw was validated with the whole document.
		p.note(m.name, "%v", err)
		return nil
	}
	var out []Mount
	for _, item := range items {
		var (
			mnt     Mount
			err     error
			display string
		)
		switch kindOf(item) {
		case kindString:
			s, _ := stringValue(item)
			display = s
			mnt, err = parseMountString(s, p.sub)
		case kindObject:
			display = compact(item)
			mnt, err = parseMountObject(item, p.sub)
		default:
			display = compact(item)
			err = errors.New("expected a string or an object")
		}
		if err != nil {
			p.note(m.name+" `"+display+"`", "%v", err)
			continue
		}
		out = append(out, mnt)
	}
	return out
}

// syntaxError turns a hujson error into "<path>: line L, column C:
// <what>". hujson puts the position only in its text ("hujson: line L,
// column C: <what>"), wrapping <what>; a text without it keeps hujson's
// words. A position past the end of data (in the newline Parse adds) is
// reported as the end of data.
func syntaxError(path string, data []byte, err error) error {
	var line, col int
	if _, scanErr := fmt.Sscanf(err.Error(), "hujson: line %d, column %d:", &line, &col); scanErr != nil {
		return errdefs.New(errdefs.ErrInvalid, path+": "+strings.TrimPrefix(err.Error(), "hujson: "))
	}
	if line > 1+bytes.Count(data, []byte("\n")) {
		line, col = lineColumn(data, int64(len(data)))
	}
	what := err.Error()
	if inner := errors.Unwrap(err); inner != nil {
		what = inner.Error()
	}
	return errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("%s: line %d, column %d: %s", path, line, col, what))
}

// lineColumn gives the 1-based line and column (in bytes) of offset in data.
func lineColumn(data []byte, offset int64) (line, col int) {
	offset = min(max(offset, 0), int64(len(data)))
	before := data[:offset]
	line = 1 + bytes.Count(before, []byte("\n"))
	col = 1 + len(before) - (bytes.LastIndexByte(before, '\n') + 1)
	return line, col
}
