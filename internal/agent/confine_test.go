package agent

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/sandbox"
)

// secret is the content of the file outside the roots; no error may
// ever carry it.
const secret = "TOP-SECRET-do-not-leak-4f1c"

// confineTree is a workspace root, a file root and a place outside with
// symlinks between them.
type confineTree struct {
	base, ws, mem, out string
	roots              []string
}

func newConfineTree(t *testing.T) confineTree {
	t.Helper()
	base := t.TempDir()
	tr := confineTree{
		base: base,
		ws:   filepath.Join(base, "ws"),
		mem:  filepath.Join(base, "MEMORY.md"),
		out:  filepath.Join(base, "outside"),
	}
	tr.roots = []string{tr.ws, tr.mem}
	for _, d := range []string{tr.ws, filepath.Join(tr.ws, "sub"), tr.out, filepath.Join(base, "wsevil")} {
		mustMkdir(t, d)
	}
	mustWrite(t, filepath.Join(tr.ws, "file.txt"), "hello")
	mustWrite(t, tr.mem, "memory")
	mustWrite(t, filepath.Join(tr.out, "secret.txt"), secret)
	mustWrite(t, filepath.Join(base, "wsevil", "x"), secret)
	links := map[string]string{
		"escape":      filepath.Join(tr.out, "secret.txt"), // file out
		"escrel":      "../outside/secret.txt",             // file out, relative
		"escdir":      tr.out,                              // directory out
		"dangling":    filepath.Join(tr.out, "missing"),    // nothing, out
		"inlink":      "file.txt",                          // inside
		"tomem":       tr.mem,                              // into the other root
		"subdir":      "sub",                               // directory inside
		"viaoutside":  filepath.Join(tr.out, "back"),       // out and back in
		"loop":        "loop",
		"danglingin":  "not-yet",
		"evilsibling": "../wsevil/x",
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(tr.ws, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(tr.ws, "file.txt"), filepath.Join(tr.out, "back")); err != nil {
		t.Fatal(err)
	}
	return tr
}

func mustMkdir(t *testing.T, d string) {
	t.Helper()
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
}

func mustWrite(t *testing.T, p, s string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// fileOps are the four confined operations, run directly or through an
// agent.
type fileOps struct {
	read  func(p string, roots []string) (string, error)
	write func(p string, roots []string, content string) error
	stat  func(p string, roots []string) (sandbox.FileInfo, error)
	list  func(p string, roots []string) ([]sandbox.FileInfo, error)
}

func directOps() fileOps {
	return fileOps{
		read: func(p string, roots []string) (string, error) {
			var b bytes.Buffer
			err := ReadFileWithin(p, roots, &b)
			return b.String(), err
		},
		write: func(p string, roots []string, content string) error {
			return WriteFileWithin(p, roots, strings.NewReader(content), 0)
		},
		stat: StatWithin,
		list: ListWithin,
	}
}

func clientOps(t *testing.T) fileOps {
	c := newFixture(t, nil).client
	ctx := context.Background()
	return fileOps{
		read: func(p string, roots []string) (string, error) {
			var b bytes.Buffer
			err := c.ReadFileWithin(ctx, p, roots, &b)
			return b.String(), err
		},
		write: func(p string, roots []string, content string) error {
			return c.WriteFileWithin(ctx, p, roots, strings.NewReader(content), 0)
		},
		stat: func(p string, roots []string) (sandbox.FileInfo, error) { return c.Stat(ctx, p, roots) },
		list: func(p string, roots []string) ([]sandbox.FileInfo, error) { return c.List(ctx, p, roots) },
	}
}

func TestConfine_Direct(t *testing.T) { testConfine(t, directOps()) }

func TestConfine_ThroughAgent(t *testing.T) { testConfine(t, clientOps(t)) }

func testConfine(t *testing.T, ops fileOps) {
	tr := newConfineTree(t)
	ws := func(rel string) string { return filepath.Join(tr.ws, rel) }
	var errTexts []string
	wantErr := func(t *testing.T, err error, class error, msg string) {
		t.Helper()
		if err != nil {
			errTexts = append(errTexts, err.Error())
		}
		if !errors.Is(err, class) || err.Error() != msg {
			t.Errorf("error got %v, want %q of class %v", err, msg, class)
		}
	}
	outsideMsg := func(p string) string { return "Path " + p + " is outside the sandbox's workspace" }

	t.Run("allowed", func(t *testing.T) {
		reads := map[string]string{
			ws("file.txt"):   "hello",
			tr.mem:           "memory", // a file root
			ws("inlink"):     "hello",
			ws("tomem"):      "memory", // a symlink into another root
			ws("viaoutside"): "hello",  // leaves and comes back: the real path counts
		}
		for p, want := range reads {
			if got, err := ops.read(p, tr.roots); err != nil || got != want {
				t.Errorf("read %s got %q, %v; want %q", p, got, err, want)
			}
		}
		if err := ops.write(tr.mem, tr.roots, "new memory"); err != nil {
			t.Errorf("write file root: %v", err)
		}
		if got, _ := os.ReadFile(tr.mem); string(got) != "new memory" {
			t.Errorf("file root got %q", got)
		}
		deep := ws("a/b/c/new.txt")
		if err := ops.write(deep, tr.roots, "deep"); err != nil {
			t.Errorf("write with parents: %v", err)
		}
		if got, _ := os.ReadFile(deep); string(got) != "deep" {
			t.Errorf("%s got %q", deep, got)
		}
		if fi, err := os.Stat(ws("a/b")); err != nil || fi.Mode().Perm() != 0o755 {
			t.Errorf("created parent: %v, %v", fi, err)
		}
		if err := ops.write(ws("subdir/via-link.txt"), tr.roots, "x"); err != nil {
			t.Errorf("write through a directory symlink inside: %v", err)
		}
		if _, err := os.Stat(ws("sub/via-link.txt")); err != nil {
			t.Errorf("write through subdir: %v", err)
		}
		if err := ops.write(ws("danglingin"), tr.roots, "made"); err != nil {
			t.Errorf("write over a dangling symlink inside: %v", err)
		}
		fi, err := ops.stat(ws("inlink"), tr.roots)
		if err != nil || fi.Name != "inlink" || fi.Size != 5 || fi.IsDir || !fi.Mode.IsRegular() || fi.Link != "file.txt" {
			t.Errorf("stat inlink got %+v, %v", fi, err)
		}
		fi, err = ops.stat(tr.ws, tr.roots)
		if err != nil || !fi.IsDir || !fi.Mode.IsDir() || fi.Name != "ws" {
			t.Errorf("stat root got %+v, %v", fi, err)
		}
		if fi, err := ops.stat(tr.mem, tr.roots); err != nil || fi.Size != int64(len("new memory")) {
			t.Errorf("stat file root got %+v, %v", fi, err)
		}
		if _, err := ops.list(ws("subdir"), tr.roots); err != nil {
			t.Errorf("list a directory symlink inside: %v", err)
		}
	})

	t.Run("list_reports_symlinks", func(t *testing.T) {
		infos, err := ops.list(tr.ws, tr.roots)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		byName := map[string]sandbox.FileInfo{}
		for _, fi := range infos {
			names = append(names, fi.Name)
			byName[fi.Name] = fi
		}
		if !slices.IsSorted(names) {
			t.Errorf("names not sorted: %v", names)
		}
		for name, link := range map[string]string{
			"escape": filepath.Join(tr.out, "secret.txt"),
			"escdir": tr.out,
			"subdir": "sub",
		} {
			fi, ok := byName[name]
			if !ok || fi.Link != link || fi.Mode&os.ModeSymlink == 0 || fi.IsDir {
				t.Errorf("entry %s got %+v (listed: %v), want a symlink to %s, not followed", name, fi, ok, link)
			}
		}
		if fi := byName["sub"]; !fi.IsDir || fi.Link != "" {
			t.Errorf("entry sub got %+v, want a directory", fi)
		}
		if fi := byName["file.txt"]; fi.Size != 5 || !fi.Mode.IsRegular() {
			t.Errorf("entry file.txt got %+v", fi)
		}
	})

	t.Run("refused_outside", func(t *testing.T) {
		secretPath := filepath.Join(tr.out, "secret.txt")
		for _, tt := range []struct{ name, path string }{
			{"absolute", secretPath},
			{"symlink_to_file", ws("escape")},
			{"relative_symlink", ws("escrel")},
			{"through_dir_symlink", ws("escdir/secret.txt")},
			{"dir_symlink", ws("escdir")},
			{"dangling_symlink", ws("dangling")},
			{"symlink_to_prefix_sibling", ws("evilsibling")},
			{"prefix_sibling", filepath.Join(tr.base, "wsevil")},
			{"roots_parent", tr.base},
			{"next_to_file_root", filepath.Join(tr.base, "other.md")},
			{"slash", "/"},
		} {
			t.Run("read_"+tt.name, func(t *testing.T) {
				got, err := ops.read(tt.path, tr.roots)
				wantErr(t, err, errdefs.ErrFailedPrecondition, outsideMsg(tt.path))
				if got != "" {
					t.Errorf("read %d bytes", len(got))
				}
			})
			t.Run("stat_"+tt.name, func(t *testing.T) {
				_, err := ops.stat(tt.path, tr.roots)
				wantErr(t, err, errdefs.ErrFailedPrecondition, outsideMsg(tt.path))
			})
			t.Run("list_"+tt.name, func(t *testing.T) {
				_, err := ops.list(tt.path, tr.roots)
				wantErr(t, err, errdefs.ErrFailedPrecondition, outsideMsg(tt.path))
			})
		}
		for _, tt := range []struct{ name, path string }{
			{"absolute", secretPath},
			{"symlink_to_file", ws("escape")},
			{"dangling_symlink", ws("dangling")},
			{"new_file_under_dir_symlink", ws("escdir/new.txt")},
			{"new_parents_under_dir_symlink", ws("escdir/deep/er/new.txt")},
			{"next_to_file_root", filepath.Join(tr.base, "x.md")},
			{"prefix_sibling", filepath.Join(tr.base, "wsevil", "y")},
			{"new_parents_outside", filepath.Join(tr.out, "new", "x")},
			{"slash", "/"},
		} {
			t.Run("write_"+tt.name, func(t *testing.T) {
				err := ops.write(tt.path, tr.roots, "pwned")
				wantErr(t, err, errdefs.ErrFailedPrecondition, outsideMsg(tt.path))
			})
		}
		if got, _ := os.ReadFile(secretPath); string(got) != secret {
			t.Errorf("secret got %q", got)
		}
		for _, p := range []string{"new.txt", "deep", "new", "missing"} {
			if _, err := os.Lstat(filepath.Join(tr.out, p)); err == nil {
				t.Errorf("%s was created outside", p)
			}
		}
		for _, name := range []string{"escape", "dangling"} {
			if fi, err := os.Lstat(ws(name)); err != nil || fi.Mode()&os.ModeSymlink == 0 {
				t.Errorf("%s was replaced: %v", name, err)
			}
		}
		if _, err := os.Stat(filepath.Join(tr.base, "x.md")); err == nil {
			t.Error("x.md was created next to the file root")
		}
	})

	t.Run("other_errors", func(t *testing.T) {
		tests := []struct {
			name, path string
			class      error
			msg        string
		}{
			{"relative", "ws/file.txt", errdefs.ErrInvalid, "Path must be absolute: ws/file.txt"},
			{"dotdot", tr.ws + "/../outside/secret.txt", errdefs.ErrInvalid, "Path must not contain '..': " + tr.ws + "/../outside/secret.txt"},
			{"unclean", tr.ws + "/./file.txt", errdefs.ErrInvalid, "Path must be clean: " + tr.ws + "/./file.txt (use " + ws("file.txt") + ")"},
			{"missing", ws("missing"), errdefs.ErrNotFound, "File not found: " + ws("missing")},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				_, err := ops.read(tt.path, tr.roots)
				wantErr(t, err, tt.class, tt.msg)
				_, err = ops.stat(tt.path, tr.roots)
				wantErr(t, err, tt.class, tt.msg)
				_, err = ops.list(tt.path, tr.roots)
				wantErr(t, err, tt.class, tt.msg)
				if tt.class != errdefs.ErrNotFound {
					wantErr(t, ops.write(tt.path, tr.roots, "x"), tt.class, tt.msg)
				}
			})
		}
		_, err := ops.list(ws("file.txt"), tr.roots)
		wantErr(t, err, errdefs.ErrInvalid, "Path is not a directory: "+ws("file.txt"))
		_, err = ops.read(tr.ws, tr.roots)
		wantErr(t, err, errdefs.ErrInvalid, "Path is a directory: "+tr.ws)
		_, err = ops.read(ws("file.txt"), []string{"rel"})
		wantErr(t, err, errdefs.ErrInvalid, "Root is not valid: Path must be absolute: rel")
	})

	t.Run("unconfined_without_roots", func(t *testing.T) {
		if got, err := ops.read(ws("escape"), nil); err != nil || got != secret {
			t.Errorf("read without roots got %v", err) // never print the content
		}
	})

	for _, text := range errTexts {
		if strings.Contains(text, secret) {
			t.Errorf("an error carries the secret: %q", text)
		}
	}
}

