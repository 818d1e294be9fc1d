package box_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hutchsandbox/hutch/internal/project"
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
	atg := up(t, attacker.box(t))
	// First line: the socket dir is sealed once the agent listens.
	for _, cmd := range []string{
		"ln -s " + sock + " /hutch/run/evil && mv -f /hutch/run/evil /hutch/run/agent.sock",
		"head -c 1048576 /dev/zero > /hutch/run/fill",
	} {
		if _, _, code := run(t, atg, "", "sh", "-c", cmd); code == 0 {
			t.Errorf("%q succeeded in the socket dir", cmd)
		}
	}
	// Second line: where the seal is missing, the link gets planted;
	// played here from the host.
	asum := sha256.Sum256([]byte("project\x00" + attacker.name))
	sockDir := filepath.Join(attacker.run, "prj", hex.EncodeToString(asum[:8]))
	if out, err := exec.Command("chattr", "-i", sockDir).CombinedOutput(); err != nil {
		t.Fatalf("chattr -i %s: %v %s", sockDir, err, out)
	}
	if err := os.Symlink(sock, sockDir+"/evil"); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(sockDir+"/evil", sockDir+"/agent.sock"); err != nil {
		t.Fatal(err)
	}

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

// mountInProject is a fixture whose settings mount <project>/data at
// /data, read-write, and a directory of the user's with a secret in it.
func mountInProject(t *testing.T) (f *fixture, data, secretDir string) {
	t.Helper()
	f = newFixture(t, nil)
	data = filepath.Join(f.project, "data")
	secretDir = filepath.Join(f.home, ".ssh")
	for _, d := range []string{data, secretDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(secretDir, "id_ed25519"), []byte("PRIVATE KEY"), 0o600); err != nil {
		t.Fatal(err)
	}
	f.writeSettings(t, map[string]any{project.KeyImage: f.busybox, project.KeyUser: "root", project.KeyMount: []string{data + ":/data"}})
	return f, data, secretDir
}

// TestAttack_ProjectMountLinked: the sandbox replaces a mount source that
// lies in the project with a link to ~/.ssh. The next start must refuse
// it, and nothing of ~/.ssh may show inside.
func TestAttack_ProjectMountLinked(t *testing.T) {
	t.Parallel()
	f, data, secretDir := mountInProject(t)
	b := f.box(t)
	mustRun(t, up(t, b), "", "sh", "-c", "rm -rf "+data+" && ln -s "+secretDir+" "+data)
	if _, err := b.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	tg, err := f.box(t).Up(context.Background())
	if err == nil {
		out, _, _ := run(t, tg, "/", "sh", "-c", "cat /data/id_ed25519")
		_ = tg.Agent().Close()
		t.Fatalf("the sandbox started with its mount source linked to ~/.ssh: /data holds %q", out)
	}
	if !strings.Contains(err.Error(), "is a symbolic link") {
		t.Errorf("Up with a linked mount source: %v; want the link refusal", err)
	}
}

// TestAttack_ProjectMountSwappedInTheRace: the swap lands after the check
// and before the engine mounts (played by a hook at exactly that point).
// The sandbox must be stopped before anything runs in it.
func TestAttack_ProjectMountSwappedInTheRace(t *testing.T) {
	// Not parallel: the hook is the package's.
	f, data, secretDir := mountInProject(t)
	b := f.box(t)
	mustRun(t, up(t, b), "", "true")
	if _, err := b.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	restore := box.BeforeStart(func(s project.Spec) {
		if s.Name != f.name {
			return
		}
		if err := os.Rename(data, data+"-moved"); err != nil {
			t.Error(err)
		}
		if err := os.Symlink(secretDir, data); err != nil {
			t.Error(err)
		}
	})
	defer restore()
	tg, err := f.box(t).Up(context.Background())
	if err == nil {
		out, _, _ := run(t, tg, "/", "sh", "-c", "cat /data/id_ed25519")
		_ = tg.Agent().Close()
		t.Fatalf("the sandbox came up with a swapped mount: /data holds %q", out)
	}
	if !strings.Contains(err.Error(), "before anything ran in it") {
		t.Errorf("Up with a mount swapped in the race: %v; want the sandbox stopped", err)
	}
	if _, running := f.running(t, f.name); running {
		t.Errorf("the sandbox with the swapped mount still runs")
	}
}

// TestAttack_ProjectMountOutsideRelinked: an approved devcontainer.json
// mounts ~/shared read-write and ~/shared/link/.cache, a source outside
// the project whose path runs through a link the sandbox can reach. The
// sandbox points the link at the home directory, so that source now
// names ~/.cache, which nobody approved. The next rebuild must not mount
// it: the file is not applied until approved again, and says why.
func TestAttack_ProjectMountOutsideRelinked(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	shared, harmless, secret := filepath.Join(f.home, "shared"), filepath.Join(f.home, "harmless"), filepath.Join(f.home, ".cache")
	for _, d := range []string{shared, filepath.Join(harmless, ".cache"), secret} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(secret, "token"), []byte("s3cret"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(harmless, filepath.Join(shared, "link")); err != nil {
		t.Fatal(err)
	}
	dc := filepath.Join(f.project, ".devcontainer", "devcontainer.json")
	if err := os.MkdirAll(filepath.Dir(dc), 0o755); err != nil {
		t.Fatal(err)
	}
	body := `{"mounts": ["source=` + shared + `,target=/shared,type=bind", "source=` + shared + `/link/.cache,target=/data,type=bind"], "shutdownAction": "none"}`
	if err := os.WriteFile(dc, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _ := f.mustHutch(t, "trust")
	if !strings.Contains(out, "  "+shared+"/link/.cache -> "+harmless+"/.cache\n") {
		t.Errorf("trust does not show where the outside source resolves:\n%s", out)
	}
	f.mustHutch(t, "up")
	if out, _ := f.mustHutch(t, "exec", "--", "sh", "-c", "ls -A /data; ln -sfn "+f.home+" /shared/link.new && mv -T /shared/link.new /shared/link && echo relinked"); out != "relinked\n" {
		t.Fatalf("the sandbox relinking through its mount: %q", out)
	}
	_, errOut := f.mustHutch(t, "rebuild")
	want := dc + " is not applied: its mount source " + shared + "/link/.cache now resolves to " + secret + ", not to " + harmless + "/.cache as when it was approved"
	if !strings.Contains(errOut, want) {
		t.Errorf("rebuild after the relink does not say why the file is not applied:\n%s\nwant %q", errOut, want)
	}
	if out, _, _ := f.hutch(t, "exec", "--", "sh", "-c", "cat /data/token 2>&1; ls /shared 2>&1"); strings.Contains(out, "s3cret") {
		t.Errorf("the relinked source was mounted: %q", out)
	}
}
