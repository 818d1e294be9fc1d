package features

import (
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/hutchsandbox/hutch/internal/devcontainer"
	"github.com/hutchsandbox/hutch/internal/errdefs"
)

// The files of a feature's folder that the spec names.
const (
	MetadataFile  = "devcontainer-feature.json"
	InstallScript = "install.sh"
)

// Option is one entry of a feature's options.
type Option struct {
	ID string
	// Type is "string" or "boolean" (the spec's two); another value is
	// kept and noted.
	Type        string
	Description string
	// Default is the default as its install script gets it ("true" for
	// the boolean true); HasDefault is false when the option has none.
	Default    string
	HasDefault bool
	// Enum lists the only values allowed, Proposals suggested ones.
	Enum      []string
	Proposals []string
}

// Metadata is a feature's devcontainer-feature.json.
type Metadata struct {
	ID, Version, Name, Description string
	// Options are in the file's order.
	Options      []Option
	ContainerEnv map[string]string
	Mounts       []devcontainer.Mount
	Init         bool
	Privileged   bool
	CapAdd       []string
	SecurityOpt  []string
	Entrypoint   string
	// InstallsAfter are soft dependencies: features (without version)
	// this one installs after when they are installed at all.
	InstallsAfter []string
	// DependsOn are hard dependencies in the file's order, each with the
	// options it is to be installed with.
	DependsOn []devcontainer.Feature
	// Lifecycle maps a hook (onCreateCommand .. postAttachCommand) to the
	// feature's entry, whose Origin is "feature <id>".
	Lifecycle  map[string]devcontainer.Lifecycle
	LegacyIDs  []string
	Deprecated bool
	// Customizations is the customizations object as written.
	Customizations json.RawMessage
	// Raw is the whole file as plain JSON (comments removed), for
	// callers that merge it the way image metadata is merged.
	Raw json.RawMessage
	// Notes are advisories about entries that could not be used.
	Notes []string
}

// Option returns the option id declares.
func (m *Metadata) Option(id string) (Option, bool) {
	for _, o := range m.Options {
		if o.ID == id {
			return o, true
		}
	}
	return Option{}, false
}

// featureHooks are the lifecycle hooks a feature may declare: all of
// devcontainer.json's but initializeCommand, which runs on the host.
var featureHooks = []string{"onCreateCommand", "updateContentCommand", "postCreateCommand", "postStartCommand", "postAttachCommand"}

// ParseMetadata reads a devcontainer-feature.json (JSON with comments, as
// the reference CLI accepts it). feature names the feature in errors,
// notes and the Origin of its lifecycle entries ("feature <feature>").
//
// It fails, with class errdefs.ErrInvalid, only when data is not JSON or
// its top level not an object; an entry of the wrong kind becomes a note.
func ParseMetadata(feature string, data []byte) (*Metadata, error) {
	raw, err := standardize(data)
	if err != nil {
		return nil, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("feature %s: %s: %v", feature, MetadataFile, err))
	}
	mems, err := members(raw)
	if err != nil {
		return nil, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("feature %s: %s: expected a { ... } object", feature, MetadataFile))
	}
	p := &metaParser{feature: feature, m: &Metadata{Raw: raw}}
	for _, mem := range mems {
		p.member(mem)
	}
	if p.m.ID == "" {
		p.note("id", "missing; the spec requires the feature's id")
	}
	return p.m, nil
}

type metaParser struct {
	feature string
	m       *Metadata
}

func (p *metaParser) note(key, format string, args ...any) {
	p.m.Notes = append(p.m.Notes, fmt.Sprintf("feature %s: %s %s: ", p.feature, MetadataFile, key)+fmt.Sprintf(format, args...))
}

func (p *metaParser) member(mem member) {
	m := p.m
	switch mem.name {
	case "id":
		p.str(mem, &m.ID)
	case "version":
		p.str(mem, &m.Version)
	case "name":
		p.str(mem, &m.Name)
	case "description":
		p.str(mem, &m.Description)
	case "entrypoint":
		p.str(mem, &m.Entrypoint)
	case "options":
		p.options(mem)
	case "containerEnv":
		p.containerEnv(mem)
	case "mounts":
		p.mounts(mem)
	case "init":
		p.boolean(mem, &m.Init)
	case "privileged":
		p.boolean(mem, &m.Privileged)
	case "deprecated":
		p.boolean(mem, &m.Deprecated)
	case "capAdd":
		p.list(mem, &m.CapAdd)
	case "securityOpt":
		p.list(mem, &m.SecurityOpt)
	case "installsAfter":
		p.list(mem, &m.InstallsAfter)
	case "legacyIds":
		p.list(mem, &m.LegacyIDs)
	case "dependsOn":
		p.dependsOn(mem)
	case "customizations":
		if k := kind(mem.raw); k != "an object" && k != "null" {
			p.note(mem.name, "expected an object, got %s", k)
			return
		}
		m.Customizations = mem.raw
	case "onCreateCommand", "updateContentCommand", "postCreateCommand", "postStartCommand", "postAttachCommand":
		p.lifecycle(mem)
	}
}

