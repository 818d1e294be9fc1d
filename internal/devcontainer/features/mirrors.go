package features

import (
	"fmt"
	"strings"

	"github.com/hutchsandbox/hutch/internal/errdefs"
)

// Mirrors maps a registry, as feature references name it ("ghcr.io"),
// to the registry that serves its features instead
// ("registry.internal:5000"): for machines that cannot reach the
// original, and for tests. A feature is then fetched from the mirror
// under the same repository and version, with the mirror's credentials.
// What the mirror serves is checked as anything fetched is; plain HTTP is
// still spoken to a mirror on the loopback only.
type Mirrors map[string]string

// ParseMirrors reads mirrors written as comma-separated registry=mirror
// pairs, each a host with an optional port
// ("ghcr.io=registry.internal:5000,mcr.microsoft.com=127.0.0.1:5001").
// Blank entries are skipped and an empty s is no mirror. Anything else
// (a scheme, a path, a registry named twice) fails it with class
// errdefs.ErrInvalid, naming the entry.
func ParseMirrors(s string) (Mirrors, error) {
	var out Mirrors
	for _, entry := range strings.Split(s, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		bad := func(why string) (Mirrors, error) {
			return nil, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("%q %s; write registry=mirror, each a host with an optional port, e.g. ghcr.io=registry.internal:5000", entry, why))
		}
		from, to, ok := strings.Cut(entry, "=")
		from, to = strings.ToLower(strings.TrimSpace(from)), strings.ToLower(strings.TrimSpace(to))
		switch {
		case !ok || from == "" || to == "":
			return bad("is not registry=mirror")
		case strings.Contains(from, "://") || strings.Contains(to, "://"):
			return bad("names a scheme: hutch speaks https to a registry, and plain HTTP to one on the loopback only")
		case !ociRegistry.MatchString(from):
			return bad(fmt.Sprintf("names %q, which is not a registry host", from))
		case !ociRegistry.MatchString(to):
			return bad(fmt.Sprintf("names %q, which is not a registry host", to))
		case out[from] != "":
			return bad(fmt.Sprintf("names a second mirror of %s", from))
		}
		if out == nil {
			out = Mirrors{}
		}
		out[from] = to
	}
	return out, nil
}

// of returns the registry ref is fetched from: its mirror, if any.
func (m Mirrors) of(ref Ref) string {
	if to := m[ref.Registry]; to != "" {
		return to
	}
	return ref.Registry
}
