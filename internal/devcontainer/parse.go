package devcontainer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/tailscale/hujson"

	"github.com/hutchsandbox/hutch/internal/errdefs"
)

// ignored are the keys hutch reads past: it never forwards ports, passes
// engine flags or applies an editor's customizations. When present they
// are listed in Config.Ignored so the caller can say so.
var ignored = map[string]bool{
	"appPort":              true,
	"customizations":       true,
	"forwardPorts":         true,
	"hostRequirements":     true,
	"otherPortsAttributes": true,
	"overrideCommand":      true,
	"portsAttributes":      true,
	"runArgs":              true,
	"runServices":          true,
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

	p := &parser{c: &Config{Path: path}, sub: newSubstituter(vars), origin: "devcontainer.json"}
	if filepath.IsAbs(path) {
		p.c.Dir = filepath.Dir(path)
	}
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
	p.finish()
	return p.c, nil
}

// finish tidies what the members left: the legacy build keys folded into
// Build, Ignored sorted.
func (p *parser) finish() {
	c := p.c
	if c.Build == nil && (c.Dockerfile != "" || p.legacyContext != "") {
		c.Build = &Build{}
	}
	if c.Build != nil {
		if c.Build.Dockerfile == "" {
			c.Build.Dockerfile = c.Dockerfile
		}
		c.Dockerfile = c.Build.Dockerfile
		if c.Build.Context == "" {
			c.Build.Context = p.legacyContext
		}
		if c.Build.Dockerfile == "" {
			// A build with no Dockerfile builds nothing.
			c.Build = nil
		}
	}
	slices.Sort(c.Ignored)
}

// parser fills a Config from the members of one object: the file's top
// level, or one entry of an image's devcontainer.metadata label.
type parser struct {
	c   *Config
	sub *substituter
	// origin names the source in notes and in Lifecycle entries.
	origin string
	// legacyContext is the top-level context key, the older spelling of
	// build.context.
	legacyContext string
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
	case "context":
		p.str(m, &p.legacyContext)
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
	case "features":
		c.Features = p.features(m)
	case "overrideFeatureInstallOrder":
		c.OverrideFeatureInstallOrder = p.strings(m)
	case "capAdd":
		c.CapAdd = p.strings(m)
	case "securityOpt":
		c.SecurityOpt = p.strings(m)
	case "privileged":
		p.boolean(m, &c.Privileged)
	case "init":
		p.boolean(m, &c.Init)
	case "updateRemoteUserUID":
		var b bool
		if kindOf(m.raw) == kindBool {
			p.boolean(m, &b)
			c.UpdateRemoteUserUID = strconv.FormatBool(b)
		}
	case "dockerComposeFile":
		c.ComposeFiles = p.stringOrStrings(m)
	case "service":
		p.str(m, &c.Service)
	default:
		if slices.Contains(Hooks, m.name) {
			p.lifecycle(m)
		} else if ignored[m.name] {
			c.Ignored = append(c.Ignored, m.name)
		}
	}
}

// note adds an advisory about the entry at key.
func (p *parser) note(key, format string, args ...any) {
	p.c.Notes = append(p.c.Notes, p.origin+" "+key+": "+fmt.Sprintf(format, args...))
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
	b := &Build{}
	for _, f := range members(m.raw) {
		switch f.name {
		case "dockerfile":
			p.strAt("build.dockerfile", f.raw, &b.Dockerfile)
		case "context":
			p.strAt("build.context", f.raw, &b.Context)
		case "target":
			p.strAt("build.target", f.raw, &b.Target)
		case "args":
			b.Args = p.env(member{name: "build.args", raw: f.raw}, false)
		}
	}
	p.c.Build = b
}

