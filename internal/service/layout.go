package service

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/hutchsandbox/hutch/internal/errdefs"
)

// Layout is where hutch keeps its state and where the offices live.
type Layout struct {
	// StateDir holds the registry, settings, vaults and per-office state.
	// It is host-only: never mounted into a runtime.
	StateDir string
	// Workspace is the root under which every office is a directory.
	Workspace string
	// RunDir holds runtime sockets and the staged agent binary: volatile,
	// host-only, and short enough for unix socket paths.
	RunDir string
}

// LayoutOptions are the raw inputs a Layout is resolved from.
type LayoutOptions struct {
	// StateDir and Workspace are the flag values ("" = not given).
	StateDir, Workspace string
	// Getenv reads HUTCH_STATE_DIR and HUTCH_WORKSPACE; nil means os.Getenv.
	Getenv func(string) string
	// Home is the user's home directory; "" means os.UserHomeDir.
	Home string
}

// ResolveLayout picks the state dir (flag, then $HUTCH_STATE_DIR, then
// ~/.hutch) and the workspace (flag, then $HUTCH_WORKSPACE, then
// <state>/workspace), makes both absolute and clean, and checks the state
// dir is safe: created 0700 when missing, refused when it is a symlink,
// not a directory, world-writable, or inside the workspace (a runtime that
// mounts the workspace would then see every vault).
func ResolveLayout(o LayoutOptions) (Layout, error) {
	getenv := o.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	state := firstNonEmpty(o.StateDir, getenv("HUTCH_STATE_DIR"))
	if state == "" {
		home := o.Home
		if home == "" {
			h, err := os.UserHomeDir()
			if err != nil {
				return Layout{}, errdefs.New(errdefs.ErrFailedPrecondition, "Cannot find a home directory for the state dir; pass --state-dir or set HUTCH_STATE_DIR")
			}
			home = h
		}
		state = filepath.Join(home, ".hutch")
	}
	state, err := filepath.Abs(state)
	if err != nil {
		return Layout{}, fmt.Errorf("state dir: %w", err)
	}
	ws := firstNonEmpty(o.Workspace, getenv("HUTCH_WORKSPACE"))
	if ws == "" {
		ws = filepath.Join(state, "workspace")
	}
	ws, err = filepath.Abs(ws)
	if err != nil {
		return Layout{}, fmt.Errorf("workspace: %w", err)
	}
	if err := ensureStateDir(state); err != nil {
		return Layout{}, err
	}
	if within(state, resolveExisting(ws)) || within(resolveExisting(state), resolveExisting(ws)) {
		return Layout{}, errdefs.New(errdefs.ErrFailedPrecondition, fmt.Sprintf(
			"State dir %s must not be inside the workspace %s: runtimes mount the workspace, and a mounted state dir would expose vaults and settings to sandboxed code", state, ws))
	}
	run := getenv("HUTCH_RUN_DIR")
	if run == "" {
		run = defaultRunDir(state, getenv)
	}
	return Layout{StateDir: state, Workspace: ws, RunDir: run}, nil
}

// defaultRunDir is /run/hutch/<digest of the state dir> for root, else
// under $XDG_RUNTIME_DIR or the temp dir: one per state dir, so two
// hutch installations never share sockets.
func defaultRunDir(state string, getenv func(string) string) string {
	sum := sha256.Sum256([]byte(state))
	id := hex.EncodeToString(sum[:4])
	switch {
	case os.Geteuid() == 0:
		return filepath.Join("/run/hutch", id)
	case getenv("XDG_RUNTIME_DIR") != "":
		return filepath.Join(getenv("XDG_RUNTIME_DIR"), "hutch", id)
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("hutch-%d", os.Geteuid()), id)
}

func ensureStateDir(dir string) error {
	fi, err := os.Lstat(dir)
	switch {
	case os.IsNotExist(err):
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("create state dir: %w", err)
		}
		return os.Chmod(dir, 0o700)
	case err != nil:
		return fmt.Errorf("state dir: %w", err)
	case fi.Mode()&os.ModeSymlink != 0 || !fi.IsDir():
		return errdefs.New(errdefs.ErrFailedPrecondition, fmt.Sprintf("State dir %s must be a regular non-symlink directory", dir))
	case fi.Mode().Perm()&0o002 != 0:
		return errdefs.New(errdefs.ErrFailedPrecondition, fmt.Sprintf(
			"State dir %s is world-writable (mode %04o); anyone could plant settings or read vaults. Fix with: chmod 0700 %s", dir, fi.Mode().Perm(), dir))
	}
	return nil
}

// within reports whether p is root or lies under it.
func within(p, root string) bool {
	rel, err := filepath.Rel(root, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

// resolveExisting resolves symlinks in the longest existing prefix of p,
// so a workspace reached through a link is still recognised.
func resolveExisting(p string) string {
	rest := ""
	for cur := p; ; cur = filepath.Dir(cur) {
		if r, err := filepath.EvalSymlinks(cur); err == nil {
			return filepath.Join(r, rest)
		}
		if cur == filepath.Dir(cur) {
			return p
		}
		rest = filepath.Join(filepath.Base(cur), rest)
	}
}

func firstNonEmpty(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}
