// Package legacytest builds workspaces of the raw-id layout and hashes
// trees, for the migration's tests and benchmark.
package legacytest

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/hutchsandbox/hutch/internal/vault"
)

// Conversation is one raw-id conversation to write.
type Conversation struct {
	RawID string
	// Vault and State also write a legacy vault and host state directory.
	Vault, State bool
	// SanitizedVault writes a vault under the name the oldest releases
	// gave it: the sanitized raw id, with no hash (see SanitizedName).
	SanitizedVault bool
}

// SanitizedName is the vault (and container) name the oldest releases of
// the raw-id layout derived from a raw id: lower-cased, every run of
// characters outside [a-z0-9] turned into one "-", "-" trimmed from both
// ends, "unknown" when nothing is left, never cut and never hashed. It is
// written out here from that description, apart from the migration's own
// code, so that a fixture built with it checks the migration rather than
// repeating it.
func SanitizedName(rawID string) string {
	s := nonAlnum.ReplaceAllString(strings.ToLower(rawID), "-")
	s = strings.Trim(s, "-")
	if s == "" {
		return "unknown"
	}
	return s
}

var nonAlnum = regexp.MustCompile(`[^a-z0-9]+`)

// Populate writes convs in the raw-id layout: <ws>/<rawId> with a
// log.jsonl, a sessions/ directory and nested files of a few sizes;
// optionally <state>/vaults/<legacy key>/env,
// <state>/vaults/<sanitized raw id>/env and
// <state>/conversations/<rawId>/settings.json.
func Populate(ws, state string, convs []Conversation) error {
	for i, c := range convs {
		dir := filepath.Join(ws, c.RawID)
		files := map[string]string{
			"log.jsonl":                   fmt.Sprintf("{\"n\":%d,\"id\":%q}\n", i, c.RawID),
			"sessions/s1.jsonl":           fmt.Sprintf("{\"session\":%d}\n", i),
			"attachments/a/b/report.txt":  fmt.Sprintf("report %d\n%s", i, make([]byte, i%97)),
			"MEMORY.md":                   "# memory of " + c.RawID + "\n",
			".hutch/bash-output/last.log": "ok\n",
		}
		for name, content := range files {
			if err := write(filepath.Join(dir, name), content, 0o600); err != nil {
				return err
			}
		}
		if c.Vault {
			if err := write(filepath.Join(state, "vaults", vault.ConversationKey(c.RawID), "env"), "TOKEN=secret-"+c.RawID+"\n", 0o600); err != nil {
				return err
			}
		}
		if c.SanitizedVault {
			if err := write(filepath.Join(state, "vaults", SanitizedName(c.RawID), "env"), "TOKEN=old-"+c.RawID+"\n", 0o600); err != nil {
				return err
			}
		}
		if c.State {
			if err := write(filepath.Join(state, "conversations", c.RawID, "settings.json"), "{}\n", 0o600); err != nil {
				return err
			}
		}
	}
	return nil
}

func write(path, content string, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(content), mode)
}

// HashTree hashes a directory tree: every relative path, its type and
// permission bits, and every file's content. Two trees hash alike when
// they hold the same files byte for byte, wherever they sit.
func HashTree(root string) (string, error) {
	type item struct{ rel, line string }
	var items []item
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		info, err := d.Info()
		if err != nil {
			return err
		}
		line := fmt.Sprintf("%s %v", rel, info.Mode())
		if d.Type().IsRegular() {
			f, err := os.Open(path) //nolint:gosec // G122: a test's own temp tree
			if err != nil {
				return err
			}
			h := sha256.New()
			_, err = io.Copy(h, f)
			_ = f.Close()
			if err != nil {
				return err
			}
			line += " " + hex.EncodeToString(h.Sum(nil))
		}
		items = append(items, item{rel, line})
		return nil
	})
	if err != nil {
		return "", err
	}
	sort.Slice(items, func(i, j int) bool { return items[i].rel < items[j].rel })
	h := sha256.New()
	for _, it := range items {
		fmt.Fprintln(h, it.line)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