// strings reads an array of strings; an item that is not a string is
// noted and skipped.
func (p *parser) strings(m member) []string {
	if k := kindOf(m.raw); k != kindArray {
		if k != kindNull {
			p.note(m.name, "expected an array, got %s", kindName(k))
		}
		return nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(m.raw, &items); err != nil {
		p.note(m.name, "%v", err)
		return nil
	}
	var out []string
	for _, item := range items {
		s, ok := stringValue(item)
		if !ok {
			p.note(m.name, "expected strings, got %s", kindName(kindOf(item)))
			continue
		}
		out = append(out, p.sub.expand(s))
	}
	return out
}

// stringOrStrings reads a string or an array of strings.
func (p *parser) stringOrStrings(m member) []string {
	if s, ok := stringValue(m.raw); ok {
		return []string{p.sub.expand(s)}
	}
	return p.strings(m)
}

// boolean sets *dst to m's value when it is a boolean; null leaves it
// alone; another kind is noted.
func (p *parser) boolean(m member, dst *bool) {
	switch k := kindOf(m.raw); k {
	case kindBool:
		*dst = bytes.HasPrefix(bytes.TrimSpace(m.raw), []byte("true"))
	case kindNull:
	default:
		p.note(m.name, "expected a boolean, got %s", kindName(k))
	}
}

// features reads the features object in file order. An entry's value is
// an object of options (strings, booleans and numbers, passed as text)
// or a string, the short form of {"version": value}.
func (p *parser) features(m member) []Feature {
	if k := kindOf(m.raw); k != kindObject {
		if k != kindNull {
			p.note(m.name, "expected an object, got %s", kindName(k))
		}
		return nil
	}
	var out []Feature
	for _, f := range members(m.raw) {
		id := strings.TrimSpace(f.name)
		if id == "" {
			p.note(m.name, "a feature with an empty name is skipped")
			continue
		}
		feat := Feature{ID: id, Options: map[string]string{}}
		switch kindOf(f.raw) {
		case kindString:
			s, _ := stringValue(f.raw)
			feat.Options["version"] = p.sub.expand(s)
		case kindObject:
			for _, o := range members(f.raw) {
				switch k := kindOf(o.raw); k {
				case kindString:
					s, _ := stringValue(o.raw)
					feat.Options[o.name] = p.sub.expand(s)
				case kindBool, kindNumber:
					feat.Options[o.name] = string(bytes.TrimSpace(o.raw))
				case kindNull:
				default:
					p.note("features `"+id+"` option `"+o.name+"`", "expected a string, a boolean or a number, got %s", kindName(k))
				}
			}
		case kindBool:
			// "feature": true is an old form the reference CLI accepts.
		case kindNull:
		default:
			p.note("features `"+id+"`", "expected an object of options, got %s", kindName(kindOf(f.raw)))
			continue
		}
		out = append(out, feat)
	}
	return out
}

// lifecycle reads one lifecycle hook: a string (run by a shell), an
// array (a command and its arguments, no shell) or an object of named
// commands of either form, run in parallel. Variables are substituted in
// every string.
func (p *parser) lifecycle(m member) {
	var cmds []Command
	one := func(name string, raw json.RawMessage) bool {
		switch k := kindOf(raw); k {
		case kindString:
			s, _ := stringValue(raw)
			if strings.TrimSpace(s) != "" {
				cmds = append(cmds, Command{Name: name, Shell: p.sub.expand(s)})
			}
		case kindArray:
			var argv []string
			var items []json.RawMessage
			_ = json.Unmarshal(raw, &items)
			for _, it := range items {
				s, ok := stringValue(it)
				if !ok {
					p.note(m.name, "expected an array of strings, got %s in it", kindName(kindOf(it)))
					return false
				}
				argv = append(argv, p.sub.expand(s))
			}
			if len(argv) > 0 {
				cmds = append(cmds, Command{Name: name, Argv: argv})
			}
		case kindNull:
		default:
			what := m.name
			if name != "" {
				what += " `" + name + "`"
			}
			p.note(what, "expected a string or an array, got %s", kindName(k))
			return false
		}
		return true
	}
	if kindOf(m.raw) == kindObject {
		for _, c := range members(m.raw) {
			one(c.name, c.raw)
		}
	} else if !one("", m.raw) {
		return
	}
	if len(cmds) == 0 {
		return
	}
	if p.c.Lifecycle == nil {
		p.c.Lifecycle = map[string][]Lifecycle{}
	}
	p.c.Lifecycle[m.name] = append(p.c.Lifecycle[m.name], Lifecycle{Origin: p.origin, Commands: cmds})
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
