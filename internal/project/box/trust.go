package box

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/hutchsandbox/hutch/internal/atomicfile"
)

// Trust records which devcontainer.json content the user approved, per
// project, and where its bind sources outside the project resolved then.
// Agents can edit the project, and a devcontainer.json decides mounts,
// environment and the user the container runs as, so a file whose
// content changed since the user last looked is not applied until they
// approve it again. The text alone is not what was approved: a source
// written as ~/data is a path the sandbox may reach (through another
// mount of its parent), and a link put there after approval would mount
// whatever it names. So a source that resolves elsewhere than it did at
// approval needs approval again too. (Sources inside the project are the
// sandbox's own to change; they are opened beneath the project without
// following links when the container starts, see mountpin.go.) The store
// lives in the user's config dir, never in the project.
type Trust struct{ path string }

// NewTrust returns the store at path.
func NewTrust(path string) *Trust { return &Trust{path: path} }

// Digest is the identity of one devcontainer.json's content.
func Digest(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// approval is one project's entry. A store written before sources were
// recorded holds the digest alone, as a string.
type approval struct {
	Digest string `json:"digest"`
	// Sources maps each bind source outside the project, as the file
	// names it after substitution, to what it resolved to.
	Sources map[string]string `json:"sources,omitempty"`
}

func (t *Trust) load() (map[string]approval, error) {
	data, err := os.ReadFile(t.path)
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]approval{}, nil
	}
	if err != nil {
		return nil, err
	}
	raw := map[string]json.RawMessage{}
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("malformed trust store %s: %w", t.path, err)
	}
	m := make(map[string]approval, len(raw))
	for project, v := range raw {
		var a approval
		var digest string
		if err := json.Unmarshal(v, &digest); err == nil {
			a.Digest = digest
		} else if err := json.Unmarshal(v, &a); err != nil {
			return nil, fmt.Errorf("malformed trust store %s: entry %s: %w", t.path, project, err)
		}
		m[project] = a
	}
	return m, nil
}

// Trusted reports whether the user approved exactly this content of
// project's devcontainer.json.
func (t *Trust) Trusted(project string, data []byte) (bool, error) {
	m, err := t.load()
	if err != nil {
		return false, err
	}
	return m[project].Digest == Digest(data), nil
}

// Moved compares the bind sources outside project (ResolveSources) with
// what they resolved to when the user approved the file, and describes
// the first that differs; "" when none does.
func (t *Trust) Moved(project string, sources map[string]string) (string, error) {
	m, err := t.load()
	if err != nil {
		return "", err
	}
	approved := m[project].Sources
	names := make([]string, 0, len(sources))
	for s := range sources {
		names = append(names, s)
	}
	sort.Strings(names)
	for _, s := range names {
		was, ok := approved[s]
		switch {
		case !ok:
			return fmt.Sprintf("mount source %s (now %s) was not recorded when it was approved", s, sources[s]), nil
		case was != sources[s]:
			return fmt.Sprintf("mount source %s now resolves to %s, not to %s as when it was approved", s, sources[s], was), nil
		}
	}
	return "", nil
}

// Approve records data as the approved devcontainer.json of project,
// with where its bind sources outside the project resolve now.
func (t *Trust) Approve(project string, data []byte, sources map[string]string) error {
	m, err := t.load()
	if err != nil {
		return err
	}
	m[project] = approval{Digest: Digest(data), Sources: sources}
	out, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(t.path), 0o700); err != nil {
		return err
	}
	return atomicfile.WriteFile(t.path, append(out, '\n'), 0o600)
}

// ResolveSources maps each bind source outside project to the path it
// resolves to now, links followed ("missing: " and the path when it
// does not resolve). Relative sources are taken from project, as the
// spec takes them.
func ResolveSources(project string, sources []string) map[string]string {
	out := map[string]string{}
	for _, s := range sources {
		p := s
		if !filepath.IsAbs(p) {
			p = filepath.Join(project, p)
		}
		p = filepath.Clean(p)
		if p == project || strings.HasPrefix(p, project+string(filepath.Separator)) {
			continue
		}
		real, err := filepath.EvalSymlinks(p)
		if err != nil {
			real = "missing: " + p
		}
		out[s] = real
	}
	return out
}
