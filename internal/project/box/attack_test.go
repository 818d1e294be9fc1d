package box_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hutchsandbox/hutch/internal/project/box"
)

// TestAttack_ChannelRedirect: a command in one project's sandbox replaces
// its agent socket (in a directory every uid inside may write) with a
// link to another project's socket of the same installation. The next
// hutch process that attaches must refuse the agent that answers, naming
// the sandbox, and run nothing in the other project.
func TestAttack_ChannelRedirect(t *testing.T) {
	t.Parallel()
	victim := newFixture(t, nil)
	attacker := newFixture(t, nil)
	attacker.state, attacker.run = victim.state, victim.run // one installation, two projects
	mustRun(t, up(t, victim.box(t)), "", "true")
	sum := sha256.Sum256([]byte("project\x00" + victim.name))
	sock := filepath.Join(victim.run, "prj", hex.EncodeToString(sum[:8]), "agent.sock")
	mustRun(t, up(t, attacker.box(t)), "", "sh", "-c", "ln -s "+sock+" /hutch/run/evil && mv -f /hutch/run/evil /hutch/run/agent.sock")

	planted := filepath.Join(victim.project, "planted")
	ctx := context.Background()
	b := attacker.box(t) // a fresh hutch process dials again
	if tg := b.Attach(ctx); tg != nil {
		var out bytes.Buffer
		_, err := tg.Exec(ctx, []string{"sh", "-c", "echo attacker > " + planted + "; hostname"}, "/", box.IO{Stdout: &out})
		_ = tg.Agent().Close()
		t.Errorf("attached through the redirected channel: ran in %q (%v)", out.String(), err)
	}
	if tg, err := b.Up(ctx); err == nil {
		_ = tg.Agent().Close()
		t.Errorf("Up through the redirected channel succeeded")
	} else if !strings.Contains(err.Error(), attacker.name) || !strings.Contains(err.Error(), "not its agent") {
		t.Errorf("Up: %v; want an error naming %s that says its channel answers with another agent", err, attacker.name)
	}
	if _, err := os.Stat(planted); err == nil {
		t.Errorf("the attacker's command wrote into the victim's project")
	}
	if out := mustRun(t, up(t, victim.box(t)), "", "echo", "ok"); out != "ok\n" {
		t.Errorf("victim after the attack: %q", out)
	}
}
