package image_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/sandbox/image"
)

// hostSocket is where an office's agent socket sits on the host: a path
// anyone who knows the run dir and the office key can compute.
func (f *fixture) hostSocket(officeKey string) string {
	sum := sha256.Sum256([]byte(officeKey))
	return filepath.Join(f.run, "rt", hex.EncodeToString(sum[:8]), "agent.sock")
}

// TestAttack_ChannelRedirect: a command replaces its runtime's agent
// socket with a symlink to another office's socket. The next hutch
// process that dials (every fresh hutch exec does; the daemon does after
// its connection drops) must refuse the agent that answers, naming the
// runtime, and send it nothing: the victim's office stays untouched and
// no command or env of the attacker's conversation reaches it.
func TestAttack_ChannelRedirect(t *testing.T) {
	f := newFixture(t)
	victim := f.office(t, "victim")
	attacker := f.office(t, "attacker")
	run(t, f.rt, victim, "true", nil)
	run(t, f.rt, attacker, "true", nil)
	run(t, f.rt, attacker, "ln -s "+f.hostSocket(victim.OfficeKey)+" /hutch/run/evil && mv -f /hutch/run/evil /hutch/run/agent.sock", nil)

	rt := f.runtime(t) // a fresh process: it dials the socket path again
	var out, errb bytes.Buffer
	_, err := rt.Exec(context.Background(), attacker, sandbox.ExecRequest{
		Argv:   []string{"for d in /workspace/*/; do echo planted > \"$d\"planted; done; echo ran"},
		Dir:    "/",
		Env:    map[string]string{"CONVERSATION_SECRET": "s3cret"},
		Stdout: &out, Stderr: &errb, Timeout: time.Minute,
	})
	if err == nil {
		t.Errorf("the redirected channel was used: stdout %q, stderr %q", out.String(), errb.String())
	} else if !strings.Contains(err.Error(), image.ContainerName(attacker.OfficeKey)) || !strings.Contains(err.Error(), "not its agent") {
		t.Errorf("error %q: want it to name %s and say its channel answers with another agent", err, image.ContainerName(attacker.OfficeKey))
	}
	if _, err := os.Stat(filepath.Join(victim.OfficeDir, "planted")); err == nil {
		t.Errorf("the attacker's command wrote into the victim's office")
	}
	// The victim is served as before, by a fresh process too.
	if got, _ := run(t, f.runtime(t), victim, "echo ok", nil); got != "ok\n" {
		t.Errorf("victim after the attack: %q", got)
	}
}
