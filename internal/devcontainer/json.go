package devcontainer

import (
	"bytes"
	"encoding/json"
)

// member is one name and value of a JSON object.
type member struct {
	name string
	raw  json.RawMessage
}

// members returns the members of the object raw in file order. A name
// given twice keeps its first place and its last value, as
// encoding/json's last-wins. It returns nil when raw is not an object.
func members(raw json.RawMessage) []member {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil
	}
	var out []member
	seen := make(map[string]int)
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return out
		}
		name, _ := tok.(string)
		var value json.RawMessage
		if err := dec.Decode(&value); err != nil {
			return out
		}
		if i, ok := seen[name]; ok {
			out[i].raw = value
			continue
		}
		seen[name] = len(out)
		out = append(out, member{name: name, raw: value})
	}
	return out
}

// The kinds of JSON value kindOf tells apart, by the value's first byte
// (true and false share one).
const (
	kindString = '"'
	kindObject = '{'
	kindArray  = '['
	kindBool   = 't'
	kindNull   = 'n'
	kindNumber = '0'
)

// kindOf returns the kind of the JSON value raw, which is valid.
func kindOf(raw json.RawMessage) byte {
	raw = bytes.TrimLeft(raw, " \t\r\n")
	if len(raw) == 0 {
		return kindNull
	}
	switch raw[0] {
	case '"', '{', '[', 'n':
		return raw[0]
	case 't', 'f':
		return kindBool
	}
	return kindNumber
}

// kindName names a kind in a note: "got a number".
func kindName(k byte) string {
	switch k {
	case kindString:
		return "a string"
	case kindObject:
		return "an object"
	case kindArray:
		return "an array"
	case kindBool:
		return "a boolean"
	case kindNull:
		return "null"
	}
	return "a number"
}

// stringValue returns raw's value when it is a JSON string.
func stringValue(raw json.RawMessage) (string, bool) {
	var s string
	if kindOf(raw) != kindString || json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

// compact renders a JSON value on one line, for a note.
func compact(raw json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return string(raw)
	}
	return b.String()
}

// maxDepth bounds how deeply objects and arrays may nest. hujson recurses
// once per level with no limit of its own, and a stack overflow kills the
// process rather than panicking, so a file of a million "[" would take
// the daemon down. encoding/json stops at 10000; a devcontainer.json needs
// a handful.
const maxDepth = 1000

// tooDeep returns the offset of the first "{" or "[" that opens level
// maxDepth+1, skipping strings and comments, or -1. It counts only; the
// syntax is hujson's to check, and on the valid prefix hujson reads before
// any error, the count is its recursion depth.
func tooDeep(data []byte) int {
	depth := 0
	for i := 0; i < len(data); i++ {
		switch data[i] {
		case '"':
			for i++; i < len(data) && data[i] != '"'; i++ {
				if data[i] == '\\' {
					i++
				}
			}
		case '/':
			switch {
			case bytes.HasPrefix(data[i:], []byte("//")):
				if n := bytes.IndexByte(data[i:], '\n'); n >= 0 {
					i += n
				} else {
					i = len(data)
				}
			case bytes.HasPrefix(data[i:], []byte("/*")):
				if n := bytes.Index(data[i+2:], []byte("*/")); n >= 0 {
					i += 2 + n + 1
				} else {
					i = len(data)
				}
			}
		case '{', '[':
			depth++
			if depth > maxDepth {
				return i
			}
		case '}', ']':
			depth--
		}
	}
	return -1
}
