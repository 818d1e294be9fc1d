package vault

import (
	"bytes"
	"fmt"
	"slices"
	"strings"

	"github.com/hutchsandbox/hutch/internal/errdefs"
)

// ParseEnv reads an env file: one KEY=VALUE per line. Blank lines and lines
// whose first non-space character is "#" are skipped. Spaces around the
// name are ignored; the value is everything after the first "=", taken
// literally (no inline comments, no expansion, "$" kept), except that one
// pair of matching surrounding quotes ("..." or '...') is stripped. CRLF
// line ends are accepted. A name given twice keeps its last value.
//
// Errors are of class ErrInvalid and name the line and, where the name is
// malformed, the name; never a value, because a malformed line is often a
// pasted secret.
func ParseEnv(data []byte) (map[string]string, error) {
	vars := make(map[string]string)
	for i, line := range strings.Split(string(data), "\n") {
		n := i + 1
		line = strings.TrimSuffix(line, "\r")
		trimmed := strings.TrimSpace(line)
		if trimmed == "" || strings.HasPrefix(trimmed, "#") {
			continue
		}
		name, value, ok := strings.Cut(line, "=")
		if !ok {
			return nil, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("line %d: expected NAME=VALUE", n))
		}
		name = strings.TrimSpace(name)
		if err := ValidateEnvName(name); err != nil {
			return nil, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("line %d: %s", n, err))
		}
		// A lone CR or a NUL inside a value could not be written back
		// (FormatEnv refuses them), so refuse them here rather than hand
		// out a map that does not survive a round trip.
		if strings.ContainsAny(value, "\r\x00") {
			return nil, errdefs.New(errdefs.ErrInvalid,
				fmt.Sprintf("line %d: value of variable %q contains a carriage return or NUL", n, name))
		}
		vars[name] = unquote(value)
	}
	return vars, nil
}

// FormatEnv writes vars sorted by name, one NAME=VALUE per line, such that
// ParseEnv(FormatEnv(vars)) equals vars. Values containing a newline, a
// carriage return or NUL cannot be represented and are refused; so are
// invalid names. Errors are of class ErrInvalid and name the variable.
func FormatEnv(vars map[string]string) ([]byte, error) {
	names := make([]string, 0, len(vars))
	for name := range vars {
		names = append(names, name)
	}
	slices.Sort(names)
	var b bytes.Buffer
	for _, name := range names {
		if err := ValidateEnvName(name); err != nil {
			return nil, err
		}
		value := vars[name]
		if err := validateEnvValue(name, value); err != nil {
			return nil, err
		}
		b.WriteString(name)
		b.WriteByte('=')
		b.WriteString(quote(value))
		b.WriteByte('\n')
	}
	return b.Bytes(), nil
}

// ValidateEnvName reports whether name matches ^[A-Za-z_][A-Za-z0-9_]*$,
// the names a POSIX shell can export. Errors are of class ErrInvalid.
func ValidateEnvName(name string) error {
	ok := name != ""
	for i := 0; ok && i < len(name); i++ {
		c := name[i]
		ok = c == '_' || isASCIILetter(c) || i > 0 && c >= '0' && c <= '9'
	}
	if !ok {
		return errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("invalid variable name %q", name))
	}
	return nil
}

// validateEnvValue refuses what one env file line cannot carry.
func validateEnvValue(name, value string) error {
	if strings.ContainsAny(value, "\n\r\x00") {
		return errdefs.New(errdefs.ErrInvalid,
			fmt.Sprintf("value of variable %q contains a newline, carriage return or NUL", name))
	}
	return nil
}

// unquote strips one pair of matching surrounding quotes.
func unquote(v string) string {
	if isQuoted(v) {
		return v[1 : len(v)-1]
	}
	return v
}

// quote wraps v in a pair of quotes of the other kind when ParseEnv would
// otherwise strip v's own quotes; the extra pair is what gets stripped.
func quote(v string) string {
	if !isQuoted(v) {
		return v
	}
	if v[0] == '"' {
		return "'" + v + "'"
	}
	return `"` + v + `"`
}

func isQuoted(v string) bool {
	return len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0]
}
