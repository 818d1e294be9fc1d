package agent

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/internal/errdefs"
)

func TestFiles_WriteThenRead(t *testing.T) {
	f := newFixture(t, nil)
	dir := t.TempDir()
	content := bytes.Repeat([]byte("line of text\n"), 400<<10) // ~5 MiB
	tests := []struct {
		name     string
		path     string
		existing os.FileMode // 0: no file before
		mode     os.FileMode
		wantMode os.FileMode
	}{
		{"new_default_mode", filepath.Join(dir, "new"), 0, 0, 0o644},
		{"new_with_mode", filepath.Join(dir, "secret"), 0, 0o600, 0o600},
		{"keeps_existing_mode", filepath.Join(dir, "kept"), 0o640, 0, 0o640},
		{"mode_replaces_existing", filepath.Join(dir, "changed"), 0o640, 0o755, 0o755},
		{"creates_parents", filepath.Join(dir, "a", "b", "c"), 0, 0, 0o644},
	}
	old := syscall.Umask(0o077) // the agent sets modes explicitly, whatever the umask
	defer syscall.Umask(old)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.existing != 0 {
				if err := os.WriteFile(tt.path, []byte("old"), 0o600); err != nil {
					t.Fatal(err)
				}
				if err := os.Chmod(tt.path, tt.existing); err != nil {
					t.Fatal(err)
				}
			}
			if err := f.client.WriteFile(context.Background(), tt.path, bytes.NewReader(content), tt.mode); err != nil {
				t.Fatalf("WriteFile: %v", err)
			}
			fi, err := os.Stat(tt.path)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode().Perm() != tt.wantMode {
				t.Errorf("mode got %o, want %o", fi.Mode().Perm(), tt.wantMode)
			}
			var got bytes.Buffer
			if err := f.client.ReadFile(context.Background(), tt.path, &got); err != nil {
				t.Fatalf("ReadFile: %v", err)
			}
			if !bytes.Equal(got.Bytes(), content) {
				t.Errorf("read back %d bytes, want the %d written", got.Len(), len(content))
			}
			assertNoStage(t, filepath.Dir(tt.path))
		})
	}
	t.Run("parents_are_0755", func(t *testing.T) {
		fi, err := os.Stat(filepath.Join(dir, "a", "b"))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o755 {
			t.Errorf("parent mode got %o, want 755", fi.Mode().Perm())
		}
	})
	t.Run("empty_file", func(t *testing.T) {
		p := filepath.Join(dir, "empty")
		if err := f.client.WriteFile(context.Background(), p, strings.NewReader(""), 0); err != nil {
			t.Fatal(err)
		}
		var got bytes.Buffer
		if err := f.client.ReadFile(context.Background(), p, &got); err != nil || got.Len() != 0 {
			t.Errorf("ReadFile got %q, %v; want empty, nil", got.String(), err)
		}
	})
}

// stageFiles lists the stage files left in dir.
func stageFiles(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var stages []string
	for _, e := range entries {
		if strings.Contains(e.Name(), stageInfix) {
			stages = append(stages, e.Name())
		}
	}
	return stages
}

func assertNoStage(t *testing.T, dir string) {
	t.Helper()
	if s := stageFiles(t, dir); len(s) > 0 {
		t.Errorf("stage files left in %s: %v", dir, s)
	}
}

// failingReader yields n bytes, then fails.
type failingReader struct {
	n   int
	err error
}

func (r *failingReader) Read(p []byte) (int, error) {
	if r.n == 0 {
		return 0, r.err
	}
	k := min(len(p), r.n)
	for i := range p[:k] {
		p[i] = 'x'
	}
	r.n -= k
	return k, nil
}

