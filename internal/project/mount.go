package project

import (
	"fmt"
	"path"
	"strings"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/lazyregexp"
)

// Mount types.
const (
	MountBind   = "bind"
	MountVolume = "volume"
)

// Fixed places inside every project sandbox.
const (
	// HomeTarget is where the home volume is mounted and what HOME is.
	HomeTarget = "/sandbox/home"
	// RelayTarget is where the relay directory is mounted, read-only.
	RelayTarget = "/sandbox/relay"
)

// Mount is one mount of the sandbox.
type Mount struct {
	// Type is MountBind or MountVolume.
	Type string
	// Source is an absolute host path (bind) or a volume name (volume;
	// empty for an anonymous volume).
	Source string
	// Target is the absolute path inside the container.
	Target   string
	ReadOnly bool
	// Origin says where the mount was asked for (the devcontainer.json,
	// "sandbox-mount in <settings file>"), for messages; "" for hutch's
	// own. It does not shape the container.
	Origin string `json:"-"`
}

// String is the mount in the engine's -v form (source:target[:ro]),
// which is also how users write sandbox-mount.
func (m Mount) String() string {
	s := m.Source + ":" + m.Target
	if m.Source == "" {
		s = m.Target
	}
	if m.ReadOnly {
		s += ":ro"
	}
	return s
}

// volumeName is what Docker accepts as a volume name.
var volumeName = lazyregexp.New(`^[A-Za-z0-9][A-Za-z0-9_.-]+$`)

const mountForm = "write source:target, source:target:ro, or a bare path to mount it at the same path"

// ParseMount reads one sandbox-mount entry, source:target[:ro|:rw], with
// each part trimmed of spaces:
//
//   - a source that is an absolute path is a bind mount of it; ~ and ~/x
//     are the same below home;
//   - any other source is a volume name (a letter or digit, then letters,
//     digits, '_', '.' or '-');
//   - a target of ~ or ~/x is below the sandbox's home, /sandbox/home, so
//     ~/.gitconfig:~/.gitconfig:ro puts the file where tools inside look;
//   - a bare path mounts at itself, with ~ meaning the home on each side:
//     /data mounts at /data and ~/.gitconfig at /sandbox/home/.gitconfig.
//
// ParseMount checks only the form; CheckMount decides whether the mount
// is allowed. Errors are ErrInvalid and quote the entry.
func ParseMount(raw, home string) (Mount, error) {
	entry := strings.TrimSpace(raw)
	bad := func(format string, a ...any) (Mount, error) {
		return Mount{}, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf(format, a...))
	}
	if entry == "" {
		return bad("A mount entry is empty; %s.", mountForm)
	}
	parts := strings.Split(entry, ":")
	if len(parts) > 3 {
		return bad("The mount %q has too many ':' parts; %s.", entry, mountForm)
	}
	for i := range parts {
		parts[i] = strings.TrimSpace(parts[i])
	}
	src, dst := parts[0], parts[0]
	if len(parts) > 1 {
		dst = parts[1]
	}
	var m Mount
	if len(parts) == 3 {
		switch strings.ToLower(parts[2]) {
		case "ro":
			m.ReadOnly = true
		case "rw":
		default:
			return bad("The mount %q has the unknown mode %q; use ro (read-only) or rw (read-write).", entry, parts[2])
		}
	}
	if src == "" {
		return bad("The mount %q has no source; %s.", entry, mountForm)
	}
	if dst == "" {
		return bad("The mount %q has no target; %s.", entry, mountForm)
	}
	switch {
	case isTilde(src):
		if cleanHome(home) == "" {
			return bad("The mount %q uses ~, but the home directory is not known; write the source as an absolute path.", entry)
		}
		m.Type, m.Source = MountBind, path.Join(cleanHome(home), src[1:])
	case path.IsAbs(src):
		m.Type, m.Source = MountBind, path.Clean(src)
	case len(parts) == 1:
		return bad("The mount %q has no target; a bare entry mounts a host path at the same path, so it must be an absolute path or start with ~/, and a volume needs a target (%s:/path).", entry, src)
	case volumeName.MatchString(src):
		m.Type, m.Source = MountVolume, src
	default:
		return bad("The mount %q has the source %q, which is neither an absolute path, ~ or ~/..., nor a volume name (a letter or digit, then letters, digits, '_', '.' or '-').", entry, src)
	}
	switch {
	case isTilde(dst):
		m.Target = path.Join(HomeTarget, dst[1:])
	case path.IsAbs(dst):
		m.Target = path.Clean(dst)
	default:
		return bad("The mount %q has the relative target %q; the target must be an absolute path inside the container.", entry, dst)
	}
	return m, nil
}

