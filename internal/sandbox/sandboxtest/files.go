package sandboxtest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/tools"
)

// RunFiles runs the files suite: the contract of Runtime.Files (see
// sandbox.Files) checked through the runtime's own Files and, where the
// result must agree with what commands see, through Exec. Each check is a
// subtest of its own and runs in parallel on a fresh conversation from
// h.New, whose spec must mount the office: a mount whose RuntimePath is
// the spec's OfficeRuntimePath (except in a mode whose runtime sees no
// host workspace, Capabilities.Workspace none, whose Files are rooted
// where the mode says).
//
// In the modes that project the door policy's mounts (managed, host), the
// suite adds mounts of its own next to the office: a directory mounted
// read-only, and MEMORY.md-like single files mounted read-write and
// read-only; their sources are made beside spec.OfficeDir on the host,
// which every such mode can mount (kube mounts sub-paths of the
// workspace).
//
// The commands it runs use POSIX sh and busybox applets only.
func RunFiles(t *testing.T, h Harness) {
	t.Helper()
	if h.New == nil {
		t.Fatal("sandboxtest.Harness.New is nil")
	}
	t.Run("checks", func(t *testing.T) {
		runParallel(t, h, []check{
			{"office_in_roots", testFilesOffice},
			{"write_seen_by_commands", testFilesWriteSeenByCommands},
			{"commands_seen_by_files", testFilesCommandsSeen},
			{"missing", testFilesMissing},
			{"paths_refused", testFilesPathsRefused},
			{"outside_refused", testFilesOutside},
			{"symlinks", testFilesSymlinks},
			{"large_and_paged", testFilesLarge},
			{"non_utf8_names", testFilesNonUTF8},
			{"permissions", testFilesPermissions},
			{"tools_relative", testFilesTools},
		})
	})
	// Last and alone: adding mounts re-creates a runtime that a harness
	// may share between checks (a microVM per suite).
	t.Run("mounts", func(t *testing.T) {
		rt, spec := h.New(t)
		testFilesMounts(t, rt, spec)
	})
}

// sh runs script in the runtime with sh -c and returns its stdout; a
// non-zero exit fails the test.
func sh(t *testing.T, rt sandbox.Runtime, spec sandbox.Spec, script string) string {
	t.Helper()
	o := run(t, rt, spec, sandbox.ExecRequest{Argv: []string{"sh", "-c", script}, Timeout: time.Minute})
	if o.res.ExitCode != 0 {
		t.Fatalf("%q exited %d: %s%s", script, o.res.ExitCode, o.stdout, o.stderr)
	}
	return o.stdout
}

// quote is s as one sh word.
func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// workDir makes a fresh directory under the Files' office, through Files,
// and returns its path as the runtime sees it.
func workDir(t *testing.T, f sandbox.Files) string {
	t.Helper()
	dir := path.Join(f.Office(), "files-"+unique())
	if err := f.WriteFile(t.Context(), dir+"/.keep", strings.NewReader(""), 0); err != nil {
		t.Fatalf("make %s: %v", dir, err)
	}
	return dir
}

// wantError fails unless err has class and exactly the text want.
func wantError(t *testing.T, what string, err error, class error, want string) {
	t.Helper()
	switch {
	case err == nil:
		t.Errorf("%s: no error; want %q", what, want)
	case !errors.Is(err, class):
		t.Errorf("%s: %v; want class %v", what, err, class)
	case err.Error() != want:
		t.Errorf("%s:\n got %q\nwant %q", what, err.Error(), want)
	}
}

// sum is the hex SHA-256 of b, as sha256sum prints it.
func sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// randomBytes returns n bytes that hold every byte value, NUL and
// invalid UTF-8 included.
func randomBytes(n int) []byte {
	b := make([]byte, n)
	var seed [32]byte
	seed[0] = byte(n)
	// One call, not one per byte: cheap under -race too.
	_, _ = rand.NewChaCha8(seed).Read(b) //nolint:gosec // G404: test data, the same on every run, not a secret
	for i := 0; i < 256 && i < n; i++ {
		b[i] = byte(i)
	}
	return b
}

func readAll(t *testing.T, f sandbox.Files, p string) ([]byte, error) {
	t.Helper()
	var buf bytes.Buffer
	err := f.ReadFile(t.Context(), p, &buf)
	return buf.Bytes(), err
}

