package features

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/tailscale/hujson"
)

// maxJSONDepth bounds how deeply a devcontainer-feature.json may nest.
// hujson recurses once per level, and a feature's metadata comes from
// whoever published it; real files nest a handful of levels.
const maxJSONDepth = 200

// standardize turns JSON with comments and trailing commas (as the
// reference CLI accepts in devcontainer-feature.json) into plain,
// compact JSON.
func standardize(data []byte) (json.RawMessage, error) {
	data = bytes.TrimPrefix(data, []byte("\ufeff"))
	if depth(data) > maxJSONDepth {
		return nil, fmt.Errorf("nested deeper than %d levels", maxJSONDepth)
	}
	// hujson blanks comments in place and ends a line comment only at a
	// newline: it gets a copy with one.
	in := make([]byte, 0, len(data)+1)
	in = append(append(in, data...), '\n')
	std, err := hujson.Standardize(in)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if err := json.Compact(&b, std); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// depth returns how deeply objects and arrays nest in data, skipping
// strings and comments. It only counts; the syntax is hujson's to check.
func depth(data []byte) int {
	d, most := 0, 0
	for i := 0; i < len(data); i++ {
		switch data[i] {
		case '"':
			for i++; i < len(data) && data[i] != '"'; i++ {
				if data[i] == '\\' {
					i++
				}
			}
		case '/':
			if i+1 < len(data) && data[i+1] == '/' {
				for i < len(data) && data[i] != '\n' {
					i++
				}
			} else if i+1 < len(data) && data[i+1] == '*' {
				end := bytes.Index(data[i+2:], []byte("*/"))
				if end < 0 {
					return most
				}
				i += 2 + end + 1
			}
		case '{', '[':
			d++
			most = max(most, d)
		case '}', ']':
			d--
		}
	}
	return most
}

// member is one name and value of a JSON object.
type member struct {
	name string
	raw  json.RawMessage
}

// members returns the members of the object raw in its order; a name
// given twice keeps its first place and its last value, as encoding/json
// keeps the last. It fails when raw is not an object.
func members(raw json.RawMessage) ([]member, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, errors.New("expected an object")
	}
	var out []member
	seen := make(map[string]int)
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		name, _ := tok.(string)
		var value json.RawMessage
		if err := dec.Decode(&value); err != nil {
			return nil, err
		}
		if i, ok := seen[name]; ok {
			out[i].raw = value
			continue
		}
		seen[name] = len(out)
		out = append(out, member{name: name, raw: value})
	}
	return out, nil
}

// kind names the JSON kind of raw, which is valid JSON: "a string", "an
// object", "an array", "a boolean", "null" or "a number".
func kind(raw json.RawMessage) string {
	raw = bytes.TrimLeft(raw, " \t\r\n")
	if len(raw) == 0 {
		return "null"
	}
	switch raw[0] {
	case '"':
		return "a string"
	case '{':
		return "an object"
	case '[':
		return "an array"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// scalar renders a string, boolean or number as the text an install
// script gets: the string itself, "true"/"false", the number as written.
// ok is false for null, objects and arrays.
func scalar(raw json.RawMessage) (string, bool) {
	switch kind(raw) {
	case "a string":
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return "", false
		}
		return s, true
	case "a boolean":
		var b bool
		if json.Unmarshal(raw, &b) != nil {
			return "", false
		}
		return strconv.FormatBool(b), true
	case "a number":
		return string(bytes.TrimSpace(raw)), true
	}
	return "", false
}

// stringList reads an array of strings; null is an empty one.
func stringList(raw json.RawMessage) ([]string, error) {
	switch k := kind(raw); k {
	case "null":
		return nil, nil
	case "an array":
	default:
		return nil, fmt.Errorf("expected an array of strings, got %s", k)
	}
	var out []string
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, errors.New("expected an array of strings, and an item is not a string")
	}
	return out, nil
}
