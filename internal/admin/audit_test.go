package admin

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/hutchsandbox/hutch/internal/events"
)

// The portal's former audit log is folded into the event log once.
func TestFoldAudit(t *testing.T) {
	state := t.TempDir()
	path := auditPath(state)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	old := `{"time":"2026-01-02T03:04:05Z","who":"ada","action":"signed in"}
{"time":"2026-01-02T03:04:06Z","who":"ada","action":"set the door policy","target":"web/x","detail":"full"}
{"time":"2026-01-02T03:04:07Z","who":"ada","action":"cleared a global runtime setting","target":"global","detail":"sandbox.pids"}
{"time":"2026-01-02T03:04:08Z","who":"ada","acti`
	if err := os.WriteFile(path, []byte(old), 0o600); err != nil {
		t.Fatal(err)
	}
	l := events.Open(state)
	if err := foldAudit(path, l); err != nil {
		t.Fatal(err)
	}
	if err := foldAudit(path, l); err != nil { // the second time: nothing
		t.Fatal(err)
	}
	got, err := l.Last(10)
	if err != nil {
		t.Fatal(err)
	}
	want := []events.Event{
		{Surface: "portal", Who: "ada", Action: events.PortalSignIn},
		{Surface: "portal", Who: "ada", Action: events.DoorSet, Target: "web/x", Detail: "full"},
		{Surface: "portal", Who: "ada", Action: events.SettingSet, Target: "global", Detail: "sandbox.pids cleared"},
	}
	if len(got) != len(want) {
		t.Fatalf("folded %d events, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		g := got[i]
		if g.Time.IsZero() || g.Surface != want[i].Surface || g.Who != want[i].Who || g.Action != want[i].Action || g.Target != want[i].Target || g.Detail != want[i].Detail {
			t.Errorf("event %d = %+v, want %+v", i, g, want[i])
		}
	}
	if _, err := os.Stat(path + ".folded"); err != nil {
		t.Errorf("the old log was not kept as .folded: %v", err)
	}
}
