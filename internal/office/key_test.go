package office_test

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
	"unicode"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/office"
)

// keyVectors were computed once with an independent implementation of the
// reference algorithm (JavaScript: toLowerCase, /[^a-z0-9]+/g, slice(0,32),
// node's crypto SHA-256), and two digests were checked again with
// `printf 'office-address-v1\0slack\0C0123ABC' | sha256sum`. They pin the
// on-disk names of offices: a change here orphans existing workspaces.
var keyVectors = []struct {
	name     string
	platform office.Platform
	id       string
	want     office.Key
}{
	{"slack_channel", "slack", "C0123ABC", "v1-slack-c0123abc-029c73fa16766e2b"},
	{"discord_snowflake", "discord", "123456789012345678", "v1-discord-123456789012345678-5002c92f98e8f28b"},
	{"telegram_leading_minus", "telegram", "-1001234567890", "v1-telegram-1001234567890-53db752ab26cabc6"},
	{"github_underscores", "github", "GH_owner_repo_1652", "v1-github-gh-owner-repo-1652-a93328523a3388ea"},
	{"web_space", "web", "session 42", "v1-web-session-42-3c6443409944dc62"},
	{"colon", "slack", "foo:bar", "v1-slack-foo-bar-e23f8e605a9f3134"},
	{"dot_same_readable_other_digest", "slack", "foo.bar", "v1-slack-foo-bar-df2d66041124169e"},
	{"punctuation_runs_trimmed", "slack", "--Hello,  World!--", "v1-slack-hello-world-12000c47c27e9a74"},
	{"accents_become_separators", "telegram", "Café Ünïcode", "v1-telegram-caf-n-code-0574cbe883c76086"},
	{"dotted_capital_i_as_in_javascript", "slack", "İstanbul", "v1-slack-i-stanbul-50a951de1ae618e8"},
	{"dotted_capital_i_alone", "slack", "İ", "v1-slack-i-6678be69ae6ed0a2"},
	{"kelvin_sign_lowers_to_k", "discord", "KELVIN-\u212a", "v1-discord-kelvin-k-4d6ca742f3193455"},
	{"cjk_only", "web", "日本語", "v1-web-conversation-622228d43d619581"},
	{"emoji_only", "web", "🙂🙂", "v1-web-conversation-f9391737f2cf7ae5"},
	{"punctuation_only", "web", "!!!", "v1-web-conversation-f6bd96e18a6fe563"},
	{"long_cut_then_trailing_dash_stripped", "github", "a-very-long-conversation-identifier-that-goes-on-and-on", "v1-github-a-very-long-conversation-identif-1d85e583b7057cc1"},
	{"dash_at_byte_32_stripped", "slack", "abcdefghijklmnopqrstuvwxyz01234-6789", "v1-slack-abcdefghijklmnopqrstuvwxyz01234-599ddb9e31d4be52"},
	{"exactly_32", "slack", "ABCDEFGHIJKLMNOPQRSTUVWXYZ012345", "v1-slack-abcdefghijklmnopqrstuvwxyz012345-8e737861a215ad83"},
	{"single_char", "web", "x", "v1-web-x-58e2b829eb40b63a"},
}

func TestAddress_Key_Vectors(t *testing.T) {
	for _, tc := range keyVectors {
		t.Run(tc.name, func(t *testing.T) {
			a, err := office.NewAddress(string(tc.platform), tc.id)
			checkErr(t, err, "", nil)
			if got := a.Key(); got != tc.want {
				t.Errorf("Key(%s) got %q, want %q", a, got, tc.want)
			}
			if _, err := office.ParseKey(string(tc.want)); err != nil {
				t.Errorf("ParseKey(%q) = %v, want nil", tc.want, err)
			}
		})
	}
}

// TestAddress_Key_Digest recomputes the digest from its definition, written
// out here rather than shared with the package.
func TestAddress_Key_Digest(t *testing.T) {
	for _, tc := range keyVectors {
		t.Run(tc.name, func(t *testing.T) {
			sum := sha256.Sum256([]byte("office-address-v1\x00" + string(tc.platform) + "\x00" + tc.id))
			want := hex.EncodeToString(sum[:])[:16]
			key := string(office.Address{Platform: tc.platform, ConversationID: tc.id}.Key())
			if got := key[len(key)-16:]; got != want {
				t.Errorf("digest of %q got %q, want %q", tc.id, got, want)
			}
			wantPrefix := "v1-" + string(tc.platform) + "-" + office.Readable(tc.id) + "-"
			if !strings.HasPrefix(key, wantPrefix) {
				t.Errorf("key %q does not start with %q", key, wantPrefix)
			}
		})
	}
}

