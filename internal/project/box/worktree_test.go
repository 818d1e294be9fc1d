package box_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/project"
	"github.com/hutchsandbox/hutch/internal/project/box"
	"github.com/hutchsandbox/hutch/internal/testenv"
)

// hostGit runs git on the host in dir, with no user or system config,
// and returns its stdout.
func (f *fixture) hostGit(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
	cmd.Env = append(os.Environ(), "HOME="+f.home, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=Host", "GIT_AUTHOR_EMAIL=host@example.com", "GIT_COMMITTER_NAME=Host", "GIT_COMMITTER_EMAIL=host@example.com")
	out, err := cmd.Output()
	if err != nil {
		stderr := ""
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("git %s on the host: %v\n%s%s", strings.Join(args, " "), err, out, stderr)
	}
	return string(out)
}

// sandboxGit runs git in dir inside the sandbox, committing as Sandbox.
func sandboxGit(t *testing.T, tg *box.Target, dir string, args ...string) string {
	t.Helper()
	return mustRun(t, tg, dir, append([]string{"git", "-c", "user.name=Sandbox", "-c", "user.email=sandbox@example.com"}, args...)...)
}

// TestBox_Worktree: a worktree made inside the sandbox works from the
// host, one made on the host works inside, and commits made on either
// side show on the other (the project is mounted at its own path, so the
// absolute paths git records are right on both). The main checkout does
// not list .worktrees as untracked.
//
// Slow the first time on a machine only: testenv.DebianGitImage builds
// its image (a minute or two); later runs take about a second.
func TestBox_Worktree(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatalf("git is not installed on the host: %v", err)
	}
	f := newFixture(t, nil)
	img := testenv.DebianGitImage(t, f.cli, f.debianBase)
	// The caller's own uid:gid, as by default: files keep their owner,
	// so git's safe.directory check passes on both sides.
	f.writeSettings(t, map[string]any{project.KeyImage: img, project.KeyUser: "host"})
	if err := os.RemoveAll(filepath.Join(f.project, ".git")); err != nil {
		t.Fatal(err)
	}
	f.hostGit(t, f.project, "init", "-q", "-b", "main")
	if err := os.WriteFile(filepath.Join(f.project, "README"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f.hostGit(t, f.project, "add", "README")
	f.hostGit(t, f.project, "commit", "-q", "-m", "initial")

	ctx := context.Background()
	b := f.box(t)
	tg := up(t, b)
	if out := mustRun(t, tg, "", "git", "--version"); !strings.HasPrefix(out, "git version") {
		t.Fatalf("git in the sandbox: %q", out)
	}

	// Made inside, used outside.
	alice, err := b.Worktree(ctx, tg, "alice")
	if err != nil {
		t.Fatalf("Worktree(alice): %v", err)
	}
	if want := filepath.Join(f.project, ".worktrees", "alice"); alice != want {
		t.Fatalf("Worktree(alice) = %q, want %q", alice, want)
	}
	if out := f.hostGit(t, alice, "status"); !strings.Contains(out, "On branch alice") || !strings.Contains(out, "nothing to commit") {
		t.Errorf("git status of alice's worktree on the host:\n%s", out)
	}
	if out := f.hostGit(t, alice, "log", "--format=%s"); out != "initial\n" {
		t.Errorf("git log of alice's worktree on the host: %q", out)
	}
	if out := f.hostGit(t, f.project, "status", "--porcelain", "--untracked-files=all"); out != "" {
		t.Errorf("the main checkout lists changes after a worktree was added (.worktrees must be excluded):\n%s", out)
	}
	// A commit on the host shows inside.
	if err := os.WriteFile(filepath.Join(alice, "host.txt"), []byte("from the host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f.hostGit(t, alice, "add", "host.txt")
	f.hostGit(t, alice, "commit", "-q", "-m", "alice: from the host")
	if out := sandboxGit(t, tg, alice, "log", "--format=%s"); out != "alice: from the host\ninitial\n" {
		t.Errorf("git log of alice's worktree in the sandbox: %q", out)
	}
	if out := sandboxGit(t, tg, alice, "status", "--porcelain"); out != "" {
		t.Errorf("git status of alice's worktree in the sandbox: %q", out)
	}
	// And one inside shows on the host.
	mustRun(t, tg, alice, "sh", "-c", "echo from the sandbox > sandbox.txt")
	sandboxGit(t, tg, alice, "add", "sandbox.txt")
	sandboxGit(t, tg, alice, "commit", "-q", "-m", "alice: from the sandbox")
	if out := f.hostGit(t, alice, "log", "--format=%s %an"); out != "alice: from the sandbox Sandbox\nalice: from the host Host\ninitial Host\n" {
		t.Errorf("git log of alice's worktree on the host: %q", out)
	}
	if out := f.hostGit(t, f.project, "log", "--format=%s", "alice"); !strings.HasPrefix(out, "alice: from the sandbox\n") {
		t.Errorf("branch alice seen from the main checkout on the host: %q", out)
	}

	// Made outside, used inside.
	bob := filepath.Join(f.project, ".worktrees", "bob")
	f.hostGit(t, f.project, "worktree", "add", "-q", "-b", "bob", ".worktrees/bob")
	if out := sandboxGit(t, tg, bob, "status"); !strings.Contains(out, "On branch bob") || !strings.Contains(out, "nothing to commit") {
		t.Errorf("git status of bob's worktree in the sandbox:\n%s", out)
	}
	if out := sandboxGit(t, tg, bob, "log", "--format=%s"); out != "initial\n" {
		t.Errorf("git log of bob's worktree in the sandbox: %q", out)
	}
	mustRun(t, tg, bob, "sh", "-c", "echo bob > bob.txt")
	sandboxGit(t, tg, bob, "add", "bob.txt")
	sandboxGit(t, tg, bob, "commit", "-q", "-m", "bob: from the sandbox")
	if out := f.hostGit(t, bob, "log", "--format=%s"); out != "bob: from the sandbox\ninitial\n" {
		t.Errorf("git log of bob's worktree on the host: %q", out)
	}
	// Both sides list the same worktrees, none of them broken.
	hostList, sandboxList := f.hostGit(t, f.project, "worktree", "list", "--porcelain"), sandboxGit(t, tg, "", "worktree", "list", "--porcelain")
	if hostList != sandboxList || strings.Contains(hostList, "prunable") || strings.Count(hostList, "worktree ") != 3 {
		t.Errorf("git worktree list differs or is broken:\nhost:\n%s\nsandbox:\n%s", hostList, sandboxList)
	}
	if out := f.hostGit(t, f.project, "status", "--porcelain", "--untracked-files=all"); out != "" {
		t.Errorf("the main checkout lists changes:\n%s", out)
	}

	// Asking again finds the worktree, whoever made it.
	for member, want := range map[string]string{"alice": alice, "bob": bob} {
		if got, err := b.Worktree(ctx, tg, member); err != nil || got != want {
			t.Errorf("Worktree(%s) again = %q, %v; want %q", member, got, err, want)
		}
	}
	exclude, err := os.ReadFile(filepath.Join(f.project, ".git", "info", "exclude"))
	if err != nil || strings.Count(string(exclude), "/.worktrees/") != 1 {
		t.Errorf(".git/info/exclude holds /.worktrees/ other than once: %q, %v", exclude, err)
	}
	for _, bad := range []string{"../x", "a/b", "", ".hidden", "-rf", strings.Repeat("x", 65)} {
		if _, err := b.Worktree(ctx, tg, bad); !errdefs.IsInvalid(err) {
			t.Errorf("Worktree(%q): %v, want ErrInvalid", bad, err)
		}
	}

	// Through the CLI: the worktree is made and the command runs there.
	carol := filepath.Join(f.project, ".worktrees", "carol")
	out, _ := f.mustHutch(t, "worktree", "carol", "--", "sh", "-c", "pwd; git status --short --branch")
	if want := carol + "\n## carol\n"; out != want {
		t.Errorf("hutch project worktree carol -- ...: %q, want %q", out, want)
	}
	if out := f.hostGit(t, carol, "rev-parse", "--abbrev-ref", "HEAD"); out != "carol\n" {
		t.Errorf("carol's worktree on the host is on %q", out)
	}
}

// TestBox_WorktreeNotARepo: a project without git has no worktrees, and
// says so.
func TestBox_WorktreeNotARepo(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	if err := os.RemoveAll(filepath.Join(f.project, ".git")); err != nil {
		t.Fatal(err)
	}
	b := f.box(t)
	tg := up(t, b)
	if _, err := b.Worktree(context.Background(), tg, "alice"); !errdefs.IsFailedPrecondition(err) || !strings.Contains(err.Error(), "not a git repository") {
		t.Errorf("Worktree in a project without git: %v", err)
	}
}
