package vault

import (
	"fmt"
	"log/slog"
	"path"
	"slices"
	"strings"

	"github.com/hutchsandbox/hutch/internal/errdefs"
)

// This file is the pure half of injection: it decides where file
// credentials land and whether those places are safe, without touching
// the disk.

// specialTargets are entry names whose tools look somewhere other than
// /root/<name>. The names match the reference system so vaults carry over.
var specialTargets = map[string]string{
	"gws.json":        "/root/.config/gws/credentials.json",
	"gcloud-adc.json": "/root/.config/gcloud/application_default_credentials.json",
}

// FileTarget is the path inside a runtime where the top-level vault entry
// name is projected: /root/<name>, so that .ssh, .kube, .config and the
// like land where tools look, except for the special names gws.json and
// gcloud-adc.json. The target is derived from the name every time and
// never stored, so a rule change applies to existing vaults.
func FileTarget(name string) string {
	if t, ok := specialTargets[name]; ok {
		return t
	}
	return "/root/" + name
}

// FileMount is one file credential to project into a runtime. It is always
// mounted read-only: a runtime never writes back into a vault, so there is
// no field to ask otherwise.
type FileMount struct {
	// Name is the vault entry name.
	Name string
	// HostPath is the entry's absolute path on the host.
	HostPath string
	// RuntimePath is where the entry appears inside the runtime.
	RuntimePath string
}

// CheckTargets refuses vault mounts that would shadow or be shadowed by a
// protected workspace target, or by each other: a target may not equal,
// contain or lie under another. Paths are compared posix-normalized with
// any trailing "/" ignored, so /a does not overlap /ab. Files are checked
// in order; the error names the first offending target. Errors are of
// class ErrInvalid.
func CheckTargets(files []FileMount, workspaceTargets []string) error {
	protected := make([]string, 0, len(workspaceTargets))
	for _, w := range workspaceTargets {
		if w != "" { // an empty target protects nothing
			protected = append(protected, normalizeTarget(w))
		}
	}
	seen := make([]string, 0, len(files))
	for _, f := range files {
		t := normalizeTarget(f.RuntimePath)
		if !path.IsAbs(t) {
			return errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("Vault mount target %q is not an absolute path", f.RuntimePath))
		}
		for _, w := range protected {
			if overlaps(t, w) {
				return errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("Vault mount target %q overlaps protected workspace target %q", t, w))
			}
		}
		for _, o := range seen {
			if overlaps(t, o) {
				return errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("Vault mount target %q overlaps vault target %q", t, o))
			}
		}
		seen = append(seen, t)
	}
	return nil
}

func normalizeTarget(p string) string {
	if p == "" {
		return p
	}
	return path.Clean(p)
}

// overlaps reports whether a and b are equal or one lies under the other.
func overlaps(a, b string) bool { return under(a, b) || under(b, a) }

// under reports whether p equals dir or lies below it.
func under(p, dir string) bool {
	if dir == "/" {
		return strings.HasPrefix(p, "/")
	}
	return p == dir || strings.HasPrefix(p, dir+"/")
}

// Plan is what a runtime needs to inject one vault: env variables for each
// command and file credentials to mount read-only. Its String, GoString
// and LogValue name variables and files only, so a Plan can be logged or
// printed with any verb without leaking a value.
type Plan struct {
	// Env holds the variables to inject into each command.
	Env map[string]string
	// Files holds the top-level file entries, sorted by name.
	Files []FileMount
}

// EnvNames returns the variable names, sorted.
func (p Plan) EnvNames() []string {
	names := make([]string, 0, len(p.Env))
	for name := range p.Env {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// String lists names and mount targets, e.g.
// "env [A B], files [.ssh -> /root/.ssh (ro)]".
func (p Plan) String() string {
	files := make([]string, len(p.Files))
	for i, f := range p.Files {
		files[i] = f.Name + " -> " + f.RuntimePath + " (ro)"
	}
	return "env [" + strings.Join(p.EnvNames(), " ") + "], files [" + strings.Join(files, ", ") + "]"
}

// GoString keeps %#v from printing the values of Env.
func (p Plan) GoString() string { return "vault.Plan{" + p.String() + "}" }

// LogValue keeps slog handlers (the JSON one marshals structs field by
// field) from printing the values of Env.
func (p Plan) LogValue() slog.Value {
	files := make([]string, len(p.Files))
	for i, f := range p.Files {
		files[i] = f.Name
	}
	return slog.GroupValue(
		slog.Any("env", p.EnvNames()),
		slog.Any("files", files),
	)
}
