package cli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os/user"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/internal/events"
)

func TestEvents_Help(t *testing.T) {
	e := newEnv(t)
	golden(t, filepath.Join("testdata", "help", "hutch_events.golden"), e.ok("events", "--help"))
}

// TestEvents_CLI: what CLI commands change is in hutch events, as text
// (time first) and as JSON lines, with the user who ran them; a vault's
// values never are.
func TestEvents_CLI(t *testing.T) {
	const secret = "ghp_s3cr3t-value-DO-NOT-LOG"
	e := newEnv(t)
	if out := e.ok("events"); out != "" {
		t.Errorf("events with no log: %q", out)
	}
	k := key(t, "slack", "C1")
	e.ok("vault", "set", "slack/C1", "GH_TOKEN="+secret)
	e.ok("door", "set", "slack/C1", "shared")
	e.ok("vault", "rm", "slack/C1", "GH_TOKEN")

	out := e.ok("events", "--json")
	var got []events.Event
	for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		var ev events.Event
		if err := json.NewDecoder(bytes.NewReader([]byte(line))).Decode(&ev); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		got = append(got, ev)
	}
	me, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	want := []events.Event{
		{Surface: "cli", Who: me.Username, Action: events.VaultSet, Target: k, Detail: "GH_TOKEN"},
		{Surface: "cli", Who: me.Username, Action: events.DoorSet, Target: "slack/C1", Detail: "trusted/shared-support/public"},
		{Surface: "cli", Who: me.Username, Action: events.VaultRemove, Target: k, Detail: "GH_TOKEN"},
	}
	if len(got) != len(want) {
		t.Fatalf("events --json:\n%s", out)
	}
	for i := range want {
		g := got[i]
		g.Time = want[i].Time
		if g != want[i] || got[i].Time.IsZero() {
			t.Errorf("event %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	if strings.Contains(out, secret) {
		t.Errorf("events hold a vault value:\n%s", out)
	}
	text := e.ok("events", "-n", "1")
	if lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n"); len(lines) != 1 ||
		!strings.HasPrefix(lines[0], got[2].Time.UTC().Format("2006-01-02T15:04:05Z")+" cli "+me.Username+" vault.remove "+k+": GH_TOKEN") {
		t.Errorf("events -n 1: %q", text)
	}
	if _, stderr, code := e.run("", "events", "-n", "5000"); code == 0 || !strings.Contains(stderr, "-n must be between 0 and 1000") {
		t.Errorf("events -n 5000: %d %q", code, stderr)
	}
}

// TestEvents_Follow: hutch events --follow, a process of its own, prints
// what another hutch process changes as it happens, and ends at an
// interrupt with status 0.
func TestEvents_Follow(t *testing.T) {
	e := newEnv(t)
	e.ok("door", "set", "--global", "shared") // the state dir exists
	cmd := e.hutchCmd("events", "--follow", "--json", "-n", "0")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	lines := make(chan string, 4)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	time.Sleep(300 * time.Millisecond) // let it open the log
	e.ok("vault", "set", "slack/C1", "A=1")
	select {
	case line := <-lines:
		if !strings.Contains(line, `"surface":"cli",`) || !strings.Contains(line, `"action":"vault.set"`) || !strings.Contains(line, `"detail":"A"`) {
			t.Errorf("followed %q", line)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the change did not reach hutch events --follow")
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("hutch events --follow after an interrupt: %v", err)
	}
}
