package beneath_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/hutchsandbox/hutch/internal/beneath"
	"github.com/hutchsandbox/hutch/internal/errdefs"
)

func TestOpen(t *testing.T) {
	tmp := t.TempDir()
	root := filepath.Join(tmp, "ws")
	secret := filepath.Join(tmp, "state")
	for _, d := range []string{filepath.Join(root, "office", "sub"), secret} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "MEMORY.md"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	// The root itself may be reached through a link: it is the operator's.
	linkedRoot := filepath.Join(tmp, "ws-link")
	if err := os.Symlink(root, linkedRoot); err != nil {
		t.Fatal(err)
	}
	for _, p := range []struct{ root, path string }{
		{root, filepath.Join(root, "office")},
		{root, filepath.Join(root, "office", "sub")},
		{root, filepath.Join(root, "MEMORY.md")},
		{root, root},
		{linkedRoot, filepath.Join(linkedRoot, "office")},
	} {
		f, err := beneath.Open(p.root, p.path)
		if err != nil {
			t.Errorf("Open(%s, %s): %v", p.root, p.path, err)
			continue
		}
		var st syscall.Stat_t
		if err := syscall.Stat(p.path, &st); err != nil {
			t.Fatal(err)
		}
		if !f.Same(uint64(st.Dev), st.Ino) {
			t.Errorf("Open(%s): dev/ino %d/%d, stat says %d/%d", p.path, f.Dev, f.Ino, st.Dev, st.Ino)
		}
		_ = f.Close()
	}

	// A runtime that writes the workspace swaps an office for a link to
	// hutch's state dir, or a link somewhere on the way to it.
	if err := os.Rename(filepath.Join(root, "office"), filepath.Join(root, "office-moved")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, filepath.Join(root, "office")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(root, "office-moved"), filepath.Join(root, "via")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{filepath.Join(root, "office"), filepath.Join(root, "via", "sub")} {
		if f, err := beneath.Open(root, p); err == nil {
			_ = f.Close()
			t.Errorf("Open(%s) through a link succeeded", p)
		} else if !errdefs.IsFailedPrecondition(err) || !strings.Contains(err.Error(), "is a symbolic link") {
			t.Errorf("Open(%s): %v; want the link refusal", p, err)
		}
	}
	if _, err := beneath.Open(root, filepath.Join(root, "missing")); !errdefs.IsNotFound(err) {
		t.Errorf("missing: %v", err)
	}
	for _, p := range []string{secret, filepath.Join(root, "..", "state")} {
		if _, err := beneath.Open(root, p); !errdefs.IsInvalid(err) {
			t.Errorf("Open(%s) outside the root: %v; want invalid", p, err)
		}
	}
}

// TestWriteFile: a file the sandbox replaced with a link (or a directory
// on the way) is replaced, or refused, never written through.
func TestWriteFile(t *testing.T) {
	tmp := t.TempDir()
	root := filepath.Join(tmp, "checkout")
	victim := filepath.Join(tmp, "bashrc")
	if err := os.MkdirAll(filepath.Join(root, ".git", "info"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(victim, []byte("original\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	exclude := filepath.Join(root, ".git", "info", "exclude")
	if err := os.Symlink(victim, exclude); err != nil {
		t.Fatal(err)
	}
	if _, err := beneath.ReadFile(root, exclude); !errdefs.IsFailedPrecondition(err) {
		t.Errorf("ReadFile through a link: %v; want the link refusal", err)
	}
	if err := beneath.WriteFile(root, exclude, []byte("/.worktrees/\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(victim); string(got) != "original\n" {
		t.Errorf("the link's target was written: %q", got)
	}
	if got, err := beneath.ReadFile(root, exclude); err != nil || string(got) != "/.worktrees/\n" {
		t.Errorf("after the write: %q, %v", got, err)
	}
	if fi, _ := os.Lstat(exclude); !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o644 {
		t.Errorf("exclude is %v, want a regular 0644 file", fi.Mode())
	}

	// A directory on the way replaced by a link to one the user owns.
	if err := os.RemoveAll(filepath.Join(root, ".git", "info")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(tmp, filepath.Join(root, ".git", "info")); err != nil {
		t.Fatal(err)
	}
	if err := beneath.WriteFile(root, exclude, []byte("x\n"), 0o644); !errdefs.IsFailedPrecondition(err) {
		t.Errorf("WriteFile through a linked directory: %v; want the link refusal", err)
	}
	if _, err := os.Stat(filepath.Join(tmp, "exclude")); err == nil {
		t.Errorf("a file was written through the linked directory")
	}
	// Missing directories are made.
	if err := beneath.WriteFile(root, filepath.Join(root, "a", "b", "c.txt"), []byte("c"), 0o600); err != nil {
		t.Errorf("WriteFile into new directories: %v", err)
	}
	if left, _ := filepath.Glob(filepath.Join(root, "a", "b", ".*hutch-*")); len(left) > 0 {
		t.Errorf("stage files left: %q", left)
	}
}