func TestAddress_Key_Distinct(t *testing.T) {
	pairs := []struct {
		name string
		a, b office.Address
	}{
		{"punctuation_only_differs", office.Address{Platform: "slack", ConversationID: "foo:bar"}, office.Address{Platform: "slack", ConversationID: "foo.bar"}},
		{"case_only_differs", office.Address{Platform: "slack", ConversationID: "abc"}, office.Address{Platform: "slack", ConversationID: "ABC"}},
		{"platform_differs", office.Address{Platform: "slack", ConversationID: "123"}, office.Address{Platform: "discord", ConversationID: "123"}},
		{"long_ids_same_prefix", office.Address{Platform: "web", ConversationID: strings.Repeat("a", 40) + "1"}, office.Address{Platform: "web", ConversationID: strings.Repeat("a", 40) + "2"}},
		// The NUL separators keep platform and id from sliding into each other.
		{"no_boundary_ambiguity", office.Address{Platform: "web", ConversationID: "x"}, office.Address{Platform: "web", ConversationID: "\x00x"}},
	}
	for _, tc := range pairs {
		t.Run(tc.name, func(t *testing.T) {
			if ka, kb := tc.a.Key(), tc.b.Key(); ka == kb {
				t.Errorf("%q and %q share key %q", tc.a.ConversationID, tc.b.ConversationID, ka)
			}
		})
	}
}

func TestReadable(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"lowercased", "C0123ABC", "c0123abc"},
		{"runs_collapse", "a--__b", "a-b"},
		{"trimmed", "  a  ", "a"},
		{"empty", "", "conversation"},
		{"all_separators", "-_-", "conversation"},
		{"unicode_only", "Ωμέγα", "conversation"},
		{"unicode_between", "aΩb", "a-b"},
		{"cut_at_32", strings.Repeat("x", 40), strings.Repeat("x", 32)},
		{"cut_leaves_dash", strings.Repeat("x", 31) + "-yy", strings.Repeat("x", 31)},
		{"cut_after_dash", strings.Repeat("x", 30) + "-yy", strings.Repeat("x", 30) + "-y"},
		{"leading_trim_before_cut", "---" + strings.Repeat("x", 32), strings.Repeat("x", 32)},
		{"invalid_utf8_is_separator", "a\xffb", "a-b"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := office.Readable(tc.in); got != tc.want {
				t.Errorf("Readable(%q) got %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

// TestReadable_LowercaseParity pins the assumption behind Readable's one
// special case: besides A-Z, only U+0130 and U+212A lower-case to ASCII
// letters or digits in Go's tables (JavaScript agrees on U+212A and maps
// U+0130 to "i" plus a combining dot). If a Unicode update adds one, this
// fails and the key algorithm must be reviewed.
func TestReadable_LowercaseParity(t *testing.T) {
	for r := rune(0x80); r <= unicode.MaxRune; r++ {
		for _, c := range strings.ToLower(string(r)) {
			if c < 0x80 && (unicode.IsLetter(c) || unicode.IsDigit(c)) && r != 0x130 && r != 0x212a {
				t.Errorf("%U lower-cases to ASCII %q", r, c)
			}
		}
	}
}

func TestParseKey(t *testing.T) {
	tests := []struct {
		name, in string
		ok       bool
	}{
		{"simple", "v1-slack-c0123abc-029c73fa16766e2b", true},
		{"every_platform_web", "v1-web-conversation-622228d43d619581", true},
		{"dashed_readable", "v1-github-gh-owner-repo-1652-a93328523a3388ea", true},
		{"unknown_platform", "v1-irc-c0123abc-029c73fa16766e2b", false},
		{"wrong_version", "v2-slack-c0123abc-029c73fa16766e2b", false},
		{"uppercase_digest", "v1-slack-c0123abc-029C73FA16766E2B", false},
		{"short_digest", "v1-slack-c0123abc-029c73fa16766e2", false},
		{"long_digest", "v1-slack-c0123abc-029c73fa16766e2bb", false},
		{"hex_looking_readable", "v1-slack-029c73fa16766e2b-029c73fa16766e2b", true},
		{"no_readable", "v1-slack-029c73fa16766e2b", false},
		{"double_dash", "v1-slack-a--b-029c73fa16766e2b", false},
		{"uppercase_readable", "v1-slack-ABC-029c73fa16766e2b", false},
		{"trailing_newline", "v1-slack-c0123abc-029c73fa16766e2b\n", false},
		{"path_traversal", "../v1-slack-c0123abc-029c73fa16766e2b", false},
		{"empty", "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			k, err := office.ParseKey(tc.in)
			if got := office.LooksLikeKey(tc.in); got != tc.ok {
				t.Errorf("LooksLikeKey(%q) got %v, want %v", tc.in, got, tc.ok)
			}
			if tc.ok {
				checkErr(t, err, "", nil)
				if string(k) != tc.in {
					t.Errorf("ParseKey(%q) got %q", tc.in, k)
				}
				return
			}
			checkErr(t, err, `Invalid office key: "`+strings.ReplaceAll(tc.in, "\n", `\n`)+`"`, errdefs.ErrInvalid)
		})
	}
}

func TestPaths(t *testing.T) {
	k := office.Key("v1-slack-c0123abc-029c73fa16766e2b")
	if got, want := office.Dir("/srv/ws", k), "/srv/ws/v1-slack-c0123abc-029c73fa16766e2b"; got != want {
		t.Errorf("Dir got %q, want %q", got, want)
	}
	if got, want := office.StateDir("/var/lib/hutch", k), "/var/lib/hutch/conversations/v1-slack-c0123abc-029c73fa16766e2b"; got != want {
		t.Errorf("StateDir got %q, want %q", got, want)
	}
}
