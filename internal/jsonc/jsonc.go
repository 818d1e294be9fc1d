// Package jsonc reads JSON with comments and trailing commas, the dialect
// of devcontainer.json and devcontainer-feature.json, through
// github.com/tailscale/hujson, and the plain JSON that comes out of it:
// an object's members in file order, a value's kind named for a message,
// strings and scalars as text.
//
// Standardize bounds how deeply the input may nest before hujson sees it:
// hujson recurses once per level with no limit of its own, and a stack
// overflow kills the process rather than panicking.
//
// The package is pure: it reads the bytes it is given and nothing else.
package jsonc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/tailscale/hujson"
)

// TrimBOM returns data without the UTF-8 byte order mark editors on
// Windows write at the start of a file.
func TrimBOM(data []byte) []byte {
	return bytes.TrimPrefix(data, []byte("\ufeff"))
}

// A DepthError is returned by Standardize for input nested too deeply.
type DepthError struct {
	// Offset is that of the first "{" or "[" past the limit.
	Offset int
	// Max is the limit.
	Max int
}

func (e *DepthError) Error() string {
	return fmt.Sprintf("nested deeper than %d levels", e.Max)
}

// Standardize turns data, JSON with comments and trailing commas (and no
// byte order mark: see TrimBOM), into plain JSON in which comments and
// trailing commas are blanked: a byte offset in data is the same in the
// result, which has a newline more at the end. It fails with a
// *DepthError when objects and arrays nest more than maxDepth levels,
// and with hujson's error ("hujson: line L, column C: <what>", a position
// past data meaning its end) when data is not JSON with comments. Its
// result is not checked against encoding/json.
func Standardize(data []byte, maxDepth int) ([]byte, error) {
	if off := tooDeep(data, maxDepth); off >= 0 {
		return nil, &DepthError{Offset: off, Max: maxDepth}
	}
	// hujson blanks comments in the buffer it parses, so it gets a copy.
	// The copy ends in a newline: hujson ends a line comment only there,
	// and editors do not all write one at the end of the file.
	in := make([]byte, 0, len(data)+1)
	in = append(append(in, data...), '\n')
	return hujson.Standardize(in)
}

// tooDeep returns the offset of the first "{" or "[" that opens level
// maxDepth+1, skipping strings and comments, or -1. It counts only; the
// syntax is hujson's to check, and on the valid prefix hujson reads before
// any error, the count is its recursion depth.
func tooDeep(data []byte, maxDepth int) int {
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

// A Member is one name and value of a JSON object.
type Member struct {
	Name string
	Raw  json.RawMessage
}

// Members returns the members of the object raw in file order. A name
// given twice keeps its first place and its last value, as
// encoding/json's last-wins. It fails when raw is not an object or not
// JSON.
func Members(raw json.RawMessage) ([]Member, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, errors.New("expected an object")
	}
	var out []Member
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
			out[i].Raw = value
			continue
		}
		seen[name] = len(out)
		out = append(out, Member{Name: name, Raw: value})
	}
	return out, nil
}

// A Kind is a kind of JSON value, told by the value's first byte (true
// and false share one).
type Kind byte

// The kinds of JSON value.
const (
	String Kind = '"'
	Object Kind = '{'
	Array  Kind = '['
	Bool   Kind = 't'
	Null   Kind = 'n'
	Number Kind = '0'
)

// KindOf returns the kind of the JSON value raw, which is valid; empty
// raw is null.
func KindOf(raw json.RawMessage) Kind {
	raw = bytes.TrimLeft(raw, " \t\r\n")
	if len(raw) == 0 {
		return Null
	}
	switch raw[0] {
	case '"', '{', '[', 'n':
		return Kind(raw[0])
	case 't', 'f':
		return Bool
	}
	return Number
}

// String names the kind in a message ("got a number"): "a string", "an
// object", "an array", "a boolean", "null" or "a number".
func (k Kind) String() string {
	switch k {
	case String:
		return "a string"
	case Object:
		return "an object"
	case Array:
		return "an array"
	case Bool:
		return "a boolean"
	case Null:
		return "null"
	}
	return "a number"
}

// StringValue returns raw's value when it is a JSON string.
func StringValue(raw json.RawMessage) (string, bool) {
	var s string
	if KindOf(raw) != String || json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

// Scalar renders a string, boolean or number as text: the string itself,
// "true" or "false", the number as written. ok is false for null,
// objects and arrays.
func Scalar(raw json.RawMessage) (string, bool) {
	switch KindOf(raw) {
	case String:
		return StringValue(raw)
	case Bool:
		var b bool
		if json.Unmarshal(raw, &b) != nil {
			return "", false
		}
		return strconv.FormatBool(b), true
	case Number:
		return string(bytes.TrimSpace(raw)), true
	}
	return "", false
}

// Compact renders a JSON value on one line, for a message; raw as it is
// when it is not JSON.
func Compact(raw json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return string(raw)
	}
	return b.String()
}
