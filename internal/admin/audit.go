package admin

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// Entry is one line of the audit log: who did what to what, when.
type Entry struct {
	Time   time.Time `json:"time"`
	Who    string    `json:"who"`
	Action string    `json:"action"`
	// Target is what the action was on ("" for the portal itself): a
	// conversation, "global", an office key.
	Target string `json:"target,omitempty"`
	// Detail is the new value or the reason, never a secret.
	Detail string `json:"detail,omitempty"`
}

// Audit is an append-only JSON-lines file; each entry is written and
// synced before the action's answer goes out.
type Audit struct {
	path string
	mu   sync.Mutex
}

func auditPath(stateDir string) string { return filepath.Join(stateDir, "admin", "audit.jsonl") }

// OpenAudit returns the audit log at path, creating its directory.
func OpenAudit(path string) (*Audit, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("admin audit log: %w", err)
	}
	return &Audit{path: path}, nil
}

// Append writes e and syncs it.
func (a *Audit) Append(e Entry) error {
	data, err := json.Marshal(e)
	if err != nil {
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	f, err := os.OpenFile(a.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(append(data, '\n')); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// Last returns up to n of the latest entries, newest first. A torn last
// line (a crash mid-write) is skipped.
func (a *Audit) Last(n int) ([]Entry, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	f, err := os.Open(a.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	var all []Entry
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var e Entry
		if json.Unmarshal(sc.Bytes(), &e) == nil {
			all = append(all, e)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	out := make([]Entry, 0, min(n, len(all)))
	for i := len(all) - 1; i >= 0 && len(out) < n; i-- {
		out = append(out, all[i])
	}
	return out, nil
}
