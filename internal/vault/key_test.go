package vault

import (
	"strings"
	"testing"

	"github.com/hutchsandbox/hutch/internal/errdefs"
)

// The expected keys were computed once with an independent implementation
// of the reference algorithm (JavaScript toLowerCase, SHA-256) and checked.
func TestIdentityKeys(t *testing.T) {
	tests := []struct {
		name  string
		kind  func(string) string
		value string
		want  string
	}{
		{"user_slack_id", UserKey, "U012ABCDEF", "u012abcdef-11f9fa9074e6"},
		{"user_empty", UserKey, "", "unknown-5a203624ac6a"},
		{"user_email", UserKey, "Alice.Smith@Example.com", "alice-smith-example-com-e806d4a05f4d"},
		{"user_colon", UserKey, "foo:bar", "foo-bar-82174213687b"},
		{"user_dot_differs_in_hash", UserKey, "foo.bar", "foo-bar-13d57ae37200"},
		{"user_only_separators", UserKey, "---", "unknown-0001216d8d18"},
		{"user_cut_to_40", UserKey, strings.Repeat("a", 50) + "-b", strings.Repeat("a", 40) + "-00c8384a3155"},
		{"user_dotted_capital_i", UserKey, "İstanbul", "i-stanbul-1f9aeac88737"},
		{"user_kelvin_sign", UserKey, "\u212Aelvin", "kelvin-49807bb53326"},
		{"container_plain", ContainerKey, "my-dev-box", "my-dev-box-3235407c9750"},
		{"container_underscore", ContainerKey, "My_Container", "my-container-1b20c6809b62"},
		{"container_cut_strips_dash", ContainerKey, strings.Repeat("x", 39) + "-y", strings.Repeat("x", 39) + "-4251ff4020f0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.kind(tc.value)
			if got != tc.want {
				t.Errorf("key(%q) got %q, want %q", tc.value, got, tc.want)
			}
			if err := ValidateKey(got); err != nil {
				t.Errorf("ValidateKey(%q): %v", got, err)
			}
		})
	}
}

func TestIdentityKeys_KindsDiffer(t *testing.T) {
	if UserKey("box") == ContainerKey("box") {
		t.Error("UserKey and ContainerKey agree for the same value; the kind must be hashed")
	}
}

func TestValidateKey(t *testing.T) {
	tests := []struct {
		name    string
		key     string
		wantErr string
	}{
		{"user_key", "u012abcdef-11f9fa9074e6", ""},
		{"office_key", "v1-slack-c0123-0123456789abcdef", ""},
		{"dotfile_like", ".hidden", ""},
		{"empty", "", "Vault key must be non-empty"},
		{"dot", ".", `Invalid vault key ".": must not be a path marker`},
		{"dotdot", "..", `Invalid vault key "..": must not be a path marker`},
		{"slash", "a/b", `Invalid vault key "a/b": must not contain path separators`},
		{"absolute", "/etc", `Invalid vault key "/etc": must not contain path separators`},
		{"backslash", `a\b`, `Invalid vault key "a\\b": must not contain path separators`},
		{"nul", "a\x00b", `Invalid vault key "a\x00b": must not contain control characters`},
		{"newline", "a\nb", `Invalid vault key "a\nb": must not contain control characters`},
		{"c1_control", "a\u0085b", `Invalid vault key "a\u0085b": must not contain control characters`},
		{"invalid_utf8", "a\xffb", `Invalid vault key "a\xffb": must be valid UTF-8`},
		{"drive_prefix", "C:x", `Invalid vault key "C:x": must not start with a drive prefix`},
		{"reserved_shared", "shared", `Invalid vault key "shared": the name is reserved`},
		{"reserved_extensions", "extensions", `Invalid vault key "extensions": the name is reserved`},
		{"reserved_any_case", "Shared", `Invalid vault key "Shared": the name is reserved`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateKey(tc.key)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("ValidateKey(%q): %v", tc.key, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("ValidateKey(%q) = nil, want %q", tc.key, tc.wantErr)
			}
			if err.Error() != tc.wantErr {
				t.Errorf("ValidateKey(%q) got %q, want %q", tc.key, err, tc.wantErr)
			}
			if !errdefs.IsInvalid(err) {
				t.Errorf("ValidateKey(%q) error is not ErrInvalid", tc.key)
			}
		})
	}
}
