package project

import (
	"fmt"
	"path"
	"strings"

	"github.com/hutchsandbox/hutch/internal/errdefs"
)

// CheckProject refuses a project too broad to mount. project must already
// be absolute, cleaned and symlink-resolved (the caller does that I/O);
// home is the user's home directory, resolved the same way ("" when
// unknown, which skips the home rules).
//
// The sandbox mounts the project read-write at its own path for agents
// that run without permission prompts, so /, a top-level directory, the
// home directory or any ancestor of it, a directory that holds a container
// engine's socket, and anything under /proc are refused: each would hand
// those agents far more than a project. Errors are ErrInvalid, with a text
// that says why and what to do.
func CheckProject(project, home string) error {
	if project == "" {
		return errdefs.New(errdefs.ErrInvalid, "No project directory was given. Run hutch from inside a repository or project directory.")
	}
	if !path.IsAbs(project) {
		return errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("The project directory %q is not an absolute path.", project))
	}
	p := path.Clean(project)
	h := cleanHome(home)
	const why = "the sandbox mounts the project read-write at its own path for agents that run without permission prompts"
	const fix = "Run hutch from inside a repository or project directory."
	var msg string
	switch {
	case p == "/":
		msg = fmt.Sprintf("Refusing to use / as a project: %s, and mounting / would hand them the whole machine. %s", why, fix)
	case h != "" && p == h:
		msg = fmt.Sprintf("Refusing to use your home directory (%s) as a project: %s, and mounting your home would hand them every credential, key and project in it. %s If your home directory is itself a git repository (dotfiles), every directory below it resolves to it: give the project its own repository.", p, why, fix)
	case h != "" && isAncestor(p, h):
		msg = fmt.Sprintf("Refusing to use %s as a project: it contains your home directory (%s), and %s, so mounting it would hand them every credential, key and project in your home. %s", p, h, why, fix)
	case depth(p) == 1:
		msg = fmt.Sprintf("Refusing to use %s as a project: a top-level directory is too broad to mount, since %s. %s", p, why, fix)
	case underProc(p):
		msg = fmt.Sprintf("Refusing to use %s as a project: paths under /proc reach into host processes (/proc/1/root is the host's whole file system). %s", p, fix)
	default:
		if sock := heldSocket(p, h); sock != "" {
			msg = fmt.Sprintf("Refusing to use %s as a project: it contains the container engine socket %s, and whoever can reach that socket can start a privileged container, which is root on the host. %s", p, sock, fix)
		}
	}
	if msg != "" {
		return errdefs.New(errdefs.ErrInvalid, msg)
	}
	return nil
}

// cleanHome is home cleaned, or "" when it is unknown or not absolute (a
// relative home cannot be compared with absolute paths).
func cleanHome(home string) string {
	if !path.IsAbs(home) {
		return ""
	}
	return path.Clean(home)
}

// depth is the number of components of the clean absolute path p.
func depth(p string) int {
	if p == "/" {
		return 0
	}
	return strings.Count(p, "/")
}

// isAncestor reports whether the clean absolute path a is a strict
// ancestor of b.
func isAncestor(a, b string) bool {
	if a == "/" {
		return b != "/"
	}
	return strings.HasPrefix(b, a+"/")
}

// within reports whether p is a or below it.
func within(p, a string) bool { return p == a || isAncestor(a, p) }

func underProc(p string) bool { return within(p, "/proc") }

// engineSockets are where Docker, Podman and containerd put the socket
// that controls them. Whoever can reach one can start a privileged
// container with / mounted: root on the host.
var engineSockets = []string{
	"/var/run/docker.sock",
	"/run/docker.sock",
	"/run/podman/podman.sock",
	"/var/run/podman/podman.sock",
	"/run/containerd/containerd.sock",
	"/var/run/containerd/containerd.sock",
}

// homeSockets are engine sockets below the home directory (Docker Desktop,
// Docker Desktop for Linux).
var homeSockets = []string{
	".docker/run/docker.sock",
	".docker/desktop/docker.sock",
}

// isEngineSocket reports whether the clean absolute path p is (or, by its
// name, looks like) a container engine's socket: one of the well-known
// paths, anything under a rootless Podman's /run/user/<uid>/podman/, or
// any *.sock whose name mentions docker, podman or containerd (Colima,
// Podman machine, Docker Desktop's raw socket, ...).
func isEngineSocket(p, home string) bool {
	for _, s := range engineSockets {
		if p == s {
			return true
		}
	}
	if home != "" {
		for _, s := range homeSockets {
			if p == path.Join(home, s) {
				return true
			}
		}
	}
	if uid, rest, ok := runUser(p); ok && uid != "" && strings.HasPrefix(rest, "podman/") {
		return true
	}
	base := strings.ToLower(path.Base(p))
	if strings.HasSuffix(base, ".sock") {
		for _, engine := range []string{"docker", "podman", "containerd"} {
			if strings.Contains(base, engine) {
				return true
			}
		}
	}
	return false
}

// runUser splits p under /run/user/<uid> (or /var/run/user/<uid>), the
// per-user runtime dir where rootless engines keep their sockets, into
// the uid and the rest. ok is false when p is not below /run/user.
func runUser(p string) (uid, rest string, ok bool) {
	for _, prefix := range []string{"/run/user", "/var/run/user"} {
		if p == prefix {
			return "", "", true
		}
		if r, found := strings.CutPrefix(p, prefix+"/"); found {
			uid, rest, _ = strings.Cut(r, "/")
			return uid, rest, true
		}
	}
	return "", "", false
}

// heldSocket is the engine socket the directory p holds, or "" when p
// is not an ancestor of one hutch knows about. A mount of a directory
// holding the socket hands out the socket as surely as a mount of the
// socket.
func heldSocket(p, home string) string {
	known := append([]string(nil), engineSockets...)
	if home != "" {
		for _, s := range homeSockets {
			known = append(known, path.Join(home, s))
		}
	}
	for _, s := range known {
		if isAncestor(p, s) {
			return s
		}
	}
	if uid, rest, ok := runUser(p); ok {
		switch {
		case uid == "":
			return p + "/<uid>/docker.sock"
		case rest == "":
			return p + "/docker.sock"
		case rest == "podman":
			return p + "/podman.sock"
		}
	}
	return ""
}
