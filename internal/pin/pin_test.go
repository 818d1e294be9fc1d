package pin_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/pin"
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
		f, err := pin.Open(p.root, p.path)
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
		if f, err := pin.Open(root, p); err == nil {
			_ = f.Close()
			t.Errorf("Open(%s) through a link succeeded", p)
		} else if !errdefs.IsFailedPrecondition(err) || !strings.Contains(err.Error(), "is a symbolic link") {
			t.Errorf("Open(%s): %v; want the link refusal", p, err)
		}
	}
	if _, err := pin.Open(root, filepath.Join(root, "missing")); !errdefs.IsNotFound(err) {
		t.Errorf("missing: %v", err)
	}
	for _, p := range []string{secret, filepath.Join(root, "..", "state")} {
		if _, err := pin.Open(root, p); !errdefs.IsInvalid(err) {
			t.Errorf("Open(%s) outside the root: %v; want invalid", p, err)
		}
	}
}
