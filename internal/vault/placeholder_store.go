package vault

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hutchsandbox/hutch/internal/atomicfile"
	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/netpolicy"
)

// placeholderRecord is one mark as stored in placeholdersFile, a JSON
// object keyed by variable name.
type placeholderRecord struct {
	Token   string   `json:"token"`
	Hosts   []string `json:"hosts"`
	Expires string   `json:"expires,omitempty"`
	Created string   `json:"created"`
	Body    bool     `json:"body,omitempty"`
}

// SetPlaceholder marks the env variable name of the vault as a
// placeholder for hosts (see ParsePlaceholderHosts), until expires (zero:
// no expiry), substituting in request bodies too when body is set, and
// returns the mark. The first mark draws a fresh token
// from crypto/rand; marking an already marked variable again replaces its
// hosts and expiry and keeps its token and creation time, as setting the
// variable's value again does.
//
// name must be an env variable of the vault: a missing one is
// ErrNotFound, a file entry of that name ErrInvalid. Invalid hosts are
// ErrInvalid; a malformed marks file is ErrFailedPrecondition.
func (s *Store) SetPlaceholder(key, name string, hosts []string, expires time.Time, body bool) (Placeholder, error) {
	if err := ValidateKey(key); err != nil {
		return Placeholder{}, err
	}
	if len(hosts) == 0 {
		return Placeholder{}, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("Placeholder %s needs at least one host", name))
	}
	hosts, err := ParsePlaceholderHosts(strings.Join(hosts, ","))
	if err != nil {
		return Placeholder{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	dir, ok, err := s.existingDir(key)
	if err != nil {
		return Placeholder{}, err
	}
	env := map[string]string{}
	if ok {
		if env, err = readEnv(dir); err != nil {
			return Placeholder{}, err
		}
	}
	if _, ok := env[name]; !ok {
		if validateEntryName(name) == nil {
			if _, err := os.Lstat(filepath.Join(dir, name)); err == nil {
				return Placeholder{}, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf(
					"Vault entry %q is a file; only env variables can be placeholders (a file that contains a placeholder's value is projected as a copy holding the placeholder)", name))
			}
		}
		if err := ValidateEnvName(name); err != nil {
			return Placeholder{}, err
		}
		return Placeholder{}, errdefs.New(errdefs.ErrNotFound, fmt.Sprintf(
			"Vault %s has no env variable %s; set it first: hutch vault set <vault> %s", key, name, name))
	}
	marks, err := readPlaceholders(dir)
	if err != nil {
		return Placeholder{}, err
	}
	m, ok := marks[name]
	if !ok {
		m = Placeholder{Name: name, Token: newToken(), Created: time.Now().UTC().Truncate(time.Second)}
	}
	m.Hosts = hosts
	m.Body = body
	m.Expires = expires.UTC().Truncate(time.Second) // the file keeps whole seconds
	marks[name] = m
	if err := writePlaceholders(dir, marks); err != nil {
		return Placeholder{}, err
	}
	return m, nil
}

// ClearPlaceholder turns the mark on name off: commands see the real
// value again. A variable that is not marked is ErrNotFound.
func (s *Store) ClearPlaceholder(key, name string) error {
	if err := ValidateKey(key); err != nil {
		return err
	}
	notMarked := errdefs.New(errdefs.ErrNotFound, fmt.Sprintf("%s is not a placeholder in vault %s", name, key))
	s.mu.Lock()
	defer s.mu.Unlock()
	dir, ok, err := s.existingDir(key)
	if err != nil {
		return err
	}
	if !ok {
		return notMarked
	}
	marks, err := readPlaceholders(dir)
	if err != nil {
		return err
	}
	if _, ok := marks[name]; !ok {
		return notMarked
	}
	delete(marks, name)
	return writePlaceholders(dir, marks)
}

