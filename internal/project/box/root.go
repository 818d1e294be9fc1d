package box

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/project"
)

// FindProject returns the project dir belongs to: the nearest directory at
// or above it holding an entry named .git (a directory, or the file of a
// linked worktree or submodule), else dir itself. A team member's
// worktree, <checkout>/.worktrees/<member>, and everything below it
// belong to the checkout (see memberCheckout). The path is made
// absolute, cleaned and its symlinks resolved first, so every spelling of
// a checkout names one project. Paths too broad to mount are refused.
func FindProject(dir, home string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", errdefs.New(errdefs.ErrNotFound, fmt.Sprintf("No directory %s", abs))
		}
		return "", fmt.Errorf("resolve %s: %w", abs, err)
	}
	root := real
	for d := real; ; d = filepath.Dir(d) {
		if hasGit(d) {
			root = d
			break
		}
		if filepath.Dir(d) == d {
			break
		}
	}
	root = memberCheckout(root)
	if home != "" {
		if h, err := filepath.EvalSymlinks(home); err == nil {
			home = h
		}
	}
	if err := project.CheckProject(root, home); err != nil {
		return "", err
	}
	return root, nil
}

// memberCheckout returns the checkout dir belongs to when it is at or
// below a member's worktree, <checkout>/.worktrees/<member> with a .git
// in <checkout> (the outermost such checkout), else dir. The answer is
// read from the path alone, never from what a .git file points at: the
// sandbox can write every file of the checkout, a worktree's .git file
// included, and a planted one must not move a directory to a project it
// is not under. So a directory is only ever given to a checkout that
// contains it, whose container mounts it anyway.
func memberCheckout(dir string) string {
	out := dir
	for d := dir; filepath.Dir(d) != d; d = filepath.Dir(d) {
		parent := filepath.Dir(d)
		if filepath.Base(parent) == WorktreesDir && hasGit(filepath.Dir(parent)) {
			out = filepath.Dir(parent)
		}
	}
	return out
}

// hasGit reports whether dir holds an entry named .git, of any type.
func hasGit(dir string) bool {
	_, err := os.Lstat(filepath.Join(dir, ".git"))
	return err == nil
}
