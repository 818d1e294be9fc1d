package settings

import (
	"testing"

	"github.com/hutchsandbox/hutch/internal/projection"
)

// FuzzParseDoc: no input panics, and whatever parses either sets no door
// policy or sets a valid one that survives a rewrite.
func FuzzParseDoc(f *testing.F) {
	for _, s := range []string{
		`{}`, `[]`, `null`, `{"sandbox":{"workspace":{"doorPolicy":"trusted","layout":"full"}}}`,
		`{"sandbox":{"image":{"workspaceMount":"private"},"workspace":{"visibility":"private"}}}`,
		`{"sandbox":{"workspace":{"doorPolicy":1}}}`, `{"sandbox":null}`, `{"a":"<\u00e9>"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		d, reason := parseDoc(data)
		if reason != "" {
			if d != nil {
				t.Fatalf("malformed (%s) but returned a doc", reason)
			}
			return
		}
		if d.setting != nil {
			if err := d.setting.Validate(); err != nil {
				t.Fatalf("parsed an invalid setting %+v: %v", d.setting, err)
			}
		}
		out, err := encode(d.top)
		if err != nil {
			t.Fatalf("encode: %v", err)
		}
		again, reason := parseDoc(out)
		if reason != "" {
			t.Fatalf("re-encoded document is malformed: %s\n%s", reason, out)
		}
		if !equalSetting(d.setting, again.setting) {
			t.Fatalf("setting changed on re-encode: %+v -> %+v", d.setting, again.setting)
		}
	})
}

func equalSetting(a, b *projection.Setting) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}
