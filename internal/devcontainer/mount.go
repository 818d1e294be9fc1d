package devcontainer

import (
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/hutchsandbox/hutch/internal/jsonc"
)

// parseMountString reads one mount in the --mount syntax: comma-separated
// key=value fields in any order. Keys are case-insensitive: type,
// source|src, target|destination|dst, and readonly|ro, which sets ReadOnly
// as a bare word or with any value but false or 0. consistency and other
// keys are ignored, as are bare words other than readonly and ro. Values
// are substituted one by one, so a variable's value may hold a comma;
// quoting (as the docker CLI's CSV reader allows) is not supported.
func parseMountString(s string, sub *substituter) (Mount, error) {
	var m Mount
	var typ string
	for field := range strings.SplitSeq(s, ",") {
		key, value, hasValue := strings.Cut(strings.TrimSpace(field), "=")
		value = sub.expand(value)
		switch strings.ToLower(strings.TrimSpace(key)) {
		case "type":
			typ = strings.ToLower(value)
		case "source", "src":
			m.Source = value
		case "target", "destination", "dst":
			m.Target = value
		case "readonly", "ro":
			m.ReadOnly = !hasValue || !(strings.EqualFold(value, "false") || value == "0")
		}
	}
	return m, checkMount(&m, typ)
}

// parseMountObject reads one mount in the object form {type, source,
// target}; other keys are ignored.
func parseMountObject(raw json.RawMessage, sub *substituter) (Mount, error) {
	var m Mount
	var typ string
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
		s, ok := jsonc.StringValue(mem.Raw)
		if !ok {
			return Mount{}, fmt.Errorf("%s is %s, not a string", mem.Name, jsonc.KindOf(mem.Raw))
		}
		*dst = sub.expand(s)
	}
	return m, checkMount(&m, strings.ToLower(typ))
}

// checkMount sets m.Type from typ and checks what the engine would refuse.
// Without a type, a mount whose source is an absolute path is a bind and
// any other a volume: docker's --mount defaults to volume, but a path
// source only makes sense as a bind.
func checkMount(m *Mount, typ string) error {
	switch typ {
	case "bind", "volume":
		m.Type = typ
	case "":
		m.Type = "volume"
		if path.IsAbs(m.Source) {
			m.Type = "bind"
		}
	default:
		return fmt.Errorf("unknown type `%s` (bind|volume)", typ)
	}
	switch {
	case m.Target == "":
		return errors.New("no target")
	case !path.IsAbs(m.Target):
		return fmt.Errorf("target `%s` is not an absolute path", m.Target)
	case m.Type == "bind" && m.Source == "":
		return errors.New("bind mount has no source")
	}
	return nil
}