func testFilesOffice(t *testing.T, rt sandbox.Runtime, spec sandbox.Spec) {
	f := rt.Files(spec)
	if rt.Capabilities().Workspace != sandbox.WorkspaceNone && f.Office() != spec.OfficeRuntimePath {
		t.Errorf("Office() = %q; want the spec's %q", f.Office(), spec.OfficeRuntimePath)
	}
	if _, err := tools.Resolve(toolSandbox{f, rt, spec}, "."); err != nil {
		t.Errorf("the office %q is not within the roots %q: %v", f.Office(), f.Roots(), err)
	}
	fi, err := f.Stat(t.Context(), f.Office())
	if err != nil || !fi.IsDir {
		t.Errorf("Stat(office) = %+v, %v; want a directory", fi, err)
	}
}

func testFilesWriteSeenByCommands(t *testing.T, rt sandbox.Runtime, spec sandbox.Spec) {
	f := rt.Files(spec)
	ctx := t.Context()
	dir := workDir(t, f)
	content := randomBytes(64 << 10)
	p := dir + "/new/deeper/data.bin" // missing parents are made
	if err := f.WriteFile(ctx, p, bytes.NewReader(content), 0); err != nil {
		t.Fatalf("WriteFile: %v", err)
	}
	if got := strings.Fields(sh(t, rt, spec, "sha256sum "+quote(p)+" && stat -c %a "+quote(p))); len(got) < 3 || got[0] != sum(content) || got[2] != "644" {
		t.Errorf("the command sees %q; want sha256 %s and mode 644", got, sum(content))
	}
	got, err := readAll(t, f, p)
	if err != nil || !bytes.Equal(got, content) {
		t.Errorf("ReadFile: %d bytes (%v); want the %d written, unchanged", len(got), err, len(content))
	}
	fi, err := f.Stat(ctx, p)
	if err != nil || fi.Size != int64(len(content)) || fi.IsDir || fi.Mode != 0o644 || fi.Name != "data.bin" {
		t.Errorf("Stat = %+v, %v", fi, err)
	}
	list, err := f.List(ctx, dir+"/new/deeper")
	if err != nil || len(list) != 1 || list[0].Name != "data.bin" {
		t.Errorf("List = %+v, %v", list, err)
	}
	// A second write replaces the content whole.
	if err := f.WriteFile(ctx, p, strings.NewReader("short"), 0); err != nil {
		t.Fatal(err)
	}
	if got := sh(t, rt, spec, "cat "+quote(p)); got != "short" {
		t.Errorf("after the second write the command reads %q", got)
	}
}

func testFilesCommandsSeen(t *testing.T, rt sandbox.Runtime, spec sandbox.Spec) {
	f := rt.Files(spec)
	ctx := t.Context()
	dir := workDir(t, f)
	sh(t, rt, spec, "cd "+quote(dir)+" && printf 'from a command\\n' > made.txt && mkdir sub && ln -s made.txt link && printf x > sub/b")
	got, err := readAll(t, f, dir+"/made.txt")
	if err != nil || string(got) != "from a command\n" {
		t.Errorf("ReadFile of what a command wrote: %q, %v", got, err)
	}
	fi, err := f.Stat(ctx, dir+"/link")
	if err != nil || fi.Link != "made.txt" || fi.Size != int64(len("from a command\n")) {
		t.Errorf("Stat(link) = %+v, %v; want the target's size and Link made.txt", fi, err)
	}
	list, err := f.List(ctx, dir)
	var names []string
	for _, e := range list {
		names = append(names, e.Name)
		if e.Name == "sub" && !e.IsDir || e.Name == "link" && e.Link != "made.txt" {
			t.Errorf("List entry %+v", e)
		}
	}
	if err != nil || strings.Join(names, " ") != ".keep link made.txt sub" {
		t.Errorf("List = %q, %v; want .keep link made.txt sub, sorted", names, err)
	}
	if _, err := readAll(t, f, dir+"/sub"); err == nil {
		t.Error("ReadFile of a directory succeeded")
	} else {
		wantError(t, "ReadFile(dir)", err, errdefs.ErrInvalid, "Path is a directory: "+dir+"/sub")
	}
}

