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
// linked worktree or submodule), else dir itself. The path is made
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
		if _, err := os.Lstat(filepath.Join(d, ".git")); err == nil {
			root = d
			break
		}
		if filepath.Dir(d) == d {
			break
		}
	}
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
