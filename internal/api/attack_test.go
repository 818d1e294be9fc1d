package api_test

import (
	"io"
	"strings"
	"testing"
)

// TestAttack_InvalidUTF8SharesAnOffice: two conversation ids that differ
// only in bytes that are not valid UTF-8 (raw in the body, or as lone
// surrogate escapes) decode to the same string with U+FFFD in it. If
// either were accepted, the two conversations would run in one office and
// read each other's files. Both forms are refused, and so are the other
// ids the API must not take: too long, or with bidi controls.
func TestAttack_InvalidUTF8SharesAnOffice(t *testing.T) {
	ts := newServer(t, "")
	convOf := func(id string) string {
		return `"conversation":{"platform":"web","conversationId":"` + id + `"}`
	}
	tests := []struct{ name, id, want string }{
		{"raw_ff", "rel-u\xff", "Malformed JSON body: not valid UTF-8"},
		{"raw_fe", "rel-u\xfe", "Malformed JSON body: not valid UTF-8"},
		{"surrogate_escape", `rel-u\udcff`, "must not contain U+FFFD"},
		{"replacement_escape", `rel-u\ufffd`, "must not contain U+FFFD"},
		{"bidi_override", `inv\u202egnp`, "must not contain bidirectional control characters"},
		{"too_long", strings.Repeat("x", 257), "must be at most 256 bytes"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, path := range []string{"/v1/door", "/v1/exec"} {
				body := `{` + convOf(tc.id) + `,"policy":"shared"}`
				if path == "/v1/exec" {
					body = `{` + convOf(tc.id) + `,"command":"echo planted > note; cat note"}`
				}
				code, got := post(t, ts, path, body)
				if code != 400 || !strings.Contains(got, tc.want) || !strings.Contains(got, `"code":"invalid"`) {
					t.Errorf("%s %s: %d %s; want 400 invalid containing %q", path, tc.name, code, got, tc.want)
				}
			}
		})
	}
	resp, err := ts.Client().Get(ts.URL + "/v1/offices")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	got, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || strings.TrimSpace(string(got)) != "[]" {
		t.Errorf("offices after the refused ids: %d %s; want none", resp.StatusCode, got)
	}
}
