package box_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/project/box"
)

// TestFindProject walks real directories: up to the nearest .git (a
// directory, or the file of a linked worktree), past a member's worktree
// under .worktrees/ to its checkout, through symlinks, and refuses what
// is too broad to mount.
func TestFindProject(t *testing.T) {
	t.Parallel()
	tmp, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	mkdir := func(p ...string) string {
		d := filepath.Join(append([]string{tmp}, p...)...)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	home := mkdir("home", "me")
	repo := mkdir("code", "repo")
	mkdir("code", "repo", ".git")
	deep := mkdir("code", "repo", "a", "b", "c")
	// A linked worktree: .git is a file naming the main repository's git dir.
	wt := mkdir("code", "repo", ".worktrees", "alice")
	if err := os.WriteFile(filepath.Join(wt, ".git"), []byte("gitdir: "+repo+"/.git/worktrees/alice\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	wtDeep := mkdir("code", "repo", ".worktrees", "alice", "src")
	plain := mkdir("code", "plain", "sub")
	if err := os.Symlink(deep, filepath.Join(tmp, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(home, filepath.Join(tmp, "homelink")); err != nil {
		t.Fatal(err)
	}
	dotfiles := mkdir("dot", "me")
	mkdir("dot", "me", ".git")
	dotDeep := mkdir("dot", "me", "code", "x")

	for _, tt := range []struct {
		name, dir, home, want string
	}{
		{"repo_root", repo, home, repo},
		{"walks_up_to_git_dir", deep, home, repo},
		{"member_worktree_is_the_checkout", wt, home, repo},
		{"below_a_member_worktree", wtDeep, home, repo},
		{"no_git_is_the_dir_itself", plain, home, plain},
		{"symlink_resolved", filepath.Join(tmp, "link"), home, repo},
		{"relative_path_is_made_absolute", relTo(t, deep), home, repo},
		{"dir_below_home_without_git", mkdir("home", "me", "code", "x"), home, filepath.Join(home, "code", "x")},
		{"unknown_home", repo, "", repo},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := box.FindProject(tt.dir, tt.home)
			if err != nil || got != tt.want {
				t.Errorf("FindProject(%q, %q) = %q, %v; want %q", tt.dir, tt.home, got, err, tt.want)
			}
		})
	}

	for _, tt := range []struct {
		name, dir, home, says string
	}{
		{"root", "/", home, "Refusing to use / as a project"},
		{"depth_1", "/usr", home, "a top-level directory is too broad"},
		{"depth_1_home_unknown", "/tmp", "", "a top-level directory is too broad"},
		{"home", home, home, "Refusing to use your home directory"},
		{"home_through_a_symlink", filepath.Join(tmp, "homelink"), home, "Refusing to use your home directory"},
		{"home_given_as_a_symlink", home, filepath.Join(tmp, "homelink"), "Refusing to use your home directory"},
		{"ancestor_of_home", filepath.Dir(home), home, "it contains your home directory"},
		{"ancestor_of_home_two_up", filepath.Dir(filepath.Dir(home)), home, "it contains your home directory"},
		{"home_is_a_dotfiles_repo", dotDeep, dotfiles, "give the project its own repository"},
	} {
		t.Run("refuses_"+tt.name, func(t *testing.T) {
			got, err := box.FindProject(tt.dir, tt.home)
			if err == nil {
				t.Fatalf("FindProject(%q, %q) = %q, want a refusal", tt.dir, tt.home, got)
			}
			if !errdefs.IsInvalid(err) || !strings.Contains(err.Error(), tt.says) {
				t.Errorf("FindProject(%q, %q): %v; want ErrInvalid saying %q", tt.dir, tt.home, err, tt.says)
			}
		})
	}

	t.Run("missing_dir", func(t *testing.T) {
		_, err := box.FindProject(filepath.Join(tmp, "nope"), home)
		if !errdefs.IsNotFound(err) {
			t.Errorf("FindProject(missing): %v, want ErrNotFound", err)
		}
	})
}

// TestFindProject_MemberWorktrees makes real git worktrees: a member's
// under <checkout>/.worktrees/ belongs to the checkout (one container,
// its settings and trust), from the worktree and below it. What a .git
// file there says does not matter: the sandbox can write every .git file
// of the checkout, and one pointing at another repository's worktree
// must not move the directory to that project. A linked worktree
// elsewhere, and a .worktrees/ dir under no checkout, stay their own.
func TestFindProject_MemberWorktrees(t *testing.T) {
	t.Parallel()
	tmp, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(tmp, "home")
	checkout := filepath.Join(tmp, "code", "api")
	other := filepath.Join(tmp, "code", "other")
	for _, d := range []string{home, checkout, other} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	git := func(dir string, args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
		cmd.Env = append(os.Environ(), "HOME="+home, "GIT_CONFIG_NOSYSTEM=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %s in %s: %v\n%s", strings.Join(args, " "), dir, err, out)
		}
	}
	for _, repo := range []string{checkout, other} {
		git(repo, "init", "-q", "-b", "main")
		git(repo, "commit", "-q", "--allow-empty", "-m", "first")
	}
	git(checkout, "worktree", "add", "-q", "-b", "alice", ".worktrees/alice")
	git(checkout, "worktree", "add", "-q", "-b", "elsewhere", filepath.Join(tmp, "code", "api-elsewhere"))
	git(other, "worktree", "add", "-q", "-b", "x", ".worktrees/x")
	alice := filepath.Join(checkout, ".worktrees", "alice")
	if err := os.MkdirAll(filepath.Join(alice, "src", "pkg"), 0o755); err != nil {
		t.Fatal(err)
	}
	// Planted by the sandbox: a member dir whose .git file names the other
	// repository's worktree (which git accepts as a worktree of other).
	mallory := filepath.Join(checkout, ".worktrees", "mallory")
	if err := os.MkdirAll(mallory, 0o755); err != nil {
		t.Fatal(err)
	}
	xGit, err := os.ReadFile(filepath.Join(other, ".worktrees", "x", ".git"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(mallory, ".git"), xGit, 0o644); err != nil {
		t.Fatal(err)
	}
	// And alice's own .git file rewritten to name the other repository.
	if err := os.WriteFile(filepath.Join(alice, "src", ".git"), xGit, 0o644); err != nil {
		t.Fatal(err)
	}
	loose := filepath.Join(tmp, "loose", ".worktrees", "bob")
	if err := os.MkdirAll(filepath.Join(loose, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}

	for _, tt := range []struct {
		name, dir, want string
	}{
		{"worktree", alice, checkout},
		{"below_the_worktree", filepath.Join(alice, "src", "pkg"), checkout},
		{"worktrees_dir", filepath.Join(checkout, ".worktrees"), checkout},
		{"planted_git_file_naming_another_repo", mallory, checkout},
		{"planted_git_file_below_a_worktree", filepath.Join(alice, "src"), checkout},
		{"other_repos_own_worktree", filepath.Join(other, ".worktrees", "x"), other},
		{"linked_worktree_outside_the_checkout", filepath.Join(tmp, "code", "api-elsewhere"), filepath.Join(tmp, "code", "api-elsewhere")},
		{"worktrees_dir_under_no_checkout", loose, loose},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := box.FindProject(tt.dir, home)
			if err != nil || got != tt.want {
				t.Errorf("FindProject(%q) = %q, %v; want %q", tt.dir, got, err, tt.want)
			}
		})
	}
}

// relTo returns dir relative to the working directory.
func relTo(t *testing.T, dir string) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(wd, dir)
	if err != nil {
		t.Fatal(err)
	}
	return rel
}