func testFilesMissing(t *testing.T, rt sandbox.Runtime, spec sandbox.Spec) {
	f := rt.Files(spec)
	ctx := t.Context()
	p := workDir(t, f) + "/nothing-here"
	_, err := readAll(t, f, p)
	wantError(t, "ReadFile", err, errdefs.ErrNotFound, "File not found: "+p)
	_, err = f.Stat(ctx, p)
	wantError(t, "Stat", err, errdefs.ErrNotFound, "File not found: "+p)
	_, err = f.List(ctx, p)
	wantError(t, "List", err, errdefs.ErrNotFound, "File not found: "+p)
}

func testFilesPathsRefused(t *testing.T, rt sandbox.Runtime, spec sandbox.Spec) {
	f := rt.Files(spec)
	dir := workDir(t, f)
	for _, tc := range []struct{ p, want string }{
		{"relative.txt", "Path must be absolute: relative.txt"},
		{dir + "/../x", "Path must not contain '..': " + dir + "/../x"},
		{dir + "//x", "Path must be clean: " + dir + "//x (use " + dir + "/x)"},
		{dir + "/a\x00b", `Path contains a NUL byte: "` + dir + `/a\x00b"`},
	} {
		_, err := readAll(t, f, tc.p)
		wantError(t, "ReadFile("+strconv.Quote(tc.p)+")", err, errdefs.ErrInvalid, tc.want)
		err = f.WriteFile(t.Context(), tc.p, strings.NewReader("x"), 0)
		wantError(t, "WriteFile("+strconv.Quote(tc.p)+")", err, errdefs.ErrInvalid, tc.want)
	}
}

func testFilesOutside(t *testing.T, rt sandbox.Runtime, spec sandbox.Spec) {
	f := rt.Files(spec)
	ctx := t.Context()
	outside := func(p string) string { return "Path " + p + " is outside the sandbox's workspace" }
	_, err := readAll(t, f, "/etc/passwd")
	wantError(t, "ReadFile(/etc/passwd)", err, errdefs.ErrFailedPrecondition, outside("/etc/passwd"))
	_, err = f.Stat(ctx, "/etc")
	wantError(t, "Stat(/etc)", err, errdefs.ErrFailedPrecondition, outside("/etc"))
	_, err = f.List(ctx, "/")
	wantError(t, "List(/)", err, errdefs.ErrFailedPrecondition, outside("/"))
	p := "/tmp/hutch-files-" + unique()
	err = f.WriteFile(ctx, p, strings.NewReader("escaped"), 0)
	wantError(t, "WriteFile("+p+")", err, errdefs.ErrFailedPrecondition, outside(p))
	if got := sh(t, rt, spec, "cat "+quote(p)+" 2>/dev/null || echo absent"); got != "absent\n" {
		t.Errorf("a refused write left %s holding %q", p, got)
	}
}

func testFilesSymlinks(t *testing.T, rt sandbox.Runtime, spec sandbox.Spec) {
	f := rt.Files(spec)
	ctx := t.Context()
	dir := workDir(t, f)
	target := "/tmp/hutch-files-target-" + unique()
	t.Cleanup(func() {
		// In the modes that run on this machine, /tmp is this machine's.
		_, _ = rt.Exec(context.Background(), spec, sandbox.ExecRequest{Argv: []string{"rm", "-f", target}, Timeout: time.Minute})
	})
	sh(t, rt, spec, "printf secret > "+quote(target)+" && cd "+quote(dir)+
		" && mkdir in && printf inside > in/f && ln -s in/f inlink && ln -s in indir"+
		" && ln -s "+quote(target)+" out && ln -s /tmp outdir && ln -s "+quote(dir)+"/in/f abslink")
	outside := func(p string) string { return "Path " + p + " is outside the sandbox's workspace" }

	for _, p := range []string{dir + "/inlink", dir + "/indir/f", dir + "/abslink"} {
		if got, err := readAll(t, f, p); err != nil || string(got) != "inside" {
			t.Errorf("ReadFile(%s) through a link inside = %q, %v", p, got, err)
		}
	}
	// Writing through a link inside replaces the link, not its target.
	if err := f.WriteFile(ctx, dir+"/inlink", strings.NewReader("new"), 0); err != nil {
		t.Errorf("WriteFile over a link inside: %v", err)
	}
	if got := sh(t, rt, spec, "cat "+quote(dir+"/in/f")+"; [ -L "+quote(dir+"/inlink")+" ] && echo ' link' || echo ' file'"); got != "inside file\n" {
		t.Errorf("after writing over inlink: %q; want its target untouched and the link replaced by a file", got)
	}

	for _, p := range []string{dir + "/out", dir + "/outdir/" + path.Base(target)} {
		_, err := readAll(t, f, p)
		wantError(t, "ReadFile("+p+")", err, errdefs.ErrFailedPrecondition, outside(p))
		_, err = f.Stat(ctx, p)
		wantError(t, "Stat("+p+")", err, errdefs.ErrFailedPrecondition, outside(p))
	}
	_, err := f.List(ctx, dir+"/outdir")
	wantError(t, "List(outdir)", err, errdefs.ErrFailedPrecondition, outside(dir+"/outdir"))
	planted := "planted-" + unique()
	for _, p := range []string{dir + "/out", dir + "/outdir/" + planted} {
		err := f.WriteFile(ctx, p, strings.NewReader("escaped"), 0)
		wantError(t, "WriteFile("+p+")", err, errdefs.ErrFailedPrecondition, outside(p))
	}
	if got := sh(t, rt, spec, "cat "+quote(target)+"; ls /tmp/"+planted+" 2>/dev/null || true"); got != "secret" {
		t.Errorf("after refused writes the outside target holds %q (or /tmp/%s exists)", got, planted)
	}
}

