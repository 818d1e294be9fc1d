package jsonc_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/hutchsandbox/hutch/internal/jsonc"
)

func TestStandardize(t *testing.T) {
	in := jsonc.TrimBOM([]byte("\ufeff{\"a\": [1, 2,], // c\n\"b\": /* [[ */ \"x\",}"))
	std, err := jsonc.Standardize(in, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(std) != len(in)+1 || !json.Valid(std) {
		t.Errorf("Standardize = %q, want valid JSON of %d bytes", std, len(in)+1)
	}

	_, err = jsonc.Standardize([]byte(`{"a": "[[[", "b": [[1]]}`), 2)
	var derr *jsonc.DepthError
	if !errors.As(err, &derr) || derr.Offset != 19 || err.Error() != "nested deeper than 2 levels" {
		t.Errorf("Standardize of 3 levels: %v (%+v), want a DepthError at offset 19", err, derr)
	}

	if _, err := jsonc.Standardize([]byte(`{"a": tru}`), 10); err == nil || !strings.HasPrefix(err.Error(), "hujson: line 1, column 7: ") {
		t.Errorf("Standardize of a syntax error: %v, want hujson's error", err)
	}
}

func TestMembers(t *testing.T) {
	got, err := jsonc.Members(json.RawMessage(`{"b": 1, "a": "x", "b": [2]}`))
	want := []jsonc.Member{{Name: "b", Raw: json.RawMessage(`[2]`)}, {Name: "a", Raw: json.RawMessage(`"x"`)}}
	if err != nil || !cmp.Equal(want, got) {
		t.Errorf("Members = %s, %v; want %s", got, err, want)
	}
	if _, err := jsonc.Members(json.RawMessage(`[1]`)); err == nil {
		t.Error("Members of an array succeeded")
	}
}

func TestKindAndScalar(t *testing.T) {
	tests := []struct {
		raw    string
		kind   string
		scalar string
		ok     bool
	}{
		{` "a\"b"`, "a string", `a"b`, true},
		{`{}`, "an object", "", false},
		{`[]`, "an array", "", false},
		{`false`, "a boolean", "false", true},
		{`null`, "null", "", false},
		{``, "null", "", false},
		{`-1.5e3 `, "a number", "-1.5e3", true},
	}
	for _, tt := range tests {
		raw := json.RawMessage(tt.raw)
		if got := jsonc.KindOf(raw).String(); got != tt.kind {
			t.Errorf("KindOf(%s) = %s, want %s", tt.raw, got, tt.kind)
		}
		if s, ok := jsonc.Scalar(raw); s != tt.scalar || ok != tt.ok {
			t.Errorf("Scalar(%s) = %q, %v; want %q, %v", tt.raw, s, ok, tt.scalar, tt.ok)
		}
		if s, ok := jsonc.StringValue(raw); ok != (tt.kind == "a string") || (ok && s != tt.scalar) {
			t.Errorf("StringValue(%s) = %q, %v", tt.raw, s, ok)
		}
	}
	if got := jsonc.Compact(json.RawMessage("{ \"a\" : [ 1 ] }")); got != `{"a":[1]}` {
		t.Errorf("Compact = %s", got)
	}
}