func isTilde(s string) bool { return s == "~" || strings.HasPrefix(s, "~/") }

// CheckMount refuses a mount that would undo the sandbox, wherever it
// comes from (settings or devcontainer.json): a bind of a container engine
// socket or a directory holding one, of /, of the home directory or an
// ancestor of it, of a top-level directory or of anything under /proc;
// and a target of /. home is the user's home directory ("" when unknown,
// which skips the home rules). The caller resolves symlinks in a bind
// source first: CheckMount judges the path it is given. Errors are
// ErrInvalid and say what was refused and why.
func CheckMount(m Mount, home string) error {
	return refuseMount(m, home, "Remove this mount.")
}

// refuseMount is CheckMount with the closing advice (what to do, naming
// where the mount came from) supplied by the caller.
func refuseMount(m Mount, home, advice string) error {
	reason := mountRefusal(m, cleanHome(home))
	if reason == "" {
		return nil
	}
	return errdefs.New(errdefs.ErrInvalid, describeMount(m)+": "+reason+" "+advice)
}

// describeMount opens a refusal: "Refusing to mount X at Y".
func describeMount(m Mount) string {
	target := m.Target
	if target == "" {
		target = "(no target)"
	}
	switch {
	case m.Type != MountBind && m.Type != MountVolume:
		return fmt.Sprintf("Refusing the %s mount at %s", cmpOr(m.Type, "untyped"), target)
	case m.Type == MountVolume && m.Source == "":
		return "Refusing to mount an anonymous volume at " + target
	case m.Type == MountVolume:
		return fmt.Sprintf("Refusing to mount the volume %s at %s", m.Source, target)
	default:
		return fmt.Sprintf("Refusing to mount %s at %s", m.Source, target)
	}
}

const (
	noPrompts   = "agents that run without permission prompts"
	escape      = "whoever can reach that socket can start a privileged container, which is root on the host in one command, for " + noPrompts + "."
	mountNeeded = "Mount only what the agents need, such as ~/.gitconfig."
)

// mountRefusal is why m is refused, or "" when it is allowed. home is
// clean or "".
func mountRefusal(m Mount, home string) string {
	if m.Type != MountBind && m.Type != MountVolume {
		return fmt.Sprintf("hutch makes only bind and volume mounts, not %q.", m.Type)
	}
	if !path.IsAbs(m.Target) {
		return "the target must be an absolute path inside the container."
	}
	if path.Clean(m.Target) == "/" {
		return "a mount at / would replace the container's whole file system."
	}
	if m.Type == MountVolume {
		return ""
	}
	if !path.IsAbs(m.Source) {
		return "the source of a bind mount must be an absolute path."
	}
	src := path.Clean(m.Source)
	switch {
	case src == "/":
		return "it is the root directory, and would hand " + noPrompts + " the whole machine."
	case isEngineSocket(src, home):
		return "it is a container engine socket, and " + escape
	case home != "" && src == home:
		return "it is your home directory, and would hand " + noPrompts + " every credential, key and project in it. " + mountNeeded
	case home != "" && isAncestor(src, home):
		return fmt.Sprintf("it contains your home directory (%s), and would hand %s every credential, key and project in it. %s", home, noPrompts, mountNeeded)
	case depth(src) == 1:
		return "a top-level directory is too broad to hand to " + noPrompts + ". " + mountNeeded
	case underProc(src):
		return "paths under /proc reach into host processes (/proc/1/root is the host's whole file system)."
	}
	if sock := heldSocket(src, home); sock != "" {
		return fmt.Sprintf("it contains the container engine socket %s, and %s", sock, escape)
	}
	return ""
}