func testFilesLarge(t *testing.T, rt sandbox.Runtime, spec sandbox.Spec) {
	f := rt.Files(spec)
	ctx := t.Context()
	dir := workDir(t, f)
	content := randomBytes(16 << 20)
	p := dir + "/large.bin"
	if err := f.WriteFile(ctx, p, bytes.NewReader(content), 0); err != nil {
		t.Fatalf("16 MiB WriteFile: %v", err)
	}
	if got := strings.Fields(sh(t, rt, spec, "sha256sum "+quote(p))); len(got) == 0 || got[0] != sum(content) {
		t.Errorf("the command's sha256 of the 16 MiB file: %q; want %s", got, sum(content))
	}
	h := sha256.New()
	if err := f.ReadFile(ctx, p, h); err != nil || hex.EncodeToString(h.Sum(nil)) != sum(content) {
		t.Errorf("ReadFile of the 16 MiB file: sha256 %x, %v", h.Sum(nil), err)
	}
	// A reader that stops early stops the read, with its own error.
	stop := errors.New("enough")
	if err := f.ReadFile(ctx, p, &failAfter{n: 1 << 20, err: stop}); !errors.Is(err, stop) {
		t.Errorf("ReadFile into a writer that fails: %v; want its error", err)
	}

	// Paged reads of a text file of 100,000 lines, through the read tool.
	var text strings.Builder
	for i := 1; i <= 100000; i++ {
		text.WriteString("line " + strconv.Itoa(i) + "\n")
	}
	if err := f.WriteFile(ctx, dir+"/lines.txt", strings.NewReader(text.String()), 0); err != nil {
		t.Fatal(err)
	}
	out, err := tools.Read(ctx, toolSandbox{f, rt, spec}, tools.ReadInput{Path: dir + "/lines.txt", Offset: 99998, Limit: 2})
	if want := "line 99998\nline 99999\n\n[Showing lines 99998-99999 of 100000. Use offset=100000 to continue]"; err != nil || out.Text != want {
		t.Errorf("paged read: %q, %v; want %q", out.Text, err, want)
	}
}

// failAfter accepts n bytes, then fails with err.
type failAfter struct {
	n   int
	err error
}

func (w *failAfter) Write(p []byte) (int, error) {
	if len(p) > w.n {
		n := w.n
		w.n = 0
		return n, w.err
	}
	w.n -= len(p)
	return len(p), nil
}

