package vault

import (
	"cmp"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/netpolicy"
)

// This file is the pure half of placeholder secrets: what a mark is, how
// its hosts and expiry are read, and what env a command sees once the
// marks are applied.
//
// A placeholder mark on an env variable means a command never sees the
// real value: it sees a token, TokenPrefix followed by 32 lowercase hex
// digits, and hutch's egress proxy swaps the token for the real value in
// requests to the hosts the mark names, and nowhere else. The token is not
// a secret (any command can read it); what it buys is that the real value
// is only ever in the proxy and the vault.

// TokenPrefix begins every placeholder token.
const TokenPrefix = "hutch-placeholder-"

// MinSearchLen is the shortest value ProjectWithPlaceholders looks for in
// file credentials: a shorter one would too likely match bytes that are
// not the secret, and turn them into a token.
const MinSearchLen = 8

// tokenHexLen is the number of hex digits after TokenPrefix.
const tokenHexLen = 32

// Placeholder is the mark on one env variable. It carries the token, never
// the value, so it may be printed and logged.
type Placeholder struct {
	// Name is the env variable.
	Name string
	// Token is what commands see in place of the value.
	Token string
	// Hosts are the allowlist entries (netpolicy.ParseAllowlist syntax,
	// in canonical form) the proxy substitutes the value toward.
	Hosts []string
	// Expires is when the proxy stops substituting; zero: never. An
	// expired mark still delivers the token, never the real value.
	Expires time.Time
	// Created is when the variable was first marked; rotating the value
	// or changing the hosts keeps it, as it keeps the token.
	Created time.Time
	// Body: the proxy substitutes in request bodies too (up to 1 MiB),
	// not only in headers, paths and queries.
	Body bool
}

// Expired reports whether the mark has an expiry at or before now.
func (p Placeholder) Expired(now time.Time) bool {
	return !p.Expires.IsZero() && !now.Before(p.Expires)
}

// Secret is what hutch's egress proxy needs for one placeholder: the token
// to look for, the real value to put in its place and where. Its String,
// GoString and LogValue never print Value.
type Secret struct {
	// Name is the env variable.
	Name string
	// Token is the placeholder the command sees.
	Token string
	// Value is the real value.
	Value string
	// Hosts are the allowlist entries the value may be sent to
	// (netpolicy.ParseAllowlist syntax).
	Hosts []string
	// Expires is when the proxy must stop substituting; zero: never.
	Expires time.Time
	// Body: substitute in request bodies too.
	Body bool
}

// String names the variable and its hosts, e.g.
// "GH_TOKEN -> api.github.com,*.githubusercontent.com".
func (s Secret) String() string {
	return s.Name + " -> " + strings.Join(s.Hosts, ",")
}

// GoString keeps %#v from printing Value.
func (s Secret) GoString() string { return "vault.Secret{" + s.String() + "}" }

// LogValue keeps slog handlers from printing Value.
func (s Secret) LogValue() slog.Value {
	return slog.GroupValue(slog.String("name", s.Name), slog.Any("hosts", s.Hosts))
}

// ApplyPlaceholders returns the env a command sees, given the vault's env
// and its marks: a copy of env in which every marked variable holds its
// token instead of its value, and the secrets the egress proxy must
// substitute, sorted by name. A mark whose variable is not in env gives
// nothing: there is no value to hide or to substitute. Expired marks are
// applied like any other: the command gets the token, and the proxy,
// seeing Expires, refuses to substitute it.
func ApplyPlaceholders(env map[string]string, marks map[string]Placeholder) (map[string]string, []Secret) {
	out := make(map[string]string, len(env))
	for name, value := range env {
		out[name] = value
	}
	secrets := []Secret{}
	for _, name := range sortedMapKeys(marks) {
		value, ok := env[name]
		if !ok {
			continue
		}
		m := marks[name]
		out[name] = m.Token
		secrets = append(secrets, Secret{
			Name:    name,
			Token:   m.Token,
			Value:   value,
			Hosts:   slices.Clone(m.Hosts),
			Body:    m.Body,
			Expires: m.Expires,
		})
	}
	return out, secrets
}

