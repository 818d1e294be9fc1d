package office_test

import (
	"regexp"
	"testing"
	"unicode/utf8"

	"github.com/hutchsandbox/hutch/internal/office"
)

var readablePattern = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)

func FuzzReadable(f *testing.F) {
	for _, tc := range keyVectors {
		f.Add(tc.id)
	}
	for _, s := range []string{"", "-", "a-", "-a", "İİİ", "\xff\xfe", "a\x00b", "..", "ÅÄÖ-åäö", "x/y"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		r := office.Readable(id)
		if !readablePattern.MatchString(r) {
			t.Fatalf("Readable(%q) = %q, not a slug", id, r)
		}
		if len(r) > 32 {
			t.Fatalf("Readable(%q) = %q, %d bytes > 32", id, r, len(r))
		}
		if office.ValidateConversationID(id) != nil {
			return
		}
		if !utf8.ValidString(id) {
			t.Fatalf("ValidateConversationID accepted invalid UTF-8 %q", id)
		}
		for _, p := range office.Platforms {
			a, err := office.NewAddress(string(p), id)
			if err != nil {
				t.Fatalf("NewAddress(%q, %q) = %v after the id validated", p, id, err)
			}
			k := a.Key()
			if _, err := office.ParseKey(string(k)); err != nil {
				t.Fatalf("key %q of %s does not parse: %v", k, a, err)
			}
			back, err := office.ParseAddress(a.String())
			if err != nil || back != a {
				t.Fatalf("ParseAddress(%q) = %v, %v; want %v", a.String(), back, err, a)
			}
		}
	})
}