// Placeholders returns the vault's marks by variable name: an empty map
// when there are none or the vault does not exist. A mark may outlive its
// variable only if the env file was edited by hand; ApplyPlaceholders
// ignores such a mark. A malformed marks file is ErrFailedPrecondition:
// delivering the real values instead would be the one wrong answer.
func (s *Store) Placeholders(key string) (map[string]Placeholder, error) {
	if err := ValidateKey(key); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	dir, ok, err := s.existingDir(key)
	if err != nil {
		return nil, err
	}
	if !ok {
		return map[string]Placeholder{}, nil
	}
	return readPlaceholders(dir)
}

// dropPlaceholder removes the mark on name, if any; Remove calls it when
// the variable goes, so that setting it again starts unmarked.
func dropPlaceholder(dir, name string) error {
	marks, err := readPlaceholders(dir)
	if err != nil {
		return err
	}
	if _, ok := marks[name]; !ok {
		return nil
	}
	delete(marks, name)
	return writePlaceholders(dir, marks)
}

// readPlaceholders parses the marks file of dir; a missing file is an
// empty map. Every field is checked: a mark hutch cannot read is refused
// rather than skipped.
func readPlaceholders(dir string) (map[string]Placeholder, error) {
	path := filepath.Join(dir, placeholdersFile)
	malformed := func(reason string) error {
		return errdefs.New(errdefs.ErrFailedPrecondition, fmt.Sprintf("Malformed vault placeholders file %q: %s", path, reason))
	}
	info, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]Placeholder{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read vault placeholders: %w", err)
	}
	if !info.Mode().IsRegular() {
		return nil, malformed("not a regular file")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read vault placeholders: %w", err)
	}
	var recs map[string]placeholderRecord
	if err := json.Unmarshal(data, &recs); err != nil {
		// The file holds tokens and hosts, never values, but the JSON
		// error is still kept out: it says nothing a user can act on.
		return nil, malformed("not a JSON object of marks")
	}
	marks := make(map[string]Placeholder, len(recs))
	for name, r := range recs {
		if ValidateEnvName(name) != nil {
			return nil, malformed(fmt.Sprintf("invalid variable name %q", name))
		}
		if !IsPlaceholderToken(r.Token) {
			return nil, malformed(fmt.Sprintf("%s has an invalid token", name))
		}
		if _, err := netpolicy.ParseAllowlist(r.Hosts); err != nil || len(r.Hosts) == 0 {
			return nil, malformed(fmt.Sprintf("%s has invalid hosts", name))
		}
		m := Placeholder{Name: name, Token: r.Token, Hosts: r.Hosts, Body: r.Body}
		if r.Expires != "" {
			if m.Expires, err = time.Parse(time.RFC3339, r.Expires); err != nil {
				return nil, malformed(fmt.Sprintf("%s has an invalid expiry", name))
			}
		}
		if m.Created, err = time.Parse(time.RFC3339, r.Created); err != nil {
			return nil, malformed(fmt.Sprintf("%s has an invalid creation time", name))
		}
		marks[name] = m
	}
	return marks, nil
}

// writePlaceholders replaces the marks file of dir atomically (0600), or
// removes it when marks is empty.
func writePlaceholders(dir string, marks map[string]Placeholder) error {
	path := filepath.Join(dir, placeholdersFile)
	if len(marks) == 0 {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove vault placeholders: %w", err)
		}
		return atomicfile.SyncDir(dir)
	}
	recs := make(map[string]placeholderRecord, len(marks))
	for name, m := range marks {
		r := placeholderRecord{Token: m.Token, Hosts: m.Hosts, Created: m.Created.UTC().Format(time.RFC3339), Body: m.Body}
		if !m.Expires.IsZero() {
			r.Expires = m.Expires.UTC().Format(time.RFC3339)
		}
		recs[name] = r
	}
	data, err := json.MarshalIndent(recs, "", "  ")
	if err != nil {
		return fmt.Errorf("write vault placeholders: %w", err)
	}
	return atomicfile.WriteFile(path, append(data, '\n'), filePerm)
}

// newToken draws a placeholder token from crypto/rand.
func newToken() string {
	var b [tokenHexLen / 2]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return TokenPrefix + hex.EncodeToString(b[:])
}