// TestConfine_RecheckAfterSwap swaps a checked parent for a symlink out
// between the name check and the open: the opened file's real path, or
// the walk that never follows a symlink, still refuses.
func TestConfine_RecheckAfterSwap(t *testing.T) {
	tr := newConfineTree(t)
	sub := filepath.Join(tr.ws, "sub")
	mustWrite(t, filepath.Join(sub, "f"), "inside")
	mustWrite(t, filepath.Join(tr.out, "f"), secret)
	p := filepath.Join(sub, "f")

	c, err := confine("read", p, tr.roots)
	if err != nil {
		t.Fatal(err)
	}
	dir, _, err := resolvePath(sub)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(sub, sub+".old"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(tr.out, sub); err != nil {
		t.Fatal(err)
	}

	if _, _, err := c.openPath("read", p); !errdefs.IsFailedPrecondition(err) || err.Error() != "Path "+p+" is outside the sandbox's workspace" {
		t.Errorf("open after the swap got %v, want the outside refusal", err)
	}
	if fd, err := c.walkDir(dir, p); err == nil {
		t.Errorf("the walk to the write's parent followed the swapped symlink (fd %d)", fd)
	}
	if got, _ := os.ReadFile(filepath.Join(tr.out, "f")); string(got) != secret {
		t.Errorf("outside file changed: %q", got)
	}
}

// TestConfine_SymlinkedFileRoot: a root that is itself a symlink to a
// file is read through and may be replaced by a write.
func TestConfine_SymlinkedFileRoot(t *testing.T) {
	tr := newConfineTree(t)
	realMem := filepath.Join(tr.base, "real-memory.md")
	mustWrite(t, realMem, "real")
	alias := filepath.Join(tr.base, "alias.md")
	if err := os.Symlink(realMem, alias); err != nil {
		t.Fatal(err)
	}
	roots := []string{tr.ws, alias}
	var b bytes.Buffer
	if err := ReadFileWithin(alias, roots, &b); err != nil || b.String() != "real" {
		t.Errorf("read got %q, %v", b.String(), err)
	}
	if err := ReadFileWithin(realMem, roots, io.Discard); err != nil {
		t.Errorf("read of the root's target by its real name: %v", err)
	}
	if err := WriteFileWithin(alias, roots, strings.NewReader("new"), 0); err != nil {
		t.Errorf("write: %v", err)
	}
	if got, _ := os.ReadFile(alias); string(got) != "new" {
		t.Errorf("after write got %q", got)
	}
	err := WriteFileWithin(filepath.Join(tr.base, "other.md"), roots, strings.NewReader("x"), 0)
	if !errdefs.IsFailedPrecondition(err) {
		t.Errorf("write next to the root got %v, want the outside refusal", err)
	}
}

// TestResolvePath pins how names resolve, missing parts included.
func TestResolvePath(t *testing.T) {
	tr := newConfineTree(t)
	real := func(p string) string {
		r, err := filepath.EvalSymlinks(p)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	ws, out := real(tr.ws), real(tr.out)
	tests := map[string]string{
		filepath.Join(tr.ws, "file.txt"):     filepath.Join(ws, "file.txt"),
		filepath.Join(tr.ws, "new/a/b"):      filepath.Join(ws, "new/a/b"),
		filepath.Join(tr.ws, "escdir/new/x"): filepath.Join(out, "new/x"),
		filepath.Join(tr.ws, "dangling"):     filepath.Join(out, "missing"),
		filepath.Join(tr.ws, "escrel"):       filepath.Join(out, "secret.txt"),
		filepath.Join(tr.ws, "subdir/x"):     filepath.Join(ws, "sub/x"),
		filepath.Join(tr.ws, "viaoutside"):   filepath.Join(ws, "file.txt"),
		filepath.Join(tr.ws, "danglingin"):   filepath.Join(ws, "not-yet"),
		filepath.Join(tr.ws, "evilsibling"):  filepath.Join(real(tr.base), "wsevil/x"),
		"/":                                  "/",
	}
	for p, want := range tests {
		got, _, err := resolvePath(p)
		if err != nil || got != want {
			t.Errorf("resolvePath(%s) got %q, %v; want %q", p, got, err, want)
		}
	}
	if _, _, err := resolvePath(filepath.Join(tr.ws, "loop")); err == nil {
		t.Error("a symlink loop resolved")
	}
}