func testFilesNonUTF8(t *testing.T, rt sandbox.Runtime, spec sandbox.Spec) {
	f := rt.Files(spec)
	ctx := t.Context()
	dir := workDir(t, f)
	name := "caf\xe9-\xff.txt" // Latin-1, and a byte no encoding uses
	p := dir + "/" + name
	if err := f.WriteFile(ctx, p, strings.NewReader("bytes"), 0); err != nil {
		t.Fatalf("WriteFile(%q): %v", p, err)
	}
	if got := sh(t, rt, spec, "cd "+quote(dir)+" && for n in c*; do printf %s \"$n\"; done | od -An -c | tr -d ' \\n'"); !strings.Contains(got, `caf351-377.txt`) {
		t.Errorf("the command lists %q; want the name's exact bytes (caf\\351-\\377.txt)", got)
	}
	list, err := f.List(ctx, dir)
	if err != nil || len(list) != 2 || list[1].Name != name {
		t.Fatalf("List = %+v, %v; want .keep and %q, its bytes unchanged", list, err, name)
	}
	// What List named can be read back: the name made the round trip whole.
	if got, err := readAll(t, f, dir+"/"+list[1].Name); err != nil || string(got) != "bytes" {
		t.Errorf("ReadFile of the listed name: %q, %v", got, err)
	}
	sh(t, rt, spec, "cd "+quote(dir)+" && ln -s "+quote(name)+" link")
	if fi, err := f.Stat(ctx, dir+"/link"); err != nil || fi.Link != name {
		t.Errorf("Stat(link).Link = %q, %v; want %q", fi.Link, err, name)
	}
}