func (p *metaParser) str(mem member, dst *string) {
	if k := kind(mem.raw); k != "a string" {
		if k != "null" {
			p.note(mem.name, "expected a string, got %s", k)
		}
		return
	}
	*dst, _ = scalar(mem.raw)
}

func (p *metaParser) boolean(mem member, dst *bool) {
	if k := kind(mem.raw); k != "a boolean" {
		if k != "null" {
			p.note(mem.name, "expected a boolean, got %s", k)
		}
		return
	}
	_ = json.Unmarshal(mem.raw, dst)
}

func (p *metaParser) list(mem member, dst *[]string) {
	l, err := stringList(mem.raw)
	if err != nil {
		p.note(mem.name, "%v", err)
		return
	}
	*dst = l
}

func (p *metaParser) object(mem member) []member {
	if k := kind(mem.raw); k != "an object" {
		if k != "null" {
			p.note(mem.name, "expected an object, got %s", k)
		}
		return nil
	}
	mems, _ := members(mem.raw) // an object, checked above
	return mems
}

func (p *metaParser) options(mem member) {
	for _, o := range p.object(mem) {
		key := "options." + o.name
		if o.name == "" {
			p.note("options", "an option has an empty id; it is left out")
			continue
		}
		if k := kind(o.raw); k != "an object" {
			p.note(key, "expected an object, got %s; the option is left out", k)
			continue
		}
		opt := Option{ID: o.name}
		props, _ := members(o.raw)
		for _, prop := range props {
			switch prop.name {
			case "type":
				if s, ok := scalar(prop.raw); ok && kind(prop.raw) == "a string" {
					opt.Type = s
					if s != "string" && s != "boolean" {
						p.note(key+".type", "%q is not one of the spec's types (string, boolean); its value is passed as text", s)
					}
				} else {
					p.note(key+".type", "expected a string, got %s", kind(prop.raw))
				}
			case "description":
				if s, ok := scalar(prop.raw); ok {
					opt.Description = s
				}
			case "default":
				if s, ok := scalar(prop.raw); ok {
					opt.Default, opt.HasDefault = s, true
				} else if k := kind(prop.raw); k != "null" {
					p.note(key+".default", "expected a string or a boolean, got %s", k)
				}
			case "enum", "proposals":
				vals, err := scalars(prop.raw)
				if err != nil {
					p.note(key+"."+prop.name, "%v", err)
					continue
				}
				if prop.name == "enum" {
					opt.Enum = vals
				} else {
					opt.Proposals = vals
				}
			}
		}
		p.m.Options = append(p.m.Options, opt)
	}
}

// scalars reads an array of strings, booleans or numbers as text (enum
// and proposals are strings, but files write numbers too).
func scalars(raw json.RawMessage) ([]string, error) {
	if k := kind(raw); k != "an array" {
		return nil, fmt.Errorf("expected an array, got %s", k)
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, err
	}
	out := make([]string, 0, len(items))
	for _, it := range items {
		s, ok := scalar(it)
		if !ok {
			return nil, fmt.Errorf("expected strings, got %s", kind(it))
		}
		out = append(out, s)
	}
	return out, nil
}

func (p *metaParser) containerEnv(mem member) {
	for _, e := range p.object(mem) {
		s, ok := scalar(e.raw)
		if !ok || kind(e.raw) != "a string" {
			p.note("containerEnv `"+e.name+"`", "expected a string, got %s; it is left out", kind(e.raw))
			continue
		}
		if p.m.ContainerEnv == nil {
			p.m.ContainerEnv = make(map[string]string)
		}
		p.m.ContainerEnv[e.name] = s
	}
}

// dependsOn reads the dependsOn object: feature ID -> options object, or a
// string, the spec's short form of {"version": value}.
func (p *metaParser) dependsOn(mem member) {
	for _, d := range p.object(mem) {
		f := devcontainer.Feature{ID: d.name, Options: map[string]string{}}
		switch k := kind(d.raw); k {
		case "a string":
			f.Options["version"], _ = scalar(d.raw)
		case "an object":
			opts, _ := members(d.raw)
			for _, o := range opts {
				v, ok := scalar(o.raw)
				if !ok {
					p.note("dependsOn `"+d.name+"` option "+o.name, "expected a string or a boolean, got %s; it is left out", kind(o.raw))
					continue
				}
				f.Options[o.name] = v
			}
		case "null":
		default:
			p.note("dependsOn `"+d.name+"`", "expected an object of options, got %s; its defaults are used", k)
		}
		p.m.DependsOn = append(p.m.DependsOn, f)
	}
}

