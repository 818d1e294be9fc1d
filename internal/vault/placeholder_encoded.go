package vault

import (
	"encoding/base64"
	"strings"

	"github.com/hutchsandbox/hutch/internal/lazyregexp"
)

// base64Run is a run of standard base64 long enough to hold "user:" and
// a searchable value: the "auth" of ~/.docker/config.json, a kubeconfig's
// Basic credentials, an .npmrc's _auth.
var base64Run = lazyregexp.New(`[A-Za-z0-9+/]{16,}={0,2}`)

// encoded finds the base64 runs of s whose decoding holds a value of
// search, and returns s with each such run re-encoded with the values
// replaced by their tokens, and whether there was one. A client that
// sends the re-encoded run as Basic credentials sends the token, which
// the egress proxy decodes and substitutes toward the entry's hosts.
func encoded(s string, search []Secret, rep *strings.Replacer) (string, bool) {
	found := false
	out := base64Run.ReplaceAllStringFunc(s, func(run string) string {
		dec, err := base64.StdEncoding.DecodeString(run)
		if err != nil {
			return run
		}
		for _, sec := range search {
			if strings.Contains(string(dec), sec.Value) {
				found = true
				return base64.StdEncoding.EncodeToString([]byte(rep.Replace(string(dec))))
			}
		}
		return run
	})
	return out, found
}