// ParsePlaceholderHosts reads HOSTS, a comma-separated allowlist such as
// "api.github.com,*.githubusercontent.com" or "registry.example:8443",
// with the syntax of netpolicy.ParseAllowlist, and returns the entries in
// canonical form, duplicates dropped. A name must have a dot below any
// "*." (so "github", "*.com" and a token pasted in the wrong place are
// refused); IP addresses are taken as they are.
//
// Errors are ErrInvalid and name the entry by position, not by text: the
// likeliest malformed HOSTS is a value pasted where a host belongs.
func ParsePlaceholderHosts(hosts string) ([]string, error) {
	parts := strings.Split(hosts, ",")
	var out []string
	for i, h := range parts {
		bad := func(reason string) error {
			return errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("Invalid placeholder host %d of %d: %s", i+1, len(parts), reason))
		}
		h = strings.TrimSpace(h)
		if h == "" {
			return nil, bad("empty; give hosts such as api.github.com,*.githubusercontent.com")
		}
		a, err := netpolicy.ParseAllowlist([]string{h})
		if err != nil {
			// netpolicy words its errors for sandbox.network.allow and
			// quotes the entry; only the reason after that applies here.
			reason, ok := strings.CutPrefix(err.Error(), fmt.Sprintf("sandbox.network.allow entry %q: ", h))
			if !ok {
				reason = "not a host name, IP address or host:port"
			}
			return nil, bad(reason)
		}
		c := a.String()
		if !isIPEntry(c) && !strings.Contains(strings.TrimPrefix(c, "*."), ".") {
			return nil, bad("give a full host name such as api.github.com or *.example.com")
		}
		if !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	return out, nil
}

// isIPEntry reports whether a canonical allowlist entry is an IP address,
// with or without a port.
func isIPEntry(e string) bool {
	if strings.HasPrefix(e, "[") {
		return true
	}
	if host, _, ok := strings.Cut(e, ":"); ok && strings.Count(e, ":") == 1 {
		e = host
	}
	_, err := netip.ParseAddr(e)
	return err == nil
}

// ParseExpiry reads an expiry as a Go duration from now ("720h", "90m"),
// an RFC 3339 time ("2027-01-01T00:00:00Z") or a date ("2027-01-01",
// midnight UTC). It must lie after now. Errors are ErrInvalid.
func ParseExpiry(s string, now time.Time) (time.Time, error) {
	var at time.Time
	if d, err := time.ParseDuration(s); err == nil {
		at = now.Add(d)
	} else if t, err := time.Parse(time.RFC3339, s); err == nil {
		at = t
	} else if t, err := time.Parse(time.DateOnly, s); err == nil {
		at = t
	} else {
		return time.Time{}, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("Invalid expiry %q: give a duration (720h) or a time (2027-01-01 or 2027-01-01T12:00:00Z)", s))
	}
	if !at.After(now) {
		return time.Time{}, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("Expiry %q is not in the future", s))
	}
	return at.UTC(), nil
}

// IsPlaceholderToken reports whether s is a well-formed token: TokenPrefix
// followed by 32 lowercase hex digits.
func IsPlaceholderToken(s string) bool {
	hex, ok := strings.CutPrefix(s, TokenPrefix)
	if !ok || len(hex) != tokenHexLen {
		return false
	}
	for i := 0; i < len(hex); i++ {
		if c := hex[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// searchable returns the secrets whose values ProjectWithPlaceholders looks
// for, longest value first (ties by name), so that a value that contains
// another is replaced whole.
func searchable(secrets []Secret) []Secret {
	var out []Secret
	for _, s := range secrets {
		if len(s.Value) >= MinSearchLen {
			out = append(out, s)
		}
	}
	slices.SortStableFunc(out, func(a, b Secret) int {
		if c := cmp.Compare(len(b.Value), len(a.Value)); c != 0 {
			return c
		}
		return cmp.Compare(a.Name, b.Name)
	})
	return out
}

// replacer swaps every searchable value for its token. strings.Replacer
// tries its pairs in argument order at each position, so the longest
// value wins where values overlap.
func replacer(secrets []Secret) *strings.Replacer {
	pairs := make([]string, 0, 2*len(secrets))
	for _, s := range secrets {
		pairs = append(pairs, s.Value, s.Token)
	}
	return strings.NewReplacer(pairs...)
}

func sortedMapKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
