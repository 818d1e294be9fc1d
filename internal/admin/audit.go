package admin

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/hutchsandbox/hutch/internal/events"
)

// The portal's audit page shows the event log (package events), which
// every surface writes. Before it, the portal kept a log of its own,
// <state>/admin/audit.jsonl; foldAudit moves its entries into the event
// log once, then renames it audit.jsonl.folded.

// oldEntry is one line of the portal's former audit log.
type oldEntry struct {
	Time   time.Time `json:"time"`
	Who    string    `json:"who"`
	Action string    `json:"action"`
	Target string    `json:"target,omitempty"`
	Detail string    `json:"detail,omitempty"`
}

func auditPath(stateDir string) string { return filepath.Join(stateDir, "admin", "audit.jsonl") }

// oldActions maps the former log's action texts to the event log's.
var oldActions = map[string]string{
	"signed in":                        events.PortalSignIn,
	"signed out":                       events.PortalSignOut,
	"set the global door policy":       events.DoorSet,
	"set the door policy":              events.DoorSet,
	"boosted the runtime":              events.LimitsBoost,
	"stopped the runtime":              events.RuntimeStopped,
	"removed the runtime":              events.RuntimeRemoved,
	"set a global runtime setting":     events.SettingSet,
	"cleared a global runtime setting": events.SettingSet,
}

// foldAudit appends the entries of the former audit log at path to l, as
// events of the portal, and renames the file so that they are folded
// once. No file: nothing to do. A line that does not parse is skipped.
func foldAudit(path string, l *events.Log) error {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("admin audit log: %w", err)
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var e oldEntry
		if json.Unmarshal(sc.Bytes(), &e) != nil || e.Action == "" {
			continue
		}
		action, ok := oldActions[e.Action]
		if !ok {
			continue
		}
		detail := e.Detail
		if e.Action == "cleared a global runtime setting" {
			detail += " cleared"
		}
		if err := l.Append(events.Event{Time: e.Time, Surface: events.SurfacePortal, Who: e.Who, Action: action, Target: e.Target, Detail: detail}); err != nil {
			_ = f.Close()
			return err
		}
	}
	_ = f.Close()
	if err := sc.Err(); err != nil {
		return fmt.Errorf("admin audit log: %w", err)
	}
	return os.Rename(path, path+".folded")
}
