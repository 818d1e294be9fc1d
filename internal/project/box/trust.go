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
	"github.com/hutchsandbox/hutch/internal/beneath"
	"github.com/hutchsandbox/hutch/internal/devcontainer"
	"github.com/hutchsandbox/hutch/internal/devcontainer/features"
	"github.com/hutchsandbox/hutch/internal/engine"
	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/project"
)

// Trust records which devcontainer.json content the user approved, per
// project, with what it builds from the project, and where its bind
// sources outside the project resolved then. Agents can edit the
// project, and a devcontainer.json decides mounts, environment and the
// user the container runs as, so a file whose content changed since the
// user last looked is not applied until they approve it again. So does
// one whose Dockerfile or local features changed (Approval): they run
// when the image is built, as root and with a network. The text alone is not what was approved: a source
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

// Approval is what approving a project's devcontainer.json covers: the
// file, and the files of the project its images are built from
// (BuildInputs).
type Approval struct {
	// Config is the devcontainer.json's content.
	Config []byte
	// Inputs maps each other file by a description ("the Dockerfile
	// <path>", "the local feature <id>") to the digest of its content,
	// or to what stands in its place ("missing", "unreadable: <why>").
	Inputs map[string]string
}

// Digest identifies the approval. Without inputs it is Digest(Config),
// which is what the store held before inputs were approved, so an entry
// written then still matches a file that builds nothing from the
// project, and no longer matches one that does.
func (a Approval) Digest() string {
	if len(a.Inputs) == 0 {
		return Digest(a.Config)
	}
	h := sha256.New()
	// Fields end in NUL, which no description or digest holds.
	for _, f := range []string{"hutch approval 2", "devcontainer.json", Digest(a.Config)} {
		_, _ = h.Write(append([]byte(f), 0))
	}
	names := make([]string, 0, len(a.Inputs))
	for n := range a.Inputs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		_, _ = h.Write(append([]byte(n), 0))
		_, _ = h.Write(append([]byte(a.Inputs[n]), 0))
	}
	return hex.EncodeToString(h.Sum(nil))
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

// Trusted reports whether the user approved exactly a of project.
func (t *Trust) Trusted(project string, a Approval) (bool, error) {
	m, err := t.load()
	if err != nil {
		return false, err
	}
	return m[project].Digest == a.Digest(), nil
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

// Approve records a as approved for project, with where its
// devcontainer.json's bind sources outside the project resolve now.
func (t *Trust) Approve(project string, a Approval, sources map[string]string) error {
	m, err := t.load()
	if err != nil {
		return err
	}
	m[project] = approval{Digest: a.Digest(), Sources: sources}
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

// maxLocalInputs bounds the local features one approval reads: dependsOn
// is the project's to write.
const maxLocalInputs = 100

// BuildInputs returns what dc (the devcontainer.json dcFile) builds the
// sandbox's images from that the project holds, as Approval.Inputs: the
// Dockerfile its build names, read as the build reads it (beneath the
// project, no link followed), and each local feature folder it installs,
// with those the local features' dependsOn add, read as the build copies
// them. Paths outside the project are left out: Resolve refuses them, so
// nothing is built from them. A file that is missing or unreadable is
// recorded as such, so that it appearing, or becoming readable, needs
// approval again; the build then says what is wrong with it.
func BuildInputs(projectDir string, dc *devcontainer.Config, dcFile string) map[string]string {
	if dc == nil {
		return nil
	}
	out := map[string]string{}
	unreadable := func(err error) string {
		if errdefs.IsNotFound(err) {
			return "missing"
		}
		return "unreadable: " + err.Error()
	}
	if dc.Build != nil {
		if path, _, err := project.BuildPaths(projectDir, dc, dcFile); err == nil {
			data, err := engine.ReadBuildFile(projectDir, path)
			digest := Digest(data)
			if err != nil {
				digest = unreadable(err)
			}
			out["the Dockerfile "+path] = digest
		}
	}
	dir := dc.Dir
	if dir == "" && dc.Path != "" {
		dir = filepath.Dir(dc.Path)
	}
	fetcher := &features.Fetcher{Dir: dir, ProjectRoot: projectDir}
	var queue []features.Ref
	add := func(id string) {
		if ref, err := features.ParseRef(id); err == nil && ref.Kind == features.Local {
			queue = append(queue, ref)
		}
	}
	for _, f := range dc.Features {
		add(f.ID)
	}
	seen := map[string]bool{}
	for len(queue) > 0 && len(seen) < maxLocalInputs {
		ref := queue[0]
		queue = queue[1:]
		if seen[ref.Path] {
			continue
		}
		seen[ref.Path] = true
		digest, err := fetcher.LocalDigest(ref)
		if err != nil {
			digest = unreadable(err)
		}
		out["the local feature ./"+ref.Path] = digest
		if err != nil {
			continue
		}
		// Its dependsOn may name other local features, which the build
		// copies from the project too.
		data, err := beneath.ReadFile(projectDir, filepath.Join(dir, filepath.FromSlash(ref.Path), features.MetadataFile))
		if err != nil {
			continue
		}
		if md, err := features.ParseMetadata(ref.ID, data); err == nil {
			for _, dep := range md.DependsOn {
				add(dep.ID)
			}
		}
	}
	return out
}
