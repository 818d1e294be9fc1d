package box_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/project/box"
)

// TestFindProject walks real directories: up to the nearest .git (a
// directory, or the file of a linked worktree), through symlinks, and
// refuses what is too broad to mount.
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
		{"git_file_of_a_worktree", wt, home, wt},
		{"below_a_git_file", wtDeep, home, wt},
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