func (p *metaParser) lifecycle(mem member) {
	cmds, err := commands(mem.raw)
	if err != nil {
		p.note(mem.name, "%v; it is left out", err)
		return
	}
	if len(cmds) == 0 {
		return
	}
	if p.m.Lifecycle == nil {
		p.m.Lifecycle = make(map[string]devcontainer.Lifecycle)
	}
	p.m.Lifecycle[mem.name] = devcontainer.Lifecycle{Origin: "feature " + p.feature, Commands: cmds}
}

// commands reads a lifecycle entry: a string (run by /bin/sh -c), an array
// (run without a shell) or an object of named strings and arrays (run in
// parallel). Empty commands are dropped.
func commands(raw json.RawMessage) ([]devcontainer.Command, error) {
	one := func(name string, raw json.RawMessage) (devcontainer.Command, bool, error) {
		switch k := kind(raw); k {
		case "a string":
			s, _ := scalar(raw)
			return devcontainer.Command{Name: name, Shell: s}, strings.TrimSpace(s) != "", nil
		case "an array":
			argv, err := stringList(raw)
			if err != nil {
				return devcontainer.Command{}, false, err
			}
			return devcontainer.Command{Name: name, Argv: argv}, len(argv) > 0, nil
		case "null":
			return devcontainer.Command{}, false, nil
		default:
			return devcontainer.Command{}, false, fmt.Errorf("expected a string or an array, got %s", k)
		}
	}
	if kind(raw) != "an object" {
		c, ok, err := one("", raw)
		if err != nil || !ok {
			return nil, err
		}
		return []devcontainer.Command{c}, nil
	}
	mems, _ := members(raw)
	var out []devcontainer.Command
	for _, m := range mems {
		c, ok, err := one(m.name, m.raw)
		if err != nil {
			return nil, fmt.Errorf("command %q: %w", m.name, err)
		}
		if ok {
			out = append(out, c)
		}
	}
	return out, nil
}

func (p *metaParser) mounts(mem member) {
	if k := kind(mem.raw); k != "an array" {
		if k != "null" {
			p.note(mem.name, "expected an array, got %s", k)
		}
		return
	}
	var items []json.RawMessage
	_ = json.Unmarshal(mem.raw, &items) // an array, checked above
	for _, it := range items {
		m, err := parseMount(it)
		if err != nil {
			p.note("mounts `"+string(it)+"`", "%v; it is left out", err)
			continue
		}
		p.m.Mounts = append(p.m.Mounts, m)
	}
}

// parseMount reads a mount in the object form {type, source, target} or
// the --mount string form (comma-separated key=value).
func parseMount(raw json.RawMessage) (devcontainer.Mount, error) {
	var m devcontainer.Mount
	var typ string
	switch k := kind(raw); k {
	case "an object":
		mems, _ := members(raw)
		for _, mem := range mems {
			var dst *string
			switch mem.name {
			case "type":
				dst = &typ
			case "source":
				dst = &m.Source
			case "target":
				dst = &m.Target
			default:
				continue
			}
			if kind(mem.raw) != "a string" {
				return m, fmt.Errorf("%s is %s, not a string", mem.name, kind(mem.raw))
			}
			*dst, _ = scalar(mem.raw)
		}
	case "a string":
		s, _ := scalar(raw)
		for field := range strings.SplitSeq(s, ",") {
			key, value, hasValue := strings.Cut(strings.TrimSpace(field), "=")
			switch strings.ToLower(key) {
			case "type":
				typ = value
			case "source", "src":
				m.Source = value
			case "target", "destination", "dst":
				m.Target = value
			case "readonly", "ro":
				m.ReadOnly = !hasValue || !(strings.EqualFold(value, "false") || value == "0")
			}
		}
	default:
		return m, fmt.Errorf("expected a string or an object, got %s", k)
	}
	switch typ = strings.ToLower(typ); typ {
	case "bind", "volume":
		m.Type = typ
	case "":
		m.Type = "volume"
		if path.IsAbs(m.Source) {
			m.Type = "bind"
		}
	default:
		return m, fmt.Errorf("unknown type %q (bind|volume)", typ)
	}
	switch {
	case m.Target == "":
		return m, errors.New("no target")
	case !path.IsAbs(m.Target):
		return m, fmt.Errorf("target %q is not an absolute path", m.Target)
	case m.Type == "bind" && m.Source == "":
		return m, errors.New("bind mount has no source")
	}
	return m, nil
}
