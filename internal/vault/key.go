package vault

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/hutchsandbox/hutch/internal/errdefs"
)

// readableMax caps the human-readable part of a key; the hash carries the
// identity, so the cut loses nothing but legibility.
const readableMax = 40

// UserKey is the vault key of a platform user, used in host mode.
func UserKey(user string) string { return identityKey("user", user) }

// ContainerKey is the vault key of an existing container, used in
// container:<name> mode.
func ContainerKey(name string) string { return identityKey("container", name) }

// ConversationKey is the vault key a conversation had before offices
// (the raw-id layout). Only the migration uses it, to move such a vault
// to its office key.
func ConversationKey(rawID string) string { return identityKey("conversation", rawID) }

// identityKey returns <readable>-<hash>. The algorithm matches the
// reference system byte for byte so that vault directories created there
// are found under the same names here.
func identityKey(kind, value string) string {
	sum := sha256.Sum256([]byte(kind + "\x00" + value))
	return readable(value) + "-" + hex.EncodeToString(sum[:])[:12]
}

// readable is SanitizedName cut to readableMax, with a trailing "-" the
// cut may have exposed stripped.
func readable(value string) string {
	s := SanitizedName(value)
	if len(s) > readableMax {
		s = s[:readableMax]
	}
	return strings.TrimRight(s, "-")
}

// SanitizedName lower-cases value, turns every run of characters outside
// [a-z0-9] into one "-", trims "-" and falls back to "unknown": the
// readable part of a vault key before its cut, and on its own the name
// the oldest releases gave a raw id's vault and container.
func SanitizedName(value string) string {
	var b strings.Builder
	dash := false
	emit := func(c byte) {
		if c == '-' {
			if dash {
				return
			}
			dash = true
		} else {
			dash = false
		}
		b.WriteByte(c)
	}
	for _, r := range value {
		switch {
		case r == '\u0130':
			// U+0130 lower-cases to "i" plus a combining dot in the
			// reference's JavaScript (full case mapping) but to a bare "i"
			// in Go's simple mapping; emit what JavaScript sees.
			emit('i')
			emit('-')
			continue
		case r >= 'A' && r <= 'Z':
			r += 'a' - 'A'
		case r >= 0x80:
			// Only non-ASCII runes that lower-case into ASCII matter
			// (U+212A KELVIN SIGN -> "k"); the rest become "-" anyway.
			r = unicode.ToLower(r)
		}
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			emit(byte(r))
		} else {
			emit('-')
		}
	}
	s := strings.Trim(b.String(), "-")
	if s == "" {
		s = "unknown"
	}
	return s
}

// reservedKeys are top-level names under <state>/vaults that are not
// vaults: "shared" holds named profiles, "extensions" is a legacy
// directory that is never loaded or mounted. They are compared without
// regard to case because a state dir on a case-insensitive file system
// would otherwise let "Shared" alias the profiles.
var reservedKeys = []string{"shared", "extensions"}

// ValidateKey reports whether key can name a vault directory: non-empty,
// a single path component, no control characters, valid UTF-8, no drive
// prefix and not a reserved name. Errors are of class ErrInvalid.
func ValidateKey(key string) error {
	if key == "" {
		return errdefs.New(errdefs.ErrInvalid, "Vault key must be non-empty")
	}
	invalid := func(reason string) error {
		return errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("Invalid vault key %q: %s", key, reason))
	}
	switch {
	case key == "." || key == "..":
		return invalid("must not be a path marker")
	case strings.ContainsAny(key, `/\`):
		return invalid("must not contain path separators")
	case !utf8.ValidString(key):
		return invalid("must be valid UTF-8")
	case hasControl(key):
		return invalid("must not contain control characters")
	case len(key) >= 2 && key[1] == ':' && isASCIILetter(key[0]):
		return invalid("must not start with a drive prefix")
	}
	for _, r := range reservedKeys {
		if strings.EqualFold(key, r) {
			return invalid("the name is reserved")
		}
	}
	return nil
}

// hasControl reports C0 and C1 control characters and DEL, the same set
// the office address refuses.
func hasControl(s string) bool {
	for _, r := range s {
		if r < 0x20 || r >= 0x7f && r <= 0x9f {
			return true
		}
	}
	return false
}

func isASCIILetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
