package features

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/hutchsandbox/hutch/internal/errdefs"
)

// EnvVar is one variable of a feature's install environment.
type EnvVar struct {
	Name, Value string
}

var (
	leadingDigit = regexp.MustCompile(`^[0-9_]+`)
	// envName is a name every shell can assign and export.
	envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// SafeID is the environment variable an option id becomes, as the spec's
// option resolution writes it: every character outside [A-Za-z0-9_]
// becomes "_", a leading run of digits and underscores becomes one "_",
// and the result is upper-cased ("version" -> VERSION, "install-tools"
// -> INSTALL_TOOLS, "2fa" -> _FA). An id of no characters gives "".
//
// The reference implementation replaces JavaScript's UTF-16 code units,
// so a character beyond the Basic Multilingual Plane becomes "__"; so it
// does here.
func SafeID(id string) string {
	var b strings.Builder
	for _, r := range id {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_':
			b.WriteRune(r)
		case r > 0xffff:
			b.WriteString("__")
		default:
			b.WriteByte('_')
		}
	}
	return strings.ToUpper(leadingDigit.ReplaceAllString(b.String(), "_"))
}

// OptionEnv is the environment a feature's install.sh gets for its
// options: for each option the feature declares, in its file's order,
// the value given or else the option's default (an option with neither is
// left unset), then each given option the feature does not declare, by
// name; the reference CLI passes those through too, and each gets a note.
// A value outside the option's enum is passed and noted, as the reference
// CLI does not check it either.
//
// feature names the feature in errors and notes. It fails, with class
// errdefs.ErrInvalid, on an option id that leaves no name (SafeID is "")
// or a value holding a NUL byte, which no environment can carry.
func OptionEnv(feature string, md *Metadata, given map[string]string) ([]EnvVar, []string, error) {
	var env []EnvVar
	var notes []string
	names := make(map[string]string) // env name -> option id
	add := func(id, value string) error {
		name := SafeID(id)
		if name == "" {
			return errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("feature %s: option %q gives no environment variable name; rename it", feature, id))
		}
		if strings.ContainsRune(value, 0) {
			return errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("feature %s: option %s holds a NUL byte, which no environment variable can carry", feature, id))
		}
		if other, dup := names[name]; dup {
			notes = append(notes, fmt.Sprintf("feature %s: options %q and %q are both %s; the value of %q is the one install.sh sees", feature, other, id, name, id))
		}
		names[name] = id
		env = append(env, EnvVar{Name: name, Value: value})
		return nil
	}
	var declared []Option
	if md != nil {
		declared = md.Options
	}
	for _, o := range declared {
		v, ok := given[o.ID]
		if !ok {
			if !o.HasDefault {
				continue
			}
			v = o.Default
		} else if len(o.Enum) > 0 && !slices.Contains(o.Enum, v) {
			notes = append(notes, fmt.Sprintf("feature %s: option %s is %q, not one of %s; it is passed as given", feature, o.ID, v, strings.Join(o.Enum, ", ")))
		}
		if err := add(o.ID, v); err != nil {
			return nil, nil, err
		}
	}
	var extra []string
	for id := range given {
		if md == nil {
			extra = append(extra, id)
		} else if _, ok := md.Option(id); !ok {
			extra = append(extra, id)
		}
	}
	slices.Sort(extra)
	for _, id := range extra {
		notes = append(notes, fmt.Sprintf("feature %s: option %s is not one the feature declares; it is passed as %s, as the reference CLI does", feature, id, SafeID(id)))
		if err := add(id, given[id]); err != nil {
			return nil, nil, err
		}
	}
	return env, notes, nil
}

// Users are the users the spec tells every install script about.
type Users struct {
	// ContainerUser is the user the container runs as (containerUser,
	// else the image's USER); "" is root.
	ContainerUser string
	// RemoteUser is the user tools connect as (remoteUser); "" is the
	// container user.
	RemoteUser string
	// ContainerUserHome and RemoteUserHome are their home folders; ""
	// looks them up in the image's passwd database during the build.
	ContainerUserHome string
	RemoteUserHome    string
}

// defaults returns the users with the spec's defaults applied.
func (u Users) defaults() Users {
	if u.ContainerUser == "" {
		u.ContainerUser = "root"
	}
	if u.RemoteUser == "" {
		u.RemoteUser = u.ContainerUser
		if u.RemoteUserHome == "" {
			u.RemoteUserHome = u.ContainerUserHome
		}
	}
	return u
}

// EnvFile renders the file an install script's environment is sourced
// from (with set -a, so every assignment is exported): the spec's
// _CONTAINER_USER, _REMOTE_USER and their homes, then vars. Every value is
// single-quoted, so nothing in it ($(...), backticks, quotes, newlines) is
// ever interpreted by the shell that sources it. A home not given is
// looked up with getent, or in /etc/passwd where there is no getent
// (busybox), by a command that reads the user's name from the variable
// already set rather than from text of its own.
//
// It fails, with class errdefs.ErrInvalid, on a name that is not a valid
// variable name or a value holding a NUL byte.
func EnvFile(users Users, vars []EnvVar) (string, error) {
	u := users.defaults()
	var b strings.Builder
	b.WriteString("# Written by hutch: the environment of this feature's install.sh.\n")
	assign := func(name, value string) error {
		if !envName.MatchString(name) {
			return errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("%q is not a valid environment variable name", name))
		}
		if strings.ContainsRune(value, 0) {
			return errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("the value of %s holds a NUL byte, which no environment variable can carry", name))
		}
		b.WriteString(name + "=" + shellQuote(value) + "\n")
		return nil
	}
	for _, e := range []EnvVar{{"_CONTAINER_USER", u.ContainerUser}, {"_REMOTE_USER", u.RemoteUser}} {
		if err := assign(e.Name, e.Value); err != nil {
			return "", err
		}
	}
	for _, h := range []struct{ name, home, user string }{
		{"_CONTAINER_USER_HOME", u.ContainerUserHome, "_CONTAINER_USER"},
		{"_REMOTE_USER_HOME", u.RemoteUserHome, "_REMOTE_USER"},
	} {
		if h.home != "" {
			if err := assign(h.name, h.home); err != nil {
				return "", err
			}
			continue
		}
		fmt.Fprintf(&b, "%s=\"$(getent passwd \"$%s\" 2>/dev/null | cut -d: -f6)\"\n", h.name, h.user)
		fmt.Fprintf(&b, "[ -n \"$%s\" ] || %s=\"$(awk -F: -v u=\"$%s\" '$1 == u || $3 == u { print $6; exit }' /etc/passwd 2>/dev/null)\"\n", h.name, h.name, h.user)
	}
	for _, e := range vars {
		if err := assign(e.Name, e.Value); err != nil {
			return "", err
		}
	}
	return b.String(), nil
}

// shellQuote quotes s for a POSIX shell: in single quotes nothing is
// special, and a single quote itself is closed, escaped and reopened.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
