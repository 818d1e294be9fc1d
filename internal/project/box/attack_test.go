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

// TestAttack_ExcludeThroughLink: the sandbox, which writes the checkout,
// replaces .git/info/exclude with a link to a file of the user's on the
// host. hutch's own write of the worktrees line must not land there.
func TestAttack_ExcludeThroughLink(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	bashrc := filepath.Join(f.home, ".bashrc")
	if err := os.WriteFile(bashrc, []byte("# mine\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	b := f.box(t)
	tg := up(t, b)
	mustRun(t, tg, "", "sh", "-c", "mkdir -p .git/info && ln -sf "+bashrc+" .git/info/exclude")
	_, err := b.Worktree(context.Background(), tg, "alice")
	if got, _ := os.ReadFile(bashrc); string(got) != "# mine\n" {
		t.Errorf("hutch wrote through the planted link into %s: %q", bashrc, got)
	}
	if err == nil || !strings.Contains(err.Error(), "is a symbolic link") {
		t.Errorf("Worktree with a planted exclude link: %v; want the link refusal", err)
	}
}
