package office

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/lazyregexp"
)

// Key is an office key, v1-<platform>-<readable>-<digest>: the name of the
// office directory under the workspace root and of its state directory.
type Key string

// String returns the key as written on disk.
func (k Key) String() string { return string(k) }

const (
	// keyDomain separates office digests from any other SHA-256 use of
	// the same ids; it is versioned with the key prefix.
	keyDomain = "office-address-v1"
	// digestLen is how many hex chars of the digest the key keeps: 64
	// bits, ample for the number of conversations one host serves.
	digestLen = 16
	// readableMax bounds the readable part so keys stay well below file
	// name limits even for very long ids.
	readableMax = 32
	// emptyReadable stands in when nothing of the id survives slugging
	// (an all-emoji or all-punctuation id).
	emptyReadable = "conversation"
)

// keyPattern is the office key grammar. The platform alternation comes from
// Platforms so the two cannot drift apart.
var keyPattern = lazyregexp.New(`^v1-(` + platformAlternation() + `)-[a-z0-9]+(?:-[a-z0-9]+)*-[a-f0-9]{16}$`)

func platformAlternation() string {
	names := make([]string, len(Platforms))
	for i, p := range Platforms {
		names[i] = regexp.QuoteMeta(string(p))
	}
	return strings.Join(names, "|")
}

// Key derives a's office key. It does not validate a; callers that take
// an address from outside go through NewAddress or Address.Validate.
func (a Address) Key() Key {
	h := sha256.New()
	h.Write([]byte(keyDomain))
	h.Write([]byte{0})
	h.Write([]byte(a.Platform))
	h.Write([]byte{0})
	h.Write([]byte(a.ConversationID))
	digest := hex.EncodeToString(h.Sum(nil))[:digestLen]
	return Key("v1-" + string(a.Platform) + "-" + Readable(a.ConversationID) + "-" + digest)
}

// Readable returns the human hint part of an office key for a raw
// conversation id: the id lower-cased, every run of characters outside
// [a-z0-9] replaced by one "-", trimmed of "-", cut to 32 bytes, trailing
// "-" stripped again, and "conversation" when nothing is left. The result
// always matches ^[a-z0-9]+(-[a-z0-9]+)*$.
func Readable(id string) string {
	// The reference system lower-cases with JavaScript's full Unicode
	// mapping, where U+0130 (capital I with dot above) becomes "i" plus a
	// combining dot, i.e. "i" followed by a separator here. Go's simple
	// mapping gives a bare "i". It is the only code point where the two
	// differ in a way that reaches [a-z0-9] (pinned by a test), and keys
	// must match byte for byte so existing workspaces carry over.
	lower := strings.ToLower(strings.ReplaceAll(id, "\u0130", "i\u0307"))
	var b strings.Builder
	b.Grow(min(len(lower), readableMax))
	sep := false
	// Working on bytes is enough: every byte of a multi-byte character is
	// outside [a-z0-9], and a run of them collapses to one "-" just as
	// the whole character would.
	for i := 0; i < len(lower) && b.Len() < readableMax; i++ {
		c := lower[i]
		if ('a' <= c && c <= 'z') || ('0' <= c && c <= '9') {
			// A separator is written only between two kept runs, which
			// trims both ends. It may land as the 32nd byte; the final
			// trim below removes it, as the reference's second strip does.
			if sep && b.Len() > 0 {
				b.WriteByte('-')
				if b.Len() == readableMax {
					break
				}
			}
			sep = false
			b.WriteByte(c)
			continue
		}
		sep = true
	}
	s := strings.TrimRight(b.String(), "-")
	if s == "" {
		return emptyReadable
	}
	return s
}

// ParseKey validates s as an office key. Errors are of class
// errdefs.ErrInvalid.
func ParseKey(s string) (Key, error) {
	if !keyPattern.MatchString(s) {
		return "", errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("Invalid office key: %q", s))
	}
	return Key(s), nil
}

// LooksLikeKey reports whether name has the shape of an office key, e.g.
// to tell office directories from other entries of the workspace root.
func LooksLikeKey(name string) bool { return keyPattern.MatchString(name) }
