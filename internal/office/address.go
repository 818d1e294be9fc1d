package office

import (
	"strings"
	"unicode/utf8"

	"github.com/hutchsandbox/hutch/internal/errdefs"
)

// Address identifies one conversation: the platform and the platform's own
// conversation id, kept raw (not normalised) because the raw id is what the
// office key hashes.
type Address struct {
	Platform       Platform
	ConversationID string
}

// The texts of conversation id refusals. They are the ones operators of the
// reference system know, so they stay word for word.
const (
	msgIDMarker    = "Conversation id must be non-empty and not a path marker"
	msgIDSeparator = "Conversation id must not contain path separators or control characters"
	msgIDUTF8      = "Conversation id must be valid UTF-8"
	// The texts below are hutch's own: the reference system has no such
	// limits.
	msgIDTooLong     = "Conversation id must be at most 256 bytes"
	msgIDReplacement = "Conversation id must not contain U+FFFD, the character a decoder puts in place of bytes that are not valid UTF-8"
	msgIDBidi        = "Conversation id must not contain bidirectional control characters (U+061C, U+200E, U+200F, U+202A to U+202E, U+2066 to U+2069)"
	msgAddressForm   = "Conversation must be written <platform>/<conversation-id>, e.g. slack/C0123ABC"
)

// NewAddress validates platform and conversationID and returns their
// address. Errors are of class errdefs.ErrInvalid.
func NewAddress(platform, conversationID string) (Address, error) {
	p, err := ParsePlatform(platform)
	if err != nil {
		return Address{}, err
	}
	if err := ValidateConversationID(conversationID); err != nil {
		return Address{}, err
	}
	return Address{Platform: p, ConversationID: conversationID}, nil
}

// ParseAddress parses "<platform>/<conversation-id>", splitting at the
// first slash. Conversation ids cannot contain a slash, so the split is
// unambiguous and a second slash is refused as part of the id.
func ParseAddress(s string) (Address, error) {
	platform, id, ok := strings.Cut(s, "/")
	if !ok {
		return Address{}, errdefs.New(errdefs.ErrInvalid, msgAddressForm)
	}
	return NewAddress(platform, id)
}

// ValidateConversationID checks that id is safe to appear in paths and
// logs. The office key never uses the raw id as a path component, but the
// older raw-id layout did, and the registry and logs carry it verbatim; a
// separator or a control character there is always a bug or an attack.
// Errors are of class errdefs.ErrInvalid.
func ValidateConversationID(id string) error {
	if id == "" || id == "." || id == ".." {
		return errdefs.New(errdefs.ErrInvalid, msgIDMarker)
	}
	// The key hashes the id's bytes; invalid UTF-8 would give a key that
	// no UTF-8 client (the reference system hashes UTF-8 strings) can
	// reproduce, so it is refused rather than hashed.
	if !utf8.ValidString(id) {
		return errdefs.New(errdefs.ErrInvalid, msgIDUTF8)
	}
	// An id goes into the registry, container labels, logs and listings:
	// a megabyte of it costs all of them.
	if len(id) > MaxConversationIDBytes {
		return errdefs.New(errdefs.ErrInvalid, msgIDTooLong)
	}
	for _, r := range id {
		switch {
		case r == '/' || r == '\\' || r <= 0x1f || (r >= 0x7f && r <= 0x9f):
			return errdefs.New(errdefs.ErrInvalid, msgIDSeparator)
		case r == utf8.RuneError:
			// A JSON decoder turns invalid bytes (and lone surrogate
			// escapes) into U+FFFD before any check sees them: two ids
			// that differ only there would share one office.
			return errdefs.New(errdefs.ErrInvalid, msgIDReplacement)
		case isBidiControl(r):
			// They make an id read differently from what it is, in
			// listings, logs and the admin portal.
			return errdefs.New(errdefs.ErrInvalid, msgIDBidi)
		}
	}
	return nil
}

// MaxConversationIDBytes bounds a conversation id. Platforms' ids are far
// shorter (Slack's are 11 characters, Discord's 19 digits).
const MaxConversationIDBytes = 256

// isBidiControl reports the characters that reorder text: the implicit
// marks and the embedding, override and isolate controls.
func isBidiControl(r rune) bool {
	return r == 0x061c || r == 0x200e || r == 0x200f || (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069)
}

// Validate reports whether a holds a known platform and a valid
// conversation id. Address has exported fields, so values built by hand
// are checked wherever they reach the disk.
func (a Address) Validate() error {
	if _, err := ParsePlatform(string(a.Platform)); err != nil {
		return err
	}
	return ValidateConversationID(a.ConversationID)
}

// String renders a as "<platform>/<conversation-id>", the form ParseAddress
// reads.
func (a Address) String() string {
	return string(a.Platform) + "/" + a.ConversationID
}
