package features

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/hutchsandbox/hutch/internal/devcontainer"
	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/jsonc"
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

// maxJSONDepth bounds how deeply a devcontainer-feature.json may nest.
// hujson recurses once per level, and a feature's metadata comes from
// whoever published it; real files nest a handful of levels.
const maxJSONDepth = 200

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
	mems, err := jsonc.Members(raw)
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

// standardize turns JSON with comments and trailing commas (as the
// reference CLI accepts in devcontainer-feature.json) into plain,
// compact JSON.
func standardize(data []byte) (json.RawMessage, error) {
	std, err := jsonc.Standardize(jsonc.TrimBOM(data), maxJSONDepth)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if err := json.Compact(&b, std); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

type metaParser struct {
	feature string
	m       *Metadata
}

func (p *metaParser) note(key, format string, args ...any) {
	p.m.Notes = append(p.m.Notes, fmt.Sprintf("feature %s: %s %s: ", p.feature, MetadataFile, key)+fmt.Sprintf(format, args...))
}

func (p *metaParser) member(mem jsonc.Member) {
	m := p.m
	switch mem.Name {
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
		if k := jsonc.KindOf(mem.Raw); k != jsonc.Object && k != jsonc.Null {
			p.note(mem.Name, "expected an object, got %s", k)
			return
		}
		m.Customizations = mem.Raw
	case "onCreateCommand", "updateContentCommand", "postCreateCommand", "postStartCommand", "postAttachCommand":
		p.lifecycle(mem)
	}
}

func (p *metaParser) str(mem jsonc.Member, dst *string) {
	if k := jsonc.KindOf(mem.Raw); k != jsonc.String {
		if k != jsonc.Null {
			p.note(mem.Name, "expected a string, got %s", k)
		}
		return
	}
	*dst, _ = jsonc.Scalar(mem.Raw)
}

func (p *metaParser) boolean(mem jsonc.Member, dst *bool) {
	if k := jsonc.KindOf(mem.Raw); k != jsonc.Bool {
		if k != jsonc.Null {
			p.note(mem.Name, "expected a boolean, got %s", k)
		}
		return
	}
	_ = json.Unmarshal(mem.Raw, dst)
}

func (p *metaParser) list(mem jsonc.Member, dst *[]string) {
	l, err := stringList(mem.Raw)
	if err != nil {
		p.note(mem.Name, "%v", err)
		return
	}
	*dst = l
}

// stringList reads an array of strings; null is an empty one.
func stringList(raw json.RawMessage) ([]string, error) {
	switch k := jsonc.KindOf(raw); k {
	case jsonc.Null:
		return nil, nil
	case jsonc.Array:
	default:
		return nil, fmt.Errorf("expected an array of strings, got %s", k)
	}
	var out []string
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, errors.New("expected an array of strings, and an item is not a string")
	}
	return out, nil
}

func (p *metaParser) object(mem jsonc.Member) []jsonc.Member {
	if k := jsonc.KindOf(mem.Raw); k != jsonc.Object {
		if k != jsonc.Null {
			p.note(mem.Name, "expected an object, got %s", k)
		}
		return nil
	}
	mems, _ := jsonc.Members(mem.Raw) // an object, checked above
	return mems
}

