package office_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/office"
)

const (
	msgMarker    = "Conversation id must be non-empty and not a path marker"
	msgSeparator = "Conversation id must not contain path separators or control characters"
)

func TestNewAddress(t *testing.T) {
	tests := []struct {
		name, platform, id string
		want               string
	}{
		{"slack_channel", "slack", "C0123ABC", ""},
		{"telegram_negative", "telegram", "-1001234567890", ""},
		{"spaces_and_unicode", "web", "Café Ünïcode 🙂", ""},
		{"dots_inside", "web", "a..b", ""},
		{"three_dots", "web", "...", ""},
		{"c1_boundary_above", "web", "a\u00a0b", ""},
		{"empty", "slack", "", msgMarker},
		{"dot", "slack", ".", msgMarker},
		{"dotdot", "slack", "..", msgMarker},
		{"slash", "slack", "a/b", msgSeparator},
		{"backslash", "slack", `a\b`, msgSeparator},
		{"nul", "slack", "a\x00b", msgSeparator},
		{"newline", "slack", "a\nb", msgSeparator},
		{"unit_separator", "slack", "a\x1fb", msgSeparator},
		{"del", "slack", "a\x7fb", msgSeparator},
		{"c1_first", "slack", "a\u0080b", msgSeparator},
		{"c1_last", "slack", "a\u009fb", msgSeparator},
		{"invalid_utf8", "slack", "a\xffb", "Conversation id must be valid UTF-8"},
		{"replacement_char", "web", "rel-u\ufffd", "Conversation id must not contain U+FFFD, the character a decoder puts in place of bytes that are not valid UTF-8"},
		{"bidi_override", "web", "invoice\u202egnp.exe", "Conversation id must not contain bidirectional control characters (U+061C, U+200E, U+200F, U+202A to U+202E, U+2066 to U+2069)"},
		{"bidi_isolate", "web", "a\u2067b", "Conversation id must not contain bidirectional control characters (U+061C, U+200E, U+200F, U+202A to U+202E, U+2066 to U+2069)"},
		{"arabic_letter_mark", "web", "a\u061cb", "Conversation id must not contain bidirectional control characters (U+061C, U+200E, U+200F, U+202A to U+202E, U+2066 to U+2069)"},
		{"longest", "web", strings.Repeat("x", 256), ""},
		{"too_long", "web", strings.Repeat("x", 257), "Conversation id must be at most 256 bytes"},
		{"mib", "web", strings.Repeat("x", 1<<20), "Conversation id must be at most 256 bytes"},
		{"emoji_zwj", "web", "team-\U0001F469\u200d\U0001F4BB", ""},
		{"bad_platform", "irc", "x", `Unsupported platform: "irc" (use slack, discord, telegram, github or web)`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, err := office.NewAddress(tc.platform, tc.id)
			checkErr(t, err, tc.want, errdefs.ErrInvalid)
			if tc.want != "" {
				return
			}
			want := office.Address{Platform: office.Platform(tc.platform), ConversationID: tc.id}
			if diff := cmp.Diff(want, a); diff != "" {
				t.Errorf("NewAddress mismatch (-want +got):\n%s", diff)
			}
			if err := a.Validate(); err != nil {
				t.Errorf("Validate() = %v, want nil", err)
			}
		})
	}
}

func TestParseAddress(t *testing.T) {
	const msgForm = "Conversation must be written <platform>/<conversation-id>, e.g. slack/C0123ABC"
	tests := []struct {
		name, in string
		want     office.Address
		wantErr  string
	}{
		{"slack", "slack/C0123ABC", office.Address{Platform: office.PlatformSlack, ConversationID: "C0123ABC"}, ""},
		{"telegram", "telegram/-100123", office.Address{Platform: office.PlatformTelegram, ConversationID: "-100123"}, ""},
		{"no_slash", "C0123ABC", office.Address{}, msgForm},
		{"empty", "", office.Address{}, msgForm},
		{"empty_id", "slack/", office.Address{}, msgMarker},
		{"second_slash_in_id", "slack/a/b", office.Address{}, msgSeparator},
		{"unknown_platform", "irc/x", office.Address{}, `Unsupported platform: "irc" (use slack, discord, telegram, github or web)`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := office.ParseAddress(tc.in)
			checkErr(t, err, tc.wantErr, errdefs.ErrInvalid)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ParseAddress(%q) mismatch (-want +got):\n%s", tc.in, diff)
			}
			if tc.wantErr == "" && got.String() != tc.in {
				t.Errorf("String() got %q, want %q", got.String(), tc.in)
			}
		})
	}
}

func TestAddress_Validate(t *testing.T) {
	err := office.Address{Platform: "irc", ConversationID: "x"}.Validate()
	checkErr(t, err, `Unsupported platform: "irc" (use slack, discord, telegram, github or web)`, errdefs.ErrInvalid)
	err = office.Address{Platform: office.PlatformWeb, ConversationID: ".."}.Validate()
	checkErr(t, err, msgMarker, errdefs.ErrInvalid)
}