func testFilesPermissions(t *testing.T, rt sandbox.Runtime, spec sandbox.Spec) {
	f := rt.Files(spec)
	ctx := t.Context()
	dir := workDir(t, f)
	p := dir + "/private"
	if err := f.WriteFile(ctx, p, strings.NewReader("a"), 0o600); err != nil {
		t.Fatal(err)
	}
	mode := func() string { return strings.TrimSpace(sh(t, rt, spec, "stat -c %a "+quote(p))) }
	if fi, err := f.Stat(ctx, p); err != nil || fi.Mode != 0o600 || mode() != "600" {
		t.Errorf("after a write with 0600: Stat %+v, %v; the command sees %s", fi, err, mode())
	}
	// Mode 0 keeps the file's mode.
	if err := f.WriteFile(ctx, p, strings.NewReader("b"), 0); err != nil {
		t.Fatal(err)
	}
	if got := mode(); got != "600" {
		t.Errorf("a write with mode 0 changed 600 to %s", got)
	}
	sh(t, rt, spec, "chmod 751 "+quote(p))
	if err := f.WriteFile(ctx, p, strings.NewReader("c"), 0); err != nil {
		t.Fatal(err)
	}
	if got := mode(); got != "751" {
		t.Errorf("a write with mode 0 changed 751 to %s", got)
	}
	if err := f.WriteFile(ctx, p, strings.NewReader("d"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got := mode(); got != "755" {
		t.Errorf("a write with 0755 left %s", got)
	}
}

// testFilesTools runs the read, write and edit tools over the runtime's
// Files with relative paths, as an agent calls them.
func testFilesTools(t *testing.T, rt sandbox.Runtime, spec sandbox.Spec) {
	f := rt.Files(spec)
	ctx := t.Context()
	sb := toolSandbox{f, rt, spec}
	rel := "files-" + unique() + "/notes.md"
	if _, err := tools.Write(ctx, sb, tools.WriteInput{Path: rel, Content: "one\ntwo\n"}); err != nil {
		t.Fatalf("write tool: %v", err)
	}
	if _, err := tools.Edit(ctx, sb, tools.EditInput{Path: rel, OldText: "two", NewText: "zwei"}); err != nil {
		t.Fatalf("edit tool: %v", err)
	}
	out, err := tools.Read(ctx, sb, tools.ReadInput{Path: rel})
	if err != nil || out.Text != "one\nzwei" {
		t.Errorf("read tool: %q, %v", out.Text, err)
	}
	if got := sh(t, rt, spec, "cat "+quote(path.Join(f.Office(), rel))); got != "one\nzwei\n" {
		t.Errorf("the command reads %q", got)
	}
	up := strings.Repeat("../", 64) + "etc/passwd"
	_, err = tools.Read(ctx, sb, tools.ReadInput{Path: up})
	wantError(t, "read "+up, err, errdefs.ErrFailedPrecondition, "Path "+up+" is outside the sandbox's workspace")
}

// testFilesMounts checks read-only directory mounts and single-file
// mounts, read-write and read-only, in the modes that project mounts.
func testFilesMounts(t *testing.T, rt sandbox.Runtime, spec sandbox.Spec) {
	caps := rt.Capabilities()
	if caps.Workspace != sandbox.WorkspaceManaged && caps.Workspace != sandbox.WorkspaceHost {
		t.Skipf("Sandbox '%s' does not project mounts (workspace %s)", rt.Mode().Kind, caps.Workspace)
	}
	host := filepath.Dir(spec.OfficeDir)
	runtimeDir := path.Dir(spec.OfficeRuntimePath)
	u := unique()
	mount := func(name string, ro bool) (hostPath, runtimePath string) {
		hostPath = filepath.Join(host, name+"-"+u)
		runtimePath = path.Join(runtimeDir, name+"-"+u)
		if caps.Workspace == sandbox.WorkspaceHost {
			runtimePath = hostPath
		}
		spec.Mounts = append(spec.Mounts, sandbox.Mount{HostPath: hostPath, RuntimePath: runtimePath, ReadOnly: ro})
		return hostPath, runtimePath
	}
	roDirHost, roDir := mount("shared-ro", true)
	rwFileHost, rwFile := mount("MEMORY-rw.md", false)
	roFileHost, roFile := mount("MEMORY-ro.md", true)
	if err := os.Mkdir(roDirHost, 0o755); err != nil {
		t.Fatal(err)
	}
	for p, content := range map[string]string{filepath.Join(roDirHost, "skill.md"): "skill\n", rwFileHost: "memory\n", roFileHost: "fixed\n"} {
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		_ = os.RemoveAll(roDirHost)
		_ = os.Remove(rwFileHost)
		_ = os.Remove(roFileHost)
	})
	f := rt.Files(spec)
	ctx := t.Context()

	if got, err := readAll(t, f, roDir+"/skill.md"); err != nil || string(got) != "skill\n" {
		t.Errorf("ReadFile in the read-only mount: %q, %v", got, err)
	}
	// A single file mounted read-write is written (in place where it is
	// a mount point), and the host and commands see the new content.
	if err := f.WriteFile(ctx, rwFile, strings.NewReader("memory, rewritten\n"), 0); err != nil {
		t.Errorf("WriteFile of the single-file mount: %v", err)
	}
	if _, err := tools.Edit(ctx, toolSandbox{f, rt, spec}, tools.EditInput{Path: rwFile, OldText: "rewritten", NewText: "edited"}); err != nil {
		t.Errorf("edit of the single-file mount: %v", err)
	}
	if got := sh(t, rt, spec, "cat "+quote(rwFile)); got != "memory, edited\n" {
		t.Errorf("the command reads %q from the single-file mount", got)
	}
	if caps.Workspace == sandbox.WorkspaceHost {
		return // host mode enforces nothing read-only
	}
	syncs := rt.Mode().Kind == sandbox.KindGondolin // copies single files in and syncs them back
	if got, err := os.ReadFile(rwFileHost); !syncs && (err != nil || string(got) != "memory, edited\n") {
		t.Errorf("the host file holds %q, %v", got, err)
	}
	for _, p := range []string{roDir + "/skill.md", roDir + "/new.md", roFile} {
		err := f.WriteFile(ctx, p, strings.NewReader("changed"), 0)
		wantError(t, "WriteFile("+p+")", err, errdefs.ErrFailedPrecondition, "Cannot write "+p+": read-only file system")
	}
	if _, err := tools.Edit(ctx, toolSandbox{f, rt, spec}, tools.EditInput{Path: roFile, OldText: "fixed", NewText: "broken"}); !errdefs.IsFailedPrecondition(err) {
		t.Errorf("edit of the read-only single file: %v; want a refusal", err)
	}
	for p, want := range map[string]string{filepath.Join(roDirHost, "skill.md"): "skill\n", roFileHost: "fixed\n"} {
		if got, err := os.ReadFile(p); err != nil || string(got) != want {
			t.Errorf("the read-only source %s holds %q, %v; want it unchanged", p, got, err)
		}
	}
}

// toolSandbox is the tools' view of a conversation: its Files and its
// commands.
type toolSandbox struct {
	sandbox.Files
	rt   sandbox.Runtime
	spec sandbox.Spec
}

func (s toolSandbox) Exec(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	return s.rt.Exec(ctx, s.spec, req)
}
