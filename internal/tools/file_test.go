package tools_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/tools"
)

func TestResolve(t *testing.T) {
	sb := newSandbox(t)
	sb.addRoot("/mnt/shared/")
	o := sb.office
	for _, tc := range []struct{ in, want string }{
		{"a.txt", o + "/a.txt"},
		{"./dir/../b.txt", o + "/b.txt"},
		{".", o},
		{o + "//c.txt", o + "/c.txt"},
		{"/mnt/shared", "/mnt/shared"},
		{"/mnt/shared/x/../y", "/mnt/shared/y"},
	} {
		got, err := tools.Resolve(sb, tc.in)
		if err != nil || got != tc.want {
			t.Errorf("Resolve(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	var texts []string
	for _, in := range []string{"../outside.txt", "/etc/passwd", o + "-sibling/x", "/mnt/sharedx", "/mnt/shared/../../etc", "a\x00b"} {
		_, err := tools.Resolve(sb, in)
		if !errdefs.IsFailedPrecondition(err) {
			t.Errorf("Resolve(%q) = %v, want class failed precondition", in, err)
			continue
		}
		texts = append(texts, strings.ReplaceAll(err.Error(), o, "<office>"))
	}
	golden(t, "resolve_outside", strings.Join(texts, "\n"))
	if _, err := tools.Resolve(sb, ""); !errdefs.IsInvalid(err) {
		t.Errorf("Resolve(\"\") = %v, want class invalid", err)
	}
}

// The tools refuse paths outside the roots before touching the sandbox,
// and the sandbox refuses symlinks that lead out.
func TestPathOutsideRoots(t *testing.T) {
	sb := newSandbox(t)
	ctx := context.Background()
	outside := filepath.Join(filepath.Dir(sb.office), "secret.txt")
	if err := os.WriteFile(outside, []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(sb.office, "link.txt")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"../secret.txt", outside, "link.txt"} {
		if _, err := tools.Read(ctx, sb, tools.ReadInput{Path: p}); !errdefs.IsFailedPrecondition(err) {
			t.Errorf("Read(%q) = %v", p, err)
		}
		if _, err := tools.Write(ctx, sb, tools.WriteInput{Path: p, Content: "x"}); !errdefs.IsFailedPrecondition(err) {
			t.Errorf("Write(%q) = %v", p, err)
		}
		if _, err := tools.Edit(ctx, sb, tools.EditInput{Path: p, OldText: "secret", NewText: "x"}); !errdefs.IsFailedPrecondition(err) {
			t.Errorf("Edit(%q) = %v", p, err)
		}
	}
	if b, _ := os.ReadFile(outside); string(b) != "secret" {
		t.Errorf("the file outside now holds %q", b)
	}
}

func TestWriteCreatesParents(t *testing.T) {
	sb := newSandbox(t)
	out, err := tools.Write(context.Background(), sb, tools.WriteInput{Path: "a/b/c.txt", Content: "héllo\n"})
	if err != nil {
		t.Fatal(err)
	}
	if got := sb.get(t, "a/b/c.txt"); got != "héllo\n" || out.Bytes != 7 {
		t.Errorf("wrote %q, reported %d bytes", got, out.Bytes)
	}
	golden(t, "write", out.Text)

	// Replacing keeps the mode.
	if err := os.Chmod(filepath.Join(sb.office, "a/b/c.txt"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := tools.Write(context.Background(), sb, tools.WriteInput{Path: "a/b/c.txt", Content: ""}); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(sb.office, "a/b/c.txt")); err != nil || fi.Mode().Perm() != 0o600 || fi.Size() != 0 {
		t.Errorf("after the second write: %v, %v", fi, err)
	}
}

const source = `package main

import "fmt"

func main() {
	fmt.Println("hello")
	fmt.Println("hello")
}

func other() {
	// nothing
}
`

func TestEdit(t *testing.T) {
	sb := newSandbox(t)
	sb.put(t, "main.go", []byte(source))
	ctx := context.Background()

	out, err := tools.Edit(ctx, sb, tools.EditInput{Path: "main.go", OldText: "\t// nothing\n", NewText: "\tfmt.Println(\"other\")\n\treturn\n"})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := sb.get(t, "main.go"), strings.Replace(source, "\t// nothing\n", "\tfmt.Println(\"other\")\n\treturn\n", 1); got != want {
		t.Errorf("file now:\n%s", got)
	}
	if out.Line != 11 {
		t.Errorf("first changed line %d, want 11", out.Line)
	}
	golden(t, "edit_ok", out.Text)

	// Deleting the first lines: the hunk starts at the top.
	out, err = tools.Edit(ctx, sb, tools.EditInput{Path: "main.go", OldText: "package main\n\n", NewText: ""})
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "edit_ok_delete", out.Text)

	var texts []string
	for _, in := range []tools.EditInput{
		{Path: "main.go", OldText: "fmt.Println(\"bye\")", NewText: "x"},
		{Path: "main.go", OldText: "fmt.Println(\"hello\")", NewText: "x"},
		{Path: "main.go", OldText: "main", NewText: "main"},
		{Path: "main.go", OldText: "", NewText: "x"},
	} {
		before := sb.get(t, "main.go")
		_, err := tools.Edit(ctx, sb, in)
		if !errdefs.IsInvalid(err) {
			t.Errorf("Edit(%+v) = %v, want class invalid", in, err)
			continue
		}
		if sb.get(t, "main.go") != before {
			t.Errorf("Edit(%+v) failed but changed the file", in)
		}
		texts = append(texts, err.Error())
	}
	golden(t, "edit_errors", strings.Join(texts, "\n"))

	if _, err := tools.Edit(ctx, sb, tools.EditInput{Path: "missing.go", OldText: "a", NewText: "b"}); !errdefs.IsNotFound(err) {
		t.Errorf("missing file: %v", err)
	}
}
