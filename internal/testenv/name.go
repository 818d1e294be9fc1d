package testenv

import (
	"crypto/rand"
	"encoding/hex"
	"strings"
	"testing"
)

// maxNameBase is how many characters of the test name a Name keeps.
const maxNameBase = 40

// Name returns a name for a resource the test creates (container, network,
// volume, image repository): the test's name lowercased, every run of
// characters other than [a-z0-9] turned into one '-', cut to 40 characters,
// then '-' and 6 random hex digits, so that a rerun or a parallel run does
// not collide. It starts with [a-z0-9] and is valid for Docker everywhere.
func Name(t testing.TB) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(t.Name()) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			if dash && b.Len() > 0 {
				b.WriteByte('-')
			}
			b.WriteRune(r)
			dash = false
			continue
		}
		dash = true
	}
	base := b.String()
	if len(base) > maxNameBase {
		base = strings.TrimRight(base[:maxNameBase], "-")
	}
	if base == "" {
		base = "test"
	}
	var suffix [3]byte
	_, _ = rand.Read(suffix[:]) // never fails (crypto/rand panics instead)
	return base + "-" + hex.EncodeToString(suffix[:])
}
