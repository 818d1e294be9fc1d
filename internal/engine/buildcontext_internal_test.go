package engine

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hutchsandbox/hutch/internal/errdefs"
)

// entry is one tar entry as the tests compare it.
type entry struct {
	typ      byte
	link     string
	contents string
}

// tarOf makes the context of src and reads it back, failing the test if
// making it takes more than a few seconds (a FIFO opened for reading
// would block forever).
func tarOf(t *testing.T, src contextSource) (map[string]entry, []string, error) {
	t.Helper()
	var buf bytes.Buffer
	done := make(chan error, 1)
	go func() { done <- src.writeTo(&buf) }()
	select {
	case err := <-done:
		if err != nil {
			return nil, nil, err
		}
	case <-time.After(10 * time.Second):
		t.Fatal("making the build context did not finish within 10 s")
	}
	got := map[string]entry{}
	var order []string
	tr := tar.NewReader(&buf)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		got[h.Name] = entry{typ: h.Typeflag, link: h.Linkname, contents: string(data)}
		order = append(order, h.Name)
	}
	return got, order, nil
}

func write(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestContextTar_WhatTheSandboxPlanted: the files of a context are sent,
// links as links (never followed, even to a secret outside the project),
// sockets, FIFOs and device nodes are left out without being opened, and
// the Dockerfile that is built is the content given, not the file's.
func TestContextTar_WhatTheSandboxPlanted(t *testing.T) {
	root := t.TempDir()
	secret := filepath.Join(t.TempDir(), "secret")
	write(t, secret, "host secret")
	ctx := filepath.Join(root, ".devcontainer")
	write(t, filepath.Join(ctx, "Dockerfile"), "FROM planted-after-resolve\n")
	write(t, filepath.Join(ctx, "src", "main.go"), "package main\n")
	if err := os.Symlink(secret, filepath.Join(ctx, "link-out")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Dir(secret), filepath.Join(ctx, "dir-link")); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mkfifo(filepath.Join(ctx, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", filepath.Join(ctx, "sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	// A device node: what root inside a container can make in a bind
	// mount. Made where the test may (root); the rest holds without it.
	dev := unix.Mknod(filepath.Join(ctx, "null"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))) == nil

	got, order, err := tarOf(t, contextSource{Root: root, Dir: ctx, Dockerfile: []byte("FROM resolved\n"), DockerfileName: "Dockerfile"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]entry{
		"Dockerfile":  {typ: tar.TypeReg, contents: "FROM resolved\n"},
		"src/":        {typ: tar.TypeDir},
		"src/main.go": {typ: tar.TypeReg, contents: "package main\n"},
		"link-out":    {typ: tar.TypeSymlink, link: secret},
		"dir-link":    {typ: tar.TypeSymlink, link: filepath.Dir(secret)},
	}
	for name, w := range want {
		if g, ok := got[name]; !ok || g != w {
			t.Errorf("%s: got %+v (present %v), want %+v", name, g, ok, w)
		}
	}
	for _, unwanted := range []string{"fifo", "sock", "null", "dir-link/secret"} {
		if _, ok := got[unwanted]; ok {
			t.Errorf("the context holds %s", unwanted)
		}
	}
	if len(got) != len(want) {
		t.Errorf("entries %q, want only %d (device node made: %v)", order, len(want), dev)
	}
	if order[0] != "Dockerfile" {
		t.Errorf("the Dockerfile is not first: %q", order)
	}
}

// TestContextTar_LinkOnTheWay: a context reached through a link (one put
// in place of a directory of the project) is refused, not followed.
func TestContextTar_LinkOnTheWay(t *testing.T) {
	root := t.TempDir()
	outside := t.TempDir()
	write(t, filepath.Join(outside, "id_rsa"), "key")
	if err := os.Symlink(outside, filepath.Join(root, "ctx")); err != nil {
		t.Fatal(err)
	}
	_, _, err := tarOf(t, contextSource{Root: root, Dir: filepath.Join(root, "ctx"), Dockerfile: []byte("FROM x\n"), DockerfileName: "Dockerfile"})
	if !errdefs.IsFailedPrecondition(err) || !strings.Contains(err.Error(), "symbolic link") {
		t.Fatalf("err = %v, want a refusal of the link", err)
	}
	_, _, err = tarOf(t, contextSource{Root: root, Dir: filepath.Dir(root), Dockerfile: []byte("FROM x\n"), DockerfileName: "Dockerfile"})
	if !errdefs.IsInvalid(err) {
		t.Fatalf("a context outside the root: err = %v, want ErrInvalid", err)
	}
}

// TestContextTar_DockerIgnore: .dockerignore leaves out what it names,
// brings back its exceptions (inside an excluded directory too), and
// never leaves out the Dockerfile or itself; a Dockerfile from outside
// the context goes under a generated name that .dockerignore names, as
// the docker CLI sends it.
func TestContextTar_DockerIgnore(t *testing.T) {
	root := t.TempDir()
	write(t, filepath.Join(root, ".dockerignore"), "# deps\nnode_modules\n*.log\n.git\n!keep.log\nbuild\n!build/out/app\nDockerfile\n.dockerignore\n")
	for _, f := range []string{"node_modules/a/index.js", "x.log", "keep.log", ".git/HEAD", "build/tmp/o", "build/out/app", "build/out/junk", "main.go", "Dockerfile"} {
		write(t, filepath.Join(root, f), f)
	}
	got, _, err := tarOf(t, contextSource{Root: root, Dir: root, Dockerfile: []byte("FROM x\n"), DockerfileName: "Dockerfile"})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for n := range got {
		names = append(names, n)
	}
	slices.Sort(names)
	want := []string{".dockerignore", "Dockerfile", "build/out/app", "keep.log", "main.go"}
	if !slices.Equal(names, want) {
		t.Errorf("entries %q, want %q", names, want)
	}
	if got["Dockerfile"].contents != "FROM x\n" {
		t.Errorf("Dockerfile = %q", got["Dockerfile"].contents)
	}

	// From outside the context.
	df := filepath.Join(root, ".devcontainer", "Dockerfile")
	name, outside := dockerfileName(filepath.Join(root, "build"), df, []byte("FROM y\n"))
	if !outside || !strings.HasPrefix(name, ".dockerfile.") {
		t.Fatalf("dockerfileName = %q, %v", name, outside)
	}
	got, _, err = tarOf(t, contextSource{Root: root, Dir: filepath.Join(root, "build"), Dockerfile: []byte("FROM y\n"), DockerfileName: name, ExtraIgnore: name})
	if err != nil {
		t.Fatal(err)
	}
	if got[name].contents != "FROM y\n" || got[".dockerignore"].contents != "\n"+name+"\n" {
		t.Errorf("a Dockerfile from outside: %q = %q, .dockerignore = %q", name, got[name].contents, got[".dockerignore"].contents)
	}
	if n, outside := dockerfileName(root, filepath.Join(root, "sub", "Dockerfile.dev"), nil); outside || n != "sub/Dockerfile.dev" {
		t.Errorf("dockerfileName inside = %q, %v", n, outside)
	}
}

// TestContextTar_Cap: a context over its cap stops with an error that
// names .dockerignore as the fix.
func TestContextTar_Cap(t *testing.T) {
	root := t.TempDir()
	write(t, filepath.Join(root, "big"), strings.Repeat("x", 4096))
	_, _, err := tarOf(t, contextSource{Root: root, Dir: root, Dockerfile: []byte("FROM x\n"), DockerfileName: "Dockerfile", Max: 1000})
	if !errdefs.IsFailedPrecondition(err) || !strings.Contains(err.Error(), filepath.Join(root, ".dockerignore")) {
		t.Fatalf("err = %v, want the cap's error naming .dockerignore", err)
	}
	if got := errTooBig("/p", DefaultMaxContext).Error(); !strings.Contains(got, "more than 2 GiB") {
		t.Errorf("the cap's text: %q", got)
	}
}

// TestSendExactly: a file that grew while it was sent is sent at the size
// its header promised; one that shrank is an error, not a short entry.
func TestSendExactly(t *testing.T) {
	var out bytes.Buffer
	if err := sendExactly(&out, strings.NewReader("0123456789"), 4, "/p/f"); err != nil || out.String() != "0123" {
		t.Errorf("grown: %q, %v", out.String(), err)
	}
	err := sendExactly(io.Discard, strings.NewReader("01"), 4, "/p/f")
	if !errdefs.IsUnavailable(err) || !strings.Contains(err.Error(), "/p/f changed while hutch read it") {
		t.Errorf("shrunk: %v", err)
	}
}

// TestReadBuildFile: a Dockerfile is read beneath the project without
// following a link on the way or at its name, and a FIFO or missing file
// is refused without blocking.
func TestReadBuildFile(t *testing.T) {
	root := t.TempDir()
	write(t, filepath.Join(root, ".devcontainer", "Dockerfile"), "FROM x\n")
	if data, err := ReadBuildFile(root, filepath.Join(root, ".devcontainer", "Dockerfile")); err != nil || string(data) != "FROM x\n" {
		t.Fatalf("ReadBuildFile = %q, %v", data, err)
	}
	outside := t.TempDir()
	write(t, filepath.Join(outside, "Dockerfile"), "FROM secret\n")
	if err := os.Symlink(filepath.Join(outside, "Dockerfile"), filepath.Join(root, "linked")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(root, "dirlink")); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mkfifo(filepath.Join(root, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, class := range map[string]error{
		"linked": errdefs.ErrFailedPrecondition, "dirlink/Dockerfile": errdefs.ErrFailedPrecondition,
		"fifo": errdefs.ErrFailedPrecondition, "missing": errdefs.ErrNotFound,
	} {
		done := make(chan error, 1)
		go func() { _, err := ReadBuildFile(root, filepath.Join(root, name)); done <- err }()
		select {
		case err := <-done:
			if !errors.Is(err, class) {
				t.Errorf("%s: err = %v, want class %v", name, err, class)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: ReadBuildFile blocked", name)
		}
	}
}
