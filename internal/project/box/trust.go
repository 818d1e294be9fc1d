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

	"github.com/hutchsandbox/hutch/internal/atomicfile"
)

// Trust records which devcontainer.json content the user approved, per
// project. Agents can edit the project, and a devcontainer.json decides
// mounts, environment and the user the container runs as, so a file whose
// content changed since the user last looked is not applied until they
// approve it again. The store lives in the user's config dir, never in
// the project.
type Trust struct{ path string }

// NewTrust returns the store at path.
func NewTrust(path string) *Trust { return &Trust{path: path} }

// Digest is the identity of one devcontainer.json's content.
func Digest(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

func (t *Trust) load() (map[string]string, error) {
	data, err := os.ReadFile(t.path)
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]string{}, nil
	}
	if err != nil {
		return nil, err
	}
	m := map[string]string{}
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("malformed trust store %s: %w", t.path, err)
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
	return m[project] == Digest(data), nil
}

// Approve records data as the approved devcontainer.json of project.
func (t *Trust) Approve(project string, data []byte) error {
	m, err := t.load()
	if err != nil {
		return err
	}
	m[project] = Digest(data)
	out, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(t.path), 0o700); err != nil {
		return err
	}
	return atomicfile.WriteFile(t.path, append(out, '\n'), 0o600)
}