func (p *metaParser) options(mem jsonc.Member) {
	for _, o := range p.object(mem) {
		key := "options." + o.Name
		if o.Name == "" {
			p.note("options", "an option has an empty id; it is left out")
			continue
		}
		if k := jsonc.KindOf(o.Raw); k != jsonc.Object {
			p.note(key, "expected an object, got %s; the option is left out", k)
			continue
		}
		opt := Option{ID: o.Name}
		props, _ := jsonc.Members(o.Raw)
		for _, prop := range props {
			switch prop.Name {
			case "type":
				if s, ok := jsonc.Scalar(prop.Raw); ok && jsonc.KindOf(prop.Raw) == jsonc.String {
					opt.Type = s
					if s != "string" && s != "boolean" {
						p.note(key+".type", "%q is not one of the spec's types (string, boolean); its value is passed as text", s)
					}
				} else {
					p.note(key+".type", "expected a string, got %s", jsonc.KindOf(prop.Raw))
				}
			case "description":
				if s, ok := jsonc.Scalar(prop.Raw); ok {
					opt.Description = s
				}
			case "default":
				if s, ok := jsonc.Scalar(prop.Raw); ok {
					opt.Default, opt.HasDefault = s, true
				} else if k := jsonc.KindOf(prop.Raw); k != jsonc.Null {
					p.note(key+".default", "expected a string or a boolean, got %s", k)
				}
			case "enum", "proposals":
				vals, err := scalars(prop.Raw)
				if err != nil {
					p.note(key+"."+prop.Name, "%v", err)
					continue
				}
				if prop.Name == "enum" {
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
	if k := jsonc.KindOf(raw); k != jsonc.Array {
		return nil, fmt.Errorf("expected an array, got %s", k)
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, err
	}
	out := make([]string, 0, len(items))
	for _, it := range items {
		s, ok := jsonc.Scalar(it)
		if !ok {
			return nil, fmt.Errorf("expected strings, got %s", jsonc.KindOf(it))
		}
		out = append(out, s)
	}
	return out, nil
}

func (p *metaParser) containerEnv(mem jsonc.Member) {
	for _, e := range p.object(mem) {
		s, ok := jsonc.Scalar(e.Raw)
		if !ok || jsonc.KindOf(e.Raw) != jsonc.String {
			p.note("containerEnv `"+e.Name+"`", "expected a string, got %s; it is left out", jsonc.KindOf(e.Raw))
			continue
		}
		if p.m.ContainerEnv == nil {
			p.m.ContainerEnv = make(map[string]string)
		}
		p.m.ContainerEnv[e.Name] = s
	}
}

// dependsOn reads the dependsOn object: feature ID -> options object, or a
// string, the spec's short form of {"version": value}.
func (p *metaParser) dependsOn(mem jsonc.Member) {
	for _, d := range p.object(mem) {
		f := devcontainer.Feature{ID: d.Name, Options: map[string]string{}}
		switch k := jsonc.KindOf(d.Raw); k {
		case jsonc.String:
			f.Options["version"], _ = jsonc.Scalar(d.Raw)
		case jsonc.Object:
			opts, _ := jsonc.Members(d.Raw)
			for _, o := range opts {
				v, ok := jsonc.Scalar(o.Raw)
				if !ok {
					p.note("dependsOn `"+d.Name+"` option "+o.Name, "expected a string or a boolean, got %s; it is left out", jsonc.KindOf(o.Raw))
					continue
				}
				f.Options[o.Name] = v
			}
		case jsonc.Null:
		default:
			p.note("dependsOn `"+d.Name+"`", "expected an object of options, got %s; its defaults are used", k)
		}
		p.m.DependsOn = append(p.m.DependsOn, f)
	}
}

// lifecycle reads a lifecycle entry (devcontainer.ParseCommands). A
// command it cannot read leaves the whole entry out.
func (p *metaParser) lifecycle(mem jsonc.Member) {
	cmds, errs := devcontainer.ParseCommands(mem.Raw)
	if len(errs) > 0 {
		p.note(mem.Name, "%v; it is left out", errs[0])
		return
	}
	if len(cmds) == 0 {
		return
	}
	if p.m.Lifecycle == nil {
		p.m.Lifecycle = make(map[string]devcontainer.Lifecycle)
	}
	p.m.Lifecycle[mem.Name] = devcontainer.Lifecycle{Origin: "feature " + p.feature, Commands: cmds}
}

func (p *metaParser) mounts(mem jsonc.Member) {
	if k := jsonc.KindOf(mem.Raw); k != jsonc.Array {
		if k != jsonc.Null {
			p.note(mem.Name, "expected an array, got %s", k)
		}
		return
	}
	var items []json.RawMessage
	_ = json.Unmarshal(mem.Raw, &items) // an array, checked above
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
	switch k := jsonc.KindOf(raw); k {
	case jsonc.Object:
		mems, _ := jsonc.Members(raw)
		for _, mem := range mems {
			var dst *string
			switch mem.Name {
			case "type":
				dst = &typ
			case "source":
				dst = &m.Source
			case "target":
				dst = &m.Target
			default:
				continue
			}
			if jsonc.KindOf(mem.Raw) != jsonc.String {
				return m, fmt.Errorf("%s is %s, not a string", mem.Name, jsonc.KindOf(mem.Raw))
			}
			*dst, _ = jsonc.Scalar(mem.Raw)
		}
	case jsonc.String:
		s, _ := jsonc.Scalar(raw)
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
