package apply_test

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/internal/migrate/legacytest"
	"github.com/hutchsandbox/hutch/internal/office"
	"github.com/hutchsandbox/hutch/internal/testenv"
	"github.com/hutchsandbox/hutch/internal/vault"
)

// crashWorld is a workspace of the raw-id layout migrated by real hutch
// processes.
type crashWorld struct {
	bin, ws, state, run string
	convs               []legacytest.Conversation
	owner               map[string]office.Platform
	before              map[string]string // raw id -> tree hash
}

const crashPlatforms = "slack,telegram"

func newCrashWorld(t *testing.T, n int) *crashWorld {
	t.Helper()
	root := t.TempDir()
	w := &crashWorld{
		bin: testenv.HutchBinary(t), ws: filepath.Join(root, "ws"), state: filepath.Join(root, "state"), run: filepath.Join(root, "run"),
		owner: map[string]office.Platform{}, before: map[string]string{},
	}
	for i := range n {
		// Half Slack channel ids, half Telegram chat ids: with both
		// platforms enabled each is owned by its id format alone.
		id, p := fmt.Sprintf("C%04dX", i), office.PlatformSlack
		if i%2 == 1 {
			id, p = fmt.Sprintf("-100%d", 7000+i), office.PlatformTelegram
		}
		w.convs = append(w.convs, legacytest.Conversation{RawID: id, Vault: i%5 == 0, State: i%7 == 0})
		w.owner[id] = p
	}
	if err := legacytest.Populate(w.ws, w.state, w.convs); err != nil {
		t.Fatal(err)
	}
	for _, c := range w.convs {
		w.before[c.RawID] = hash(t, filepath.Join(w.ws, c.RawID))
		if c.Vault {
			w.before["vault:"+c.RawID] = hash(t, filepath.Join(w.state, "vaults", vault.ConversationKey(c.RawID)))
		}
		if c.State {
			w.before["state:"+c.RawID] = hash(t, filepath.Join(w.state, "conversations", c.RawID))
		}
	}
	return w
}

func (w *crashWorld) cmd(hook string, args ...string) *exec.Cmd {
	cmd := exec.Command(w.bin, append([]string{"migrate", "--platforms", crashPlatforms}, args...)...)
	cmd.Env = append(os.Environ(), "HUTCH_STATE_DIR="+w.state, "HUTCH_WORKSPACE="+w.ws, "HUTCH_RUN_DIR="+w.run,
		"HUTCH_TEST_MIGRATE_HOOK="+hook, "DOCKER_HOST=unix:///nonexistent.sock")
	return cmd
}

// killAt runs hutch migrate until it reaches hook, then kills it with
// SIGKILL. It fails the test if the run ends before the hook.
func (w *crashWorld) killAt(t *testing.T, hook string, args ...string) {
	t.Helper()
	cmd := w.cmd(hook, args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stdout strings.Builder
	cmd.Stdout = &stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	reached := make(chan bool, 1)
	var seen strings.Builder
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			seen.WriteString(sc.Text() + "\n")
			if strings.HasPrefix(sc.Text(), "hutch-test-hook: ") {
				reached <- true
				return
			}
		}
		reached <- false
	}()
	select {
	case ok := <-reached:
		if !ok {
			_ = cmd.Wait()
			t.Fatalf("hutch migrate ended before %s\nstdout: %s\nstderr: %s", hook, stdout.String(), seen.String())
		}
	case <-time.After(2 * time.Minute):
		_ = cmd.Process.Kill()
		t.Fatalf("hutch migrate did not reach %s", hook)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("hutch migrate was not killed by SIGKILL: %v", err)
	}
}

// finish runs hutch migrate to the end and returns its stdout.
func (w *crashWorld) finish(t *testing.T) string {
	t.Helper()
	out, err := w.cmd("").CombinedOutput()
	if err != nil {
		t.Fatalf("hutch migrate: %v\n%s", err, out)
	}
	return string(out)
}

// verify checks that every conversation is in exactly one place, its
// office, byte for byte as it was, with its vault and host state.
func (w *crashWorld) verify(t *testing.T) {
	t.Helper()
	reg := office.NewRegistry(w.state)
	file, err := reg.Load()
	if err != nil {
		t.Fatalf("registry after the run: %v", err)
	}
	committed := 0
	for _, m := range file.Migrations {
		if m.Status == office.MigrationCommitted {
			committed++
		} else {
			t.Errorf("record of %s is %s (%s)", m.RawConversationID, m.Status, m.Error)
		}
	}
	if committed != len(w.convs) || len(file.Offices) != len(w.convs) {
		t.Errorf("%d committed records and %d offices, want %d each", committed, len(file.Offices), len(w.convs))
	}
	for _, c := range w.convs {
		k := string(office.Address{Platform: w.owner[c.RawID], ConversationID: c.RawID}.Key())
		if _, err := os.Lstat(filepath.Join(w.ws, c.RawID)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: legacy directory still present (%v)", c.RawID, err)
		}
		if got := hash(t, filepath.Join(w.ws, k)); got != w.before[c.RawID] {
			t.Errorf("%s: office tree differs from the legacy tree", c.RawID)
		}
		if c.Vault {
			if got := hash(t, filepath.Join(w.state, "vaults", k)); got != w.before["vault:"+c.RawID] {
				t.Errorf("%s: vault differs", c.RawID)
			}
		}
		if c.State {
			if got := hash(t, filepath.Join(w.state, "conversations", k)); got != w.before["state:"+c.RawID] {
				t.Errorf("%s: host state differs", c.RawID)
			}
		}
	}
	entries, err := os.ReadDir(w.ws)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != len(w.convs) {
		t.Errorf("workspace holds %d entries, want %d", len(entries), len(w.convs))
	}
}

// TestCrashInjection kills real hutch migrate processes with SIGKILL at
// every journal state (and a second time while the next run recovers),
// then checks that a final run leaves every one of 500 conversations in
// exactly one place, byte-identical, and that a further run does nothing.
func TestCrashInjection(t *testing.T) {
	if testing.Short() {
		t.Skip("builds hutch and runs it dozens of times")
	}
	tests := []struct {
		name  string
		kills []string // hooks, killed in order, each in a new run
	}{
		{"after_prepared", []string{"prepared"}},
		{"after_first_moving", []string{"moving:1"}},
		{"mid_rename_of_a_batch", []string{"renamed:3"}},
		{"after_a_commit", []string{"committed:2"}},
		{"last_batch_moving", []string{"moving:8"}},
		{"during_host_moves", []string{"host"}},
		{"killed_again_while_recovering", []string{"renamed:4", "renamed:1", "moving:2"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := newCrashWorld(t, 500)
			for _, hook := range tc.kills {
				w.killAt(t, hook, "--batch", "64")
			}
			out := w.finish(t)
			if !strings.Contains(out, "Migrated ") {
				t.Errorf("final run reported: %s", out)
			}
			w.verify(t)
			if out := w.finish(t); !strings.Contains(out, "Nothing to migrate") {
				t.Errorf("a run after completion did something: %s", out)
			}
			w.verify(t)
		})
	}
}
