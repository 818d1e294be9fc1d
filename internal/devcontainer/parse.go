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

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/jsonc"
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

// maxDepth bounds how deeply objects and arrays may nest, for
// jsonc.Standardize: a file of a million "[" would otherwise take the
// daemon down. encoding/json stops at 10000; a devcontainer.json needs a
// handful.
const maxDepth = 1000

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
	data = jsonc.TrimBOM(data)
	std, err := jsonc.Standardize(data, maxDepth)
	var derr *jsonc.DepthError
	switch {
	case errors.As(err, &derr):
		line, col := lineColumn(data, int64(derr.Offset))
		return nil, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("%s: line %d, column %d: %v", path, line, col, derr))
	case err != nil:
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
	if jsonc.KindOf(top) != jsonc.Object {
		return nil, errdefs.New(errdefs.ErrInvalid, path+": expected a { ... } object")
	}

	p := &parser{c: &Config{Path: path}, sub: newSubstituter(vars), origin: "devcontainer.json"}
	if filepath.IsAbs(path) {
		p.c.Dir = filepath.Dir(path)
	}
	mems, _ := jsonc.Members(top)
	for _, m := range mems {
		if m.Name == "workspaceFolder" {
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

func (p *parser) member(m jsonc.Member) {
	c := p.c
	switch m.Name {
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
		if jsonc.KindOf(m.Raw) == jsonc.Bool {
			p.boolean(m, &b)
			c.UpdateRemoteUserUID = strconv.FormatBool(b)
		}
	case "dockerComposeFile":
		c.ComposeFiles = p.stringOrStrings(m)
	case "service":
		p.str(m, &c.Service)
	default:
		if slices.Contains(Hooks, m.Name) {
			p.lifecycle(m)
		} else if ignored[m.Name] {
			c.Ignored = append(c.Ignored, m.Name)
		}
	}
}

// note adds an advisory about the entry at key.
func (p *parser) note(key, format string, args ...any) {
	p.c.Notes = append(p.c.Notes, p.origin+" "+key+": "+fmt.Sprintf(format, args...))
}

// str sets *dst to m's substituted string value. null leaves *dst alone;
// another kind is noted.
func (p *parser) str(m jsonc.Member, dst *string) {
	p.strAt(m.Name, m.Raw, dst)
}

func (p *parser) strAt(key string, raw json.RawMessage, dst *string) {
	if s, ok := jsonc.StringValue(raw); ok {
		*dst = p.sub.expand(s)
	} else if k := jsonc.KindOf(raw); k != jsonc.Null {
		p.note(key, "expected a string, got %s", k)
	}
}

func (p *parser) build(m jsonc.Member) {
	if k := jsonc.KindOf(m.Raw); k != jsonc.Object {
		if k != jsonc.Null {
			p.note(m.Name, "expected an object, got %s", k)
		}
		return
	}
	b := &Build{}
	mems, _ := jsonc.Members(m.Raw)
	for _, f := range mems {
		switch f.Name {
		case "dockerfile":
			p.strAt("build.dockerfile", f.Raw, &b.Dockerfile)
		case "context":
			p.strAt("build.context", f.Raw, &b.Context)
		case "target":
			p.strAt("build.target", f.Raw, &b.Target)
		case "args":
			b.Args = p.env(jsonc.Member{Name: "build.args", Raw: f.Raw}, false)
		}
	}
	p.c.Build = b
}

// strings reads an array of strings; an item that is not a string is
// noted and skipped.
func (p *parser) strings(m jsonc.Member) []string {
	if k := jsonc.KindOf(m.Raw); k != jsonc.Array {
		if k != jsonc.Null {
			p.note(m.Name, "expected an array, got %s", k)
		}
		return nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(m.Raw, &items); err != nil {
		p.note(m.Name, "%v", err)
		return nil
	}
	var out []string
	for _, item := range items {
		s, ok := jsonc.StringValue(item)
		if !ok {
			p.note(m.Name, "expected strings, got %s", jsonc.KindOf(item))
			continue
		}
		out = append(out, p.sub.expand(s))
	}
	return out
}

// stringOrStrings reads a string or an array of strings.
func (p *parser) stringOrStrings(m jsonc.Member) []string {
	if s, ok := jsonc.StringValue(m.Raw); ok {
		return []string{p.sub.expand(s)}
	}
	return p.strings(m)
}

// boolean sets *dst to m's value when it is a boolean; null leaves it
// alone; another kind is noted.
func (p *parser) boolean(m jsonc.Member, dst *bool) {
	switch k := jsonc.KindOf(m.Raw); k {
	case jsonc.Bool:
		*dst = bytes.HasPrefix(bytes.TrimSpace(m.Raw), []byte("true"))
	case jsonc.Null:
	default:
		p.note(m.Name, "expected a boolean, got %s", k)
	}
}

// features reads the features object in file order. An entry's value is
// an object of options (strings, booleans and numbers, passed as text)
// or a string, the short form of {"version": value}.
func (p *parser) features(m jsonc.Member) []Feature {
	if k := jsonc.KindOf(m.Raw); k != jsonc.Object {
		if k != jsonc.Null {
			p.note(m.Name, "expected an object, got %s", k)
		}
		return nil
	}
	var out []Feature
	mems, _ := jsonc.Members(m.Raw)
	for _, f := range mems {
		id := strings.TrimSpace(f.Name)
		if id == "" {
			p.note(m.Name, "a feature with an empty name is skipped")
			continue
		}
		feat := Feature{ID: id, Options: map[string]string{}}
		switch jsonc.KindOf(f.Raw) {
		case jsonc.String:
			s, _ := jsonc.StringValue(f.Raw)
			feat.Options["version"] = p.sub.expand(s)
		case jsonc.Object:
			opts, _ := jsonc.Members(f.Raw)
			for _, o := range opts {
				switch k := jsonc.KindOf(o.Raw); k {
				case jsonc.String:
					s, _ := jsonc.StringValue(o.Raw)
					feat.Options[o.Name] = p.sub.expand(s)
				case jsonc.Bool, jsonc.Number:
					feat.Options[o.Name] = string(bytes.TrimSpace(o.Raw))
				case jsonc.Null:
				default:
					p.note("features `"+id+"` option `"+o.Name+"`", "expected a string, a boolean or a number, got %s", k)
				}
			}
		case jsonc.Bool:
			// "feature": true is an old form the reference CLI accepts.
		case jsonc.Null:
		default:
			p.note("features `"+id+"`", "expected an object of options, got %s", jsonc.KindOf(f.Raw))
			continue
		}
		out = append(out, feat)
	}
	return out
}

// lifecycle reads one lifecycle hook (see ParseCommands) with variables
// substituted in every string, and notes each command it cannot read.
func (p *parser) lifecycle(m jsonc.Member) {
	cmds, errs := ParseCommands(m.Raw)
	for _, e := range errs {
		// A command of the wrong kind is named; an array with an item
		// that is not a string is noted under the hook alone.
		key := m.Name
		if e.Name != "" && !e.InArray {
			key += " `" + e.Name + "`"
		}
		p.note(key, "%s", e.Reason())
	}
	if len(cmds) == 0 {
		return
	}
	for i := range cmds {
		c := &cmds[i]
		c.Shell = p.sub.expand(c.Shell)
		for j, arg := range c.Argv {
			c.Argv[j] = p.sub.expand(arg)
		}
	}
	if p.c.Lifecycle == nil {
		p.c.Lifecycle = map[string][]Lifecycle{}
	}
	p.c.Lifecycle[m.Name] = append(p.c.Lifecycle[m.Name], Lifecycle{Origin: p.origin, Commands: cmds})
}

// ParseCommands reads the value of a lifecycle hook, in devcontainer.json
// or a feature's devcontainer-feature.json: a string (run by a shell), an
// array (a command and its arguments, no shell) or an object of named
// commands of either form, run in parallel. A blank string, an empty
// array and null are no command. Variables are left as written.
//
// A command it cannot read is left out, with a *CommandError saying why:
// the value itself or, in the object form, one of its commands, the
// others still read.
func ParseCommands(raw json.RawMessage) ([]Command, []*CommandError) {
	var (
		cmds []Command
		errs []*CommandError
	)
	one := func(name string, inObject bool, raw json.RawMessage) {
		switch k := jsonc.KindOf(raw); k {
		case jsonc.String:
			s, _ := jsonc.StringValue(raw)
			if strings.TrimSpace(s) != "" {
				cmds = append(cmds, Command{Name: name, Shell: s})
			}
		case jsonc.Array:
			var argv []string
			var items []json.RawMessage
			_ = json.Unmarshal(raw, &items)
			for _, it := range items {
				s, ok := jsonc.StringValue(it)
				if !ok {
					errs = append(errs, &CommandError{Name: name, InObject: inObject, Got: jsonc.KindOf(it), InArray: true})
					return
				}
				argv = append(argv, s)
			}
			if len(argv) > 0 {
				cmds = append(cmds, Command{Name: name, Argv: argv})
			}
		case jsonc.Null:
		default:
			errs = append(errs, &CommandError{Name: name, InObject: inObject, Got: k})
		}
	}
	if jsonc.KindOf(raw) == jsonc.Object {
		mems, _ := jsonc.Members(raw)
		for _, m := range mems {
			one(m.Name, true, m.Raw)
		}
	} else {
		one("", false, raw)
	}
	return cmds, errs
}

// A CommandError is a lifecycle command ParseCommands could not read.
type CommandError struct {
	// Name is the command's key when InObject is set, the value being
	// an object of named commands; "" otherwise.
	Name     string
	InObject bool
	// Got is the kind of the command's value or, when InArray is set,
	// of the first item of its array that is not a string.
	Got     jsonc.Kind
	InArray bool
}

// Reason says what was expected and what was found: "expected a string
// or an array, got a number", or "expected an array of strings, got a
// number in it".
func (e *CommandError) Reason() string {
	if e.InArray {
		return fmt.Sprintf("expected an array of strings, got %s in it", e.Got)
	}
	return fmt.Sprintf("expected a string or an array, got %s", e.Got)
}

// Error is the Reason, after `command "<name>": ` in the object form.
func (e *CommandError) Error() string {
	if !e.InObject {
		return e.Reason()
	}
	return fmt.Sprintf("command %q: %s", e.Name, e.Reason())
}

// env reads an object of string values. In remoteEnv (nullMeansUnset) a
// null value unsets the variable and is skipped; any other value that is
// not a string is noted and skipped. It returns nil when nothing is set.
func (p *parser) env(m jsonc.Member, nullMeansUnset bool) map[string]string {
	if k := jsonc.KindOf(m.Raw); k != jsonc.Object {
		if k != jsonc.Null {
			p.note(m.Name, "expected an object, got %s", k)
		}
		return nil
	}
	var env map[string]string
	mems, _ := jsonc.Members(m.Raw)
	for _, e := range mems {
		s, ok := jsonc.StringValue(e.Raw)
		if !ok {
			if k := jsonc.KindOf(e.Raw); k != jsonc.Null || !nullMeansUnset {
				p.note(m.Name+" `"+e.Name+"`", "expected a string, got %s", k)
			}
			continue
		}
		if env == nil {
			env = make(map[string]string)
		}
		env[e.Name] = p.sub.expand(s)
	}
	return env
}

// mounts reads the mounts array; an item that does not parse is noted and
// skipped.
func (p *parser) mounts(m jsonc.Member) []Mount {
	if k := jsonc.KindOf(m.Raw); k != jsonc.Array {
		if k != jsonc.Null {
			p.note(m.Name, "expected an array, got %s", k)
		}
		return nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(m.Raw, &items); err != nil {
		// m.Raw was validated with the whole document.
		p.note(m.Name, "%v", err)
		return nil
	}
	var out []Mount
	for _, item := range items {
		var (
			mnt     Mount
			err     error
			display string
		)
		switch jsonc.KindOf(item) {
		case jsonc.String:
			s, _ := jsonc.StringValue(item)
			display = s
			mnt, err = parseMountString(s, p.sub)
		case jsonc.Object:
			display = jsonc.Compact(item)
			mnt, err = parseMountObject(item, p.sub)
		default:
			display = jsonc.Compact(item)
			err = errors.New("expected a string or an object")
		}
		if err != nil {
			p.note(m.Name+" `"+display+"`", "%v", err)
			continue
		}
		out = append(out, mnt)
	}
	return out
}

// syntaxError turns a hujson error into "<path>: line L, column C:
// <what>". hujson puts the position only in its text ("hujson: line L,
// column C: <what>"), wrapping <what>; a text without it keeps hujson's
// words. A position past the end of data (in the newline jsonc.Standardize adds) is
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
