package sandbox_test

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/sandbox"
)

// TestFileInfo_JSON: names and link targets that are not UTF-8 make the
// round trip with their bytes whole; UTF-8 ones travel as plain strings.
func TestFileInfo_JSON(t *testing.T) {
	when := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	for _, fi := range []sandbox.FileInfo{
		{Name: "notes.md", Size: 3, Mode: 0o644, ModTime: when},
		{Name: "caf\xe9-\xff", Size: 1, Mode: os.ModeSymlink | 0o777, ModTime: when, Link: "t\xe9"},
		{Name: "dir", Mode: os.ModeDir | 0o755, ModTime: when, IsDir: true},
	} {
		b, err := json.Marshal(fi)
		if err != nil {
			t.Fatal(err)
		}
		var back sandbox.FileInfo
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		if back != fi {
			t.Errorf("%s came back as %+v", b, back)
		}
		bytesSent := strings.Contains(string(b), "nameBytes")
		if bytesSent == (fi.Name == "notes.md" || fi.Name == "dir") {
			t.Errorf("%s: nameBytes sent %v for name %q", b, bytesSent, fi.Name)
		}
	}
	b, _ := json.Marshal(sandbox.FileInfo{Name: "a.txt", Size: 1, ModTime: when})
	if want := `{"name":"a.txt","size":1,"mode":0,"modTime":"2026-12-01T10:00:00Z","isDir":false}`; string(b) != want {
		t.Errorf("wire form %s, want %s", b, want)
	}
}

// TestConfinedFiles_NoRoots: with no roots nothing is reachable, and the
// operations behind are never called (they would confine nothing).
func TestConfinedFiles_NoRoots(t *testing.T) {
	called := false
	f := sandbox.ConfinedFiles(func(context.Context) (sandbox.Confined, error) {
		called = true
		return nil, nil
	}, "/workspace/o", nil)
	ctx := context.Background()
	want := "Path /etc/passwd is outside the sandbox's workspace"
	_, err1 := f.Stat(ctx, "/etc/passwd")
	err2 := f.ReadFile(ctx, "/etc/passwd", io.Discard)
	err3 := f.WriteFile(ctx, "/etc/passwd", strings.NewReader("x"), 0)
	_, err4 := f.List(ctx, "/etc/passwd")
	for i, err := range []error{err1, err2, err3, err4} {
		if !errdefs.IsFailedPrecondition(err) || err.Error() != want {
			t.Errorf("operation %d: %v; want %q", i, err, want)
		}
	}
	if called {
		t.Error("the operations were reached without roots")
	}
}
