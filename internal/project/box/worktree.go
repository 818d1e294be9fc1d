package box

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/hutchsandbox/hutch/internal/beneath"
	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/lazyregexp"
)

// WorktreesDir is where team members' worktrees live: under the project,
// so they are inside the mount and every agent sees them. (A worktree
// beside the project would be invisible in the container.)
const WorktreesDir = ".worktrees"

var memberName = lazyregexp.New(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// WorktreeDir returns the worktree directory of member, checking the name.
func WorktreeDir(projectDir, member string) (string, error) {
	if !memberName.MatchString(member) || strings.Contains(member, "..") {
		return "", errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("Member name %q must be 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit", member))
	}
	return filepath.Join(projectDir, WorktreesDir, member), nil
}

// Worktree makes sure member has a worktree under the project, creating
// it with git inside the container (branch <member>, made from HEAD when
// it does not exist yet). The project is mounted at its own path, so the
// absolute paths git records work from the host as well. .worktrees/ is
// added to the repository's info/exclude so it never shows as untracked.
func (b *Box) Worktree(ctx context.Context, t *Target, member string) (string, error) {
	dir, err := WorktreeDir(b.project, member)
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(filepath.Join(b.project, ".git")); err != nil {
		return "", errdefs.New(errdefs.ErrFailedPrecondition, fmt.Sprintf("%s is not a git repository; worktrees need one (git init).", b.project))
	}
	if err := excludeWorktrees(b.project); err != nil {
		return "", err
	}
	if _, err := os.Stat(filepath.Join(dir, ".git")); err == nil {
		return dir, nil
	}
	rel := WorktreesDir + "/" + member
	script := `if git show-ref --verify --quiet "refs/heads/$2"; then exec git worktree add "$1" "$2"; else exec git worktree add -b "$2" "$1"; fi`
	var out bytes.Buffer
	res, err := t.Exec(ctx, []string{"sh", "-c", script, "sh", rel, member}, b.project, IO{Stdout: &out, Stderr: &out})
	if err != nil {
		return "", err
	}
	if res.ExitCode != 0 {
		return "", errdefs.New(errdefs.ErrFailedPrecondition, fmt.Sprintf("git worktree add %s failed in the sandbox (exit %d): %s", rel, res.ExitCode, strings.TrimSpace(out.String())))
	}
	return dir, nil
}

// excludeWorktrees adds /.worktrees/ to .git/info/exclude once. In a
// linked worktree or submodule (.git is a file) the checkout's own git
// dir is not at hand, so nothing is added there. The checkout is mounted
// read-write into the sandbox, which may have put a link anywhere on the
// way: the file is read and replaced beneath the project without
// following one (a link is refused), so the line never lands elsewhere.
func excludeWorktrees(projectDir string) error {
	gitDir := filepath.Join(projectDir, ".git")
	if fi, err := os.Lstat(gitDir); err != nil || !fi.IsDir() {
		return nil
	}
	path := filepath.Join(gitDir, "info", "exclude")
	data, err := beneath.ReadFile(projectDir, path)
	if err != nil && !errdefs.IsNotFound(err) {
		return err
	}
	const line = "/" + WorktreesDir + "/"
	for _, l := range strings.Split(string(data), "\n") {
		if strings.TrimSpace(l) == line {
			return nil
		}
	}
	if len(data) > 0 && !bytes.HasSuffix(data, []byte("\n")) {
		data = append(data, '\n')
	}
	data = append(data, []byte("# hutch: team members' worktrees\n"+line+"\n")...)
	return beneath.WriteFile(projectDir, path, data, 0o644)
}