func TestFiles_FailedWriteLeavesTheOldContent(t *testing.T) {
	f := newFixture(t, nil)
	dir := t.TempDir()
	p := filepath.Join(dir, "notes.md")
	if err := os.WriteFile(p, []byte("old content"), 0o640); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom: the source broke")
	err := f.client.WriteFile(context.Background(), p, &failingReader{n: 3 << 20, err: boom}, 0)
	if !errors.Is(err, boom) {
		t.Fatalf("WriteFile error got %v, want it to wrap the reader's error", err)
	}
	// The agent removes its stage when it sees the request fail, which
	// can be just after the client returned.
	deadline := time.Now().Add(waitFor)
	for len(stageFiles(t, dir)) > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	assertNoStage(t, dir)
	got, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != "old content" {
		t.Errorf("content got %q, want the old content intact", got)
	}
	if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o640 {
		t.Errorf("mode got %o, want 640 kept", fi.Mode().Perm())
	}
}

func TestWriteAtomic_FailingSourceRemovesStage(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	if err := os.WriteFile(p, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := writeAtomic(p, io.MultiReader(strings.NewReader("partial"), &failingReader{err: io.ErrUnexpectedEOF}), nil)
	if !errdefs.IsUnavailable(err) {
		t.Errorf("error got %v, want class unavailable", err)
	}
	assertNoStage(t, dir)
	if got, _ := os.ReadFile(p); string(got) != "old" {
		t.Errorf("content got %q, want %q", got, "old")
	}
}

func TestWriteFile_ReplacesSymlinkInsteadOfFollowing(t *testing.T) {
	f := newFixture(t, nil)
	dir := t.TempDir()
	victim := filepath.Join(dir, "victim")
	if err := os.WriteFile(victim, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(victim, link); err != nil {
		t.Fatal(err)
	}
	if err := f.client.WriteFile(context.Background(), link, strings.NewReader("new"), 0); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(victim); string(got) != "keep" {
		t.Errorf("symlink target got %q, want it untouched", got)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink != 0 {
		t.Errorf("path is still a symlink (%v)", err)
	}
}

func TestFiles_Errors(t *testing.T) {
	f := newFixture(t, nil)
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	readTests := []struct {
		name, path string
		class      error
		message    string
	}{
		{"missing", filepath.Join(dir, "missing"), errdefs.ErrNotFound, "File not found: " + filepath.Join(dir, "missing")},
		{"under_a_file", filepath.Join(file, "x"), errdefs.ErrNotFound, "File not found: " + filepath.Join(file, "x")},
		{"directory", dir, errdefs.ErrInvalid, "Path is a directory: " + dir},
		{"fifo", fifo, errdefs.ErrInvalid, "Path is not a regular file: " + fifo},
		{"relative", "rel/path", errdefs.ErrInvalid, "Path must be absolute: rel/path"},
		{"dotdot", dir + "/../x", errdefs.ErrInvalid, "Path must not contain '..': " + dir + "/../x"},
		{"unclean", dir + "//x", errdefs.ErrInvalid, "Path must be clean: " + dir + "//x (use " + dir + "/x)"},
		{"empty", "", errdefs.ErrInvalid, "Path is required"},
	}
	for _, tt := range readTests {
		t.Run("read_"+tt.name, func(t *testing.T) {
			err := f.client.ReadFile(context.Background(), tt.path, io.Discard)
			if !errors.Is(err, tt.class) || err.Error() != tt.message {
				t.Errorf("ReadFile error got %v, want %q of class %v", err, tt.message, tt.class)
			}
		})
	}
	writeTests := []struct {
		name, path string
		class      error
		message    string
	}{
		{"directory", dir, errdefs.ErrInvalid, "Path is a directory: " + dir},
		{"under_a_file", filepath.Join(file, "x"), errdefs.ErrInvalid, "A parent of " + filepath.Join(file, "x") + " is not a directory"},
		{"relative", "x", errdefs.ErrInvalid, "Path must be absolute: x"},
	}
	for _, tt := range writeTests {
		t.Run("write_"+tt.name, func(t *testing.T) {
			err := f.client.WriteFile(context.Background(), tt.path, strings.NewReader("data"), 0)
			if !errors.Is(err, tt.class) || err.Error() != tt.message {
				t.Errorf("WriteFile error got %v, want %q of class %v", err, tt.message, tt.class)
			}
		})
	}
}
