package project

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path"
	"strings"

	"github.com/tailscale/hujson"

	"github.com/hutchsandbox/hutch/internal/errdefs"
)

// SetSetting returns the settings file data with key set to value, or
// removed when value is nil: at the top level when project is "", else
// in the project's override under "projects" (an override left empty
// goes). value is text from a command line, read as the file reads it:
// as JSON when it is JSON ([], true, 4, ["jq","make"]), else as a string
// (8g, debian:12); it is checked as ParseSettings checks the file, and a
// value it would ignore is refused (ErrInvalid) instead of written. The
// rest of the file keeps its keys, their order and their values; the
// file is edited as a tree, not re-encoded from a map. Empty data is an
// empty file; data that is not a JSON object is refused
// (ErrFailedPrecondition) and nothing is written.
func SetSetting(data []byte, project, key string, value *string) ([]byte, error) {
	k, ok := kinds[key]
	if !ok {
		return nil, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("%s is not a sandbox setting; the settings are %s.", key, strings.Join(Keys, ", ")))
	}
	var raw json.RawMessage
	if value != nil {
		raw = json.RawMessage(*value)
		if !json.Valid(raw) {
			raw, _ = json.Marshal(*value)
		}
		if isNull(raw) {
			return nil, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("null is not a value for %s; to remove the setting, use unset.", key))
		}
		if _, problem := parseValue(k, raw); problem != "" {
			return nil, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("%s %s.", key, problem))
		}
	}

	if len(bytes.TrimSpace(data)) == 0 {
		data = []byte("{}")
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil || top == nil {
		return nil, errdefs.New(errdefs.ErrFailedPrecondition, "The settings file is not a JSON object; fix it first, nothing was written.")
	}
	v, err := hujson.Parse(data)
	if err != nil {
		return nil, errdefs.New(errdefs.ErrFailedPrecondition, fmt.Sprintf("The settings file could not be read (%v); fix it first, nothing was written.", err))
	}

	var ops []patchOp
	ptr := "/" + pointerToken(key)
	if project != "" {
		// The override of a project spelled another way (a trailing /)
		// is the one edited, as ParseSettings would read it.
		var projects map[string]json.RawMessage
		if r, ok := top["projects"]; ok && !isNull(r) {
			if json.Unmarshal(r, &projects) != nil || projects == nil {
				return nil, errdefs.New(errdefs.ErrFailedPrecondition, "\"projects\" in the settings file is not an object; fix it first, nothing was written.")
			}
		} else if value != nil {
			ops = append(ops, patchOp{Op: "add", Path: "/projects", Value: json.RawMessage("{}")})
		}
		name := path.Clean(project)
		for p := range projects {
			if path.Clean(p) == name {
				name = p
				break
			}
		}
		var override map[string]json.RawMessage
		if r, ok := projects[name]; ok {
			if json.Unmarshal(r, &override) != nil || override == nil {
				return nil, errdefs.New(errdefs.ErrFailedPrecondition, fmt.Sprintf("The settings for %s under \"projects\" are not an object; fix them first, nothing was written.", name))
			}
		} else if value != nil {
			ops = append(ops, patchOp{Op: "add", Path: "/projects/" + pointerToken(name), Value: json.RawMessage("{}")})
		}
		if _, set := override[key]; value == nil && set && len(override) == 1 {
			// The override held this key alone: it goes whole.
			ops = append(ops, patchOp{Op: "remove", Path: "/projects/" + pointerToken(name)})
			return patch(v, ops)
		}
		top = override
		ptr = "/projects/" + pointerToken(name) + ptr
	}
	switch _, set := top[key]; {
	case value != nil:
		ops = append(ops, patchOp{Op: "add", Path: ptr, Value: raw})
	case set:
		ops = append(ops, patchOp{Op: "remove", Path: ptr})
	}
	return patch(v, ops)
}

// patchOp is one operation of an RFC 6902 JSON patch.
type patchOp struct {
	Op    string          `json:"op"`
	Path  string          `json:"path"`
	Value json.RawMessage `json:"value,omitempty"`
}

func patch(v hujson.Value, ops []patchOp) ([]byte, error) {
	if len(ops) > 0 {
		p, err := json.Marshal(ops)
		if err != nil {
			return nil, err
		}
		if err := v.Patch(p); err != nil {
			return nil, fmt.Errorf("editing the settings file: %w", err)
		}
	}
	v.Format()
	return v.Pack(), nil
}

// pointerToken escapes s as one token of a JSON pointer (RFC 6901).
func pointerToken(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}
