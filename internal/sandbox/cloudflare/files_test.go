package cloudflare_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hutchsandbox/hutch/internal/agent"
	"github.com/hutchsandbox/hutch/internal/bridge/protocol"
	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/sandbox/cloudflare"
)

// localBridge is a bridge whose /exec runs each command here, with a
// POSIX shell, and answers once it ended (the base answer). It advertises
// the extensions it is given, of which it honours argv and stdin. The
// scripts of Files take every path as an argument, so tests use real
// absolute temp paths as roots where a runtime would have /workspace.
type localBridge struct {
	extensions []string
	// shell runs `command` (with -c) and stands for "sh" in argv.
	shell string
	// path is the commands' PATH.
	path string
	// fail, when set, answers the nth exec (from 1) with a 500, without
	// running it.
	fail func(n int) bool

	n  atomic.Int32
	mu sync.Mutex // guards the following
	// execs are the requests, in order.
	execs []protocol.ExecRequest
}

func (b *localBridge) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/health":
		if b.extensions == nil {
			_, _ = fmt.Fprint(w, "ok") // a base bridge
			return
		}
		writeJSON(w, http.StatusOK, protocol.Health{OK: true, Bridge: "local", Extensions: b.extensions})
	case "/exec":
		var req protocol.ExecRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
			return
		}
		b.mu.Lock()
		b.execs = append(b.execs, req)
		b.mu.Unlock()
		if n := int(b.n.Add(1)); b.fail != nil && b.fail(n) {
			writeJSON(w, http.StatusInternalServerError, map[string]string{"error": fmt.Sprintf("injected failure of exec %d", n)})
			return
		}
		var argv []string
		switch {
		case req.Command != "":
			argv = []string{b.shell, "-c", req.Command}
		case len(req.Argv) > 0 && slices.Contains(b.extensions, cloudflare.ExtArgv):
			argv = slices.Clone(req.Argv)
			if argv[0] == "sh" {
				argv[0] = b.shell
			}
		default:
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "command is required"})
			return
		}
		cmd := exec.CommandContext(r.Context(), argv[0], argv[1:]...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
		cmd.WaitDelay = time.Second
		cmd.Dir = req.Cwd
		cmd.Env = []string{"PATH=" + b.path}
		for k, v := range req.Env {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		if req.Stdin != "" {
			if !slices.Contains(b.extensions, cloudflare.ExtStdin) {
				writeJSON(w, http.StatusBadRequest, map[string]string{"error": "stdin is not an extension of this bridge"})
				return
			}
			in, err := base64.StdEncoding.DecodeString(req.Stdin)
			if err != nil {
				writeJSON(w, http.StatusBadRequest, map[string]string{"error": "stdin is not base64"})
				return
			}
			cmd.Stdin = bytes.NewReader(in)
		}
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		var exitErr *exec.ExitError
		if err != nil && !errors.As(err, &exitErr) {
			writeJSON(w, http.StatusOK, protocol.ExecResponse{Code: -1, Error: err.Error()})
			return
		}
		writeJSON(w, http.StatusOK, protocol.ExecResponse{Stdout: stdout.String(), Stderr: stderr.String(), Code: cmd.ProcessState.ExitCode()})
	default:
		http.NotFound(w, r)
	}
}

func (b *localBridge) requests() []protocol.ExecRequest {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.execs)
}

// busyboxApplets are the commands Files' scripts run.
var busyboxApplets = []string{"sh", "readlink", "stat", "base64", "mkdir", "mv", "chmod", "chown", "cat", "rm", "printf", "echo"}

// startLocal starts b in the flavour named: "gnu" runs /bin/sh with this
// host's PATH (GNU coreutils); "busybox" runs busybox's sh with only
// busybox's applets on PATH, as in a busybox image.
func startLocal(t *testing.T, flavour string, b *localBridge) *cloudflare.Runtime {
	t.Helper()
	switch flavour {
	case "gnu":
		b.shell, b.path = "/bin/sh", os.Getenv("PATH")
	case "busybox":
		bb, err := exec.LookPath("busybox")
		if err != nil {
			t.Skipf("busybox not found (hack/test-deps installs it): %v", err)
		}
		bin := t.TempDir()
		for _, a := range busyboxApplets {
			if err := os.Symlink(bb, filepath.Join(bin, a)); err != nil {
				t.Fatal(err)
			}
		}
		b.shell, b.path = filepath.Join(bin, "sh"), bin
	default:
		t.Fatalf("unknown flavour %q", flavour)
	}
	srv := httptest.NewServer(b)
	t.Cleanup(srv.Close)
	rt, err := cloudflare.New(cloudflare.Config{SandboxID: "box", URL: srv.URL, HTTPClient: srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	return rt
}

// bridgeVariants are the bridges every file test runs against: GNU and
// busybox, each as a base bridge (content in base64 chunks) and with the
// stdin extension; and GNU with argv and stdin.
var bridgeVariants = []struct {
	name       string
	flavour    string
	extensions []string
}{
	{"gnu_base", "gnu", nil},
	{"gnu_stdin", "gnu", []string{cloudflare.ExtStdin}},
	{"gnu_argv_stdin", "gnu", []string{cloudflare.ExtArgv, cloudflare.ExtStdin}},
	{"busybox_base", "busybox", nil},
	{"busybox_stdin", "busybox", []string{cloudflare.ExtStdin}},
}

// fileTree is a root, a place outside it, and symlinks between them (as
// internal/agent's confinement tests build).
type fileTree struct {
	base, ws, out string
	roots         []string
}

// secret is the content of the file outside the root; no answer may
// ever carry it.
const secret = "TOP-SECRET-outside-the-root"

func newFileTree(t *testing.T) fileTree {
	t.Helper()
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	tr := fileTree{base: base, ws: filepath.Join(base, "ws"), out: filepath.Join(base, "out")}
	tr.roots = []string{tr.ws}
	for _, d := range []string{tr.ws, tr.ws + "/sub", tr.out, base + "/wsevil"} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for p, content := range map[string]string{
		tr.ws + "/file.txt":        "hello",
		tr.ws + "/sub/inner.txt":   "inner",
		tr.out + "/secret.txt":     secret,
		base + "/wsevil/x":         secret,
		tr.ws + "/.hidden":         "h",
		tr.ws + "/..dots":          "d",
		tr.ws + "/-dash":           "-",
		tr.ws + "/*":               "star",
		tr.ws + "/new\nline |x":    "nl",
		tr.ws + "/ünï code":        "u",
		tr.ws + "/it's \"quoted\"": "q",
	} {
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	links := map[string]string{
		"escape":      tr.out + "/secret.txt", // file out
		"escrel":      "../out/secret.txt",    // file out, relative
		"escdir":      tr.out,                 // directory out
		"dangling":    tr.out + "/missing",    // nothing, out
		"inlink":      "file.txt",             // inside
		"subdir":      "sub",                  // directory inside
		"viaoutside":  tr.out + "/back",       // out and back in
		"loop":        "loop",
		"danglingin":  "not-yet",
		"evilsibling": "../wsevil/x",
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(tr.ws, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(tr.ws+"/file.txt", tr.out+"/back"); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(tr.ws+"/fifo", 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(tr.ws+"/fifo", 0o644); err != nil { // whatever the umask
		t.Fatal(err)
	}
	return tr
}

// errText renders an error with its class, for comparisons.
func errText(err error) string {
	if err == nil {
		return "<nil>"
	}
	for _, class := range []error{errdefs.ErrNotFound, errdefs.ErrInvalid, errdefs.ErrConflict, errdefs.ErrNotSupported, errdefs.ErrUnavailable, errdefs.ErrFailedPrecondition} {
		if errors.Is(err, class) {
			return fmt.Sprintf("[%v] %s", class, err)
		}
	}
	return "[unclassed] " + err.Error()
}

// seconds drops what a one-second modification time cannot show.
func seconds(fi sandbox.FileInfo) sandbox.FileInfo {
	fi.ModTime = fi.ModTime.Truncate(time.Second)
	return fi
}

// allBytes is n bytes that hold every byte value.
func allBytes(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i/256)
	}
	return b
}

// TestFiles_AgentParity reads, stats and lists every kind of path of a
// tree through the bridge and through internal/agent's confined functions
// here, and wants the same answers: the same bytes, the same FileInfo (to
// the second), the same error class and text.
func TestFiles_AgentParity(t *testing.T) {
	t.Parallel()
	for _, v := range bridgeVariants {
		t.Run(v.name, func(t *testing.T) {
			t.Parallel()
			files := startLocal(t, v.flavour, &localBridge{extensions: v.extensions}).RemoteFiles(spec)
			tr := newFileTree(t)
			paths := []string{
				tr.ws, tr.ws + "/file.txt", tr.ws + "/sub", tr.ws + "/sub/inner.txt", tr.ws + "/missing",
				tr.ws + "/missing/deeper", tr.ws + "/file.txt/x", tr.ws + "/fifo", tr.ws + "/.hidden",
				tr.ws + "/new\nline |x", tr.ws + "/*", tr.ws + "/-dash",
				tr.ws + "/escape", tr.ws + "/escrel", tr.ws + "/escdir", tr.ws + "/escdir/secret.txt",
				tr.ws + "/dangling", tr.ws + "/inlink", tr.ws + "/subdir", tr.ws + "/subdir/inner.txt",
				tr.ws + "/viaoutside", tr.ws + "/danglingin", tr.ws + "/evilsibling",
				tr.out, tr.out + "/secret.txt", tr.out + "/missing", tr.base, "/",
				tr.ws + "/../out/secret.txt", tr.ws + "/./file.txt", "relative.txt",
			}
			for _, p := range paths {
				var got, want bytes.Buffer
				gerr := files.ReadFileWithin(t.Context(), p, tr.roots, &got)
				werr := agent.ReadFileWithin(p, tr.roots, &want)
				if errText(gerr) != errText(werr) || got.String() != want.String() {
					t.Errorf("read %q: got %q, %s; the agent: %q, %s", p, got.String(), errText(gerr), want.String(), errText(werr))
				}
				gfi, gerr := files.Stat(t.Context(), p, tr.roots)
				wfi, werr := agent.StatWithin(p, tr.roots)
				if errText(gerr) != errText(werr) {
					t.Errorf("stat %q: got %s; the agent: %s", p, errText(gerr), errText(werr))
				} else if diff := cmp.Diff(seconds(wfi), gfi); diff != "" {
					t.Errorf("stat %q mismatch (-agent +bridge):\n%s", p, diff)
				}
				glist, gerr := files.List(t.Context(), p, tr.roots)
				wlist, werr := agent.ListWithin(p, tr.roots)
				for i := range wlist {
					wlist[i] = seconds(wlist[i])
				}
				if errText(gerr) != errText(werr) {
					t.Errorf("list %q: got %s; the agent: %s", p, errText(gerr), errText(werr))
				} else if diff := cmp.Diff(wlist, glist); werr == nil && diff != "" {
					t.Errorf("list %q mismatch (-agent +bridge):\n%s", p, diff)
				}
				for _, s := range []string{got.String(), errText(gerr)} {
					if strings.Contains(s, secret) {
						t.Errorf("%q: an answer carries the secret: %q", p, s)
					}
				}
			}
			// Without roots nothing is confined, as with the agent.
			var got bytes.Buffer
			if err := files.ReadFileWithin(t.Context(), tr.ws+"/escape", nil, &got); err != nil || got.String() != secret {
				t.Errorf("read without roots: %q, %v; want the file", got.String(), err)
			}
		})
	}
}

// TestFiles_Errors pins the texts of the refusals, and what the agent
// says differently.
func TestFiles_Errors(t *testing.T) {
	t.Parallel()
	files := startLocal(t, "gnu", &localBridge{}).RemoteFiles(spec)
	tr := newFileTree(t)
	outside := func(p string) string {
		return "[failed precondition] Path " + p + " is outside the sandbox's workspace"
	}
	ctx := t.Context()
	read := func(p string) error { return files.ReadFileWithin(ctx, p, tr.roots, io.Discard) }
	write := func(p string) error {
		return files.WriteFileWithin(ctx, p, tr.roots, strings.NewReader("x"), 0)
	}
	list := func(p string) error { _, err := files.List(ctx, p, tr.roots); return err }
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"read_missing", read(tr.ws + "/missing"), "[not found] File not found: " + tr.ws + "/missing"},
		{"read_dir", read(tr.ws + "/sub"), "[invalid argument] Path is a directory: " + tr.ws + "/sub"},
		{"read_fifo", read(tr.ws + "/fifo"), "[invalid argument] Path is not a regular file: " + tr.ws + "/fifo"},
		{"read_escape", read(tr.ws + "/escape"), outside(tr.ws + "/escape")},
		{"read_escape_dir", read(tr.ws + "/escdir/secret.txt"), outside(tr.ws + "/escdir/secret.txt")},
		{"read_outside_missing", read(tr.out + "/missing"), outside(tr.out + "/missing")},
		{"read_dotdot", read(tr.ws + "/../out/secret.txt"), "[invalid argument] Path must not contain '..': " + tr.ws + "/../out/secret.txt"},
		{"read_relative", read("file.txt"), "[invalid argument] Path must be absolute: file.txt"},
		{"read_loop", read(tr.ws + "/loop"), "[invalid argument] Path " + tr.ws + "/loop cannot be resolved: it leads through a symlink loop, or through '..' after a missing directory"},
		{"list_file", list(tr.ws + "/file.txt"), "[invalid argument] Path is not a directory: " + tr.ws + "/file.txt"},
		{"write_dir", write(tr.ws + "/sub"), "[invalid argument] Path is a directory: " + tr.ws + "/sub"},
		{"write_slash", write("/"), outside("/")},
		{"write_slash_root", files.WriteFileWithin(ctx, "/", []string{"/"}, strings.NewReader("x"), 0), "[invalid argument] Path is a directory: /"},
		{"write_parent_file", write(tr.ws + "/file.txt/x"), "[invalid argument] A parent of " + tr.ws + "/file.txt/x is not a directory"},
		{"write_escape", write(tr.ws + "/escape"), outside(tr.ws + "/escape")},
		{"write_escape_relative", write(tr.ws + "/escrel"), outside(tr.ws + "/escrel")},
		{"write_escape_dir", write(tr.ws + "/escdir/new.txt"), outside(tr.ws + "/escdir/new.txt")},
		{"write_dangling_out", write(tr.ws + "/dangling"), outside(tr.ws + "/dangling")},
		{"write_outside", write(tr.out + "/new.txt"), outside(tr.out + "/new.txt")},
		{"write_dotdot", write(tr.ws + "/../out/new.txt"), "[invalid argument] Path must not contain '..': " + tr.ws + "/../out/new.txt"},
		{"root_not_clean", files.ReadFileWithin(ctx, tr.ws+"/file.txt", []string{tr.ws + "/"}, io.Discard), "[invalid argument] Root is not valid: Path must be clean: " + tr.ws + "/ (use " + tr.ws + ")"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := errText(tt.err); got != tt.want {
				t.Errorf("got %s\nwant %s", got, tt.want)
			}
		})
	}
	// Nothing was written outside, nor over the file the escapes name.
	if data, err := os.ReadFile(tr.out + "/secret.txt"); err != nil || string(data) != secret {
		t.Errorf("the file outside: %q, %v", data, err)
	}
	for _, p := range []string{tr.out + "/new.txt", tr.out + "/missing"} {
		if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s was made: %v", p, err)
		}
	}
	// A root that does not exist: its missing parents are not made.
	missingRoot := tr.ws + "/not-made"
	err := files.WriteFileWithin(ctx, missingRoot+"/a/b.txt", []string{missingRoot}, strings.NewReader("x"), 0)
	if got, want := errText(err), "[not found] File not found: "+missingRoot+"/a/b.txt"; got != want {
		t.Errorf("write under a missing root: %s; want %s", got, want)
	}
	if _, err := os.Lstat(missingRoot); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the missing root was made: %v", err)
	}
}

// TestFiles_Write writes through every bridge variant: binary content of
// every byte value round trips, modes are kept or set, parents are made,
// symlinks inside are replaced, and only base64 travels in arguments.
func TestFiles_Write(t *testing.T) {
	t.Parallel()
	for _, v := range bridgeVariants {
		t.Run(v.name, func(t *testing.T) {
			t.Parallel()
			b := &localBridge{extensions: v.extensions}
			files := startLocal(t, v.flavour, b).RemoteFiles(spec)
			tr := newFileTree(t)
			ctx := t.Context()
			viaStdin := slices.Contains(v.extensions, cloudflare.ExtStdin)

			// 1 MiB holding every byte value, into parents yet to be made.
			content := allBytes(1 << 20)
			p := tr.ws + "/a/b/c/data.bin"
			if err := files.WriteFileWithin(ctx, p, tr.roots, bytes.NewReader(content), 0); err != nil {
				t.Fatalf("write %s: %v", p, err)
			}
			var got bytes.Buffer
			if err := files.ReadFileWithin(ctx, p, tr.roots, &got); err != nil {
				t.Fatalf("read %s: %v", p, err)
			}
			if !bytes.Equal(got.Bytes(), content) {
				t.Errorf("read back %d bytes that differ from the %d written", got.Len(), len(content))
			}
			if onDisk, err := os.ReadFile(p); err != nil || !bytes.Equal(onDisk, content) {
				t.Errorf("the file on disk differs from what was written (%d bytes, %v)", len(onDisk), err)
			}
			for q, want := range map[string]os.FileMode{p: 0o644, tr.ws + "/a": 0o755 | os.ModeDir, tr.ws + "/a/b/c": 0o755 | os.ModeDir} {
				if fi, err := os.Stat(q); err != nil || fi.Mode() != want {
					t.Errorf("mode of %s: %v, %v; want %v", q, fi.Mode(), err, want)
				}
			}

			// What the requests carried: content as base64 chunks of at
			// most 64 KiB in arguments, or as standard input.
			var chunks, stdinBytes int
			for _, req := range b.requests() {
				args := req.Argv
				if req.Command != "" {
					args = []string{req.Command}
				}
				for _, a := range args {
					if strings.ContainsRune(a, 0) || strings.Contains(a, string(content[:64])) {
						t.Fatalf("raw content in an argument of %+v", req.Argv)
					}
				}
				if req.Stdin != "" {
					n, _ := base64.StdEncoding.DecodeString(req.Stdin)
					stdinBytes += len(n)
				}
				chunks++
			}
			if viaStdin {
				// One exec writes 1 MiB, one reads it.
				if stdinBytes != len(content) || chunks != 2 {
					t.Errorf("with the stdin extension: %d execs carried %d bytes of stdin; want 2 execs and %d bytes", chunks, stdinBytes, len(content))
				}
			} else {
				// 1 MiB in 48 KiB chunks: 22 execs, and one to read.
				if want := (len(content)+48<<10-1)/(48<<10) + 1; chunks != want || stdinBytes != 0 {
					t.Errorf("base bridge: %d execs, %d bytes of stdin; want %d execs and none", chunks, stdinBytes, want)
				}
				for _, req := range b.requests() {
					if len(req.Command) > 64<<10+8<<10 {
						t.Errorf("a command of %d bytes: more than a 64 KiB chunk and the script", len(req.Command))
					}
				}
			}

			// Mode 0 keeps an existing file's mode and owner; a mode
			// given is set; a new file is 0644.
			f := tr.ws + "/file.txt"
			if err := os.Chmod(f, 0o600); err != nil {
				t.Fatal(err)
			}
			if os.Geteuid() == 0 {
				if err := os.Chown(f, 4321, 4321); err != nil {
					t.Fatal(err)
				}
			}
			if err := files.WriteFileWithin(ctx, f, tr.roots, strings.NewReader("kept"), 0); err != nil {
				t.Fatal(err)
			}
			fi, err := os.Stat(f)
			if err != nil || fi.Mode() != 0o600 {
				t.Errorf("mode after a write with mode 0: %v, %v; want 0600 kept", fi.Mode(), err)
			}
			if st, ok := fi.Sys().(*syscall.Stat_t); os.Geteuid() == 0 && ok && (st.Uid != 4321 || st.Gid != 4321) {
				t.Errorf("owner after a write: %d:%d; want 4321:4321 kept", st.Uid, st.Gid)
			}
			if err := files.WriteFileWithin(ctx, f, tr.roots, strings.NewReader("755"), 0o4755); err != nil {
				t.Fatal(err)
			}
			if fi, err := os.Stat(f); err != nil || fi.Mode() != 0o755 {
				t.Errorf("mode after a write with mode 04755: %v, %v; want 0755 (the permission bits)", fi.Mode(), err)
			}
			if data, _ := os.ReadFile(f); string(data) != "755" {
				t.Errorf("%s holds %q", f, data)
			}

			// An empty file; a symlink inside is replaced, not followed;
			// a directory symlink inside is followed for the parent.
			for _, w := range []struct{ path, content, check string }{
				{tr.ws + "/empty", "", tr.ws + "/empty"},
				{tr.ws + "/inlink", "replaced", tr.ws + "/inlink"},
				{tr.ws + "/danglingin", "made", tr.ws + "/danglingin"},
				{tr.ws + "/subdir/via.txt", "via", tr.ws + "/sub/via.txt"},
				{tr.ws + "/weird ' \" $x `y`\n.txt", "weird", tr.ws + "/weird ' \" $x `y`\n.txt"},
			} {
				if err := files.WriteFileWithin(ctx, w.path, tr.roots, strings.NewReader(w.content), 0); err != nil {
					t.Errorf("write %q: %v", w.path, err)
					continue
				}
				fi, err := os.Lstat(w.check)
				if data, _ := os.ReadFile(w.check); err != nil || !fi.Mode().IsRegular() || string(data) != w.content {
					t.Errorf("after writing %q: %s is %v (%v) holding %q; want a regular file holding %q", w.path, w.check, fi.Mode(), err, data, w.content)
				}
			}
			if data, _ := os.ReadFile(tr.ws + "/file.txt"); string(data) != "755" {
				t.Errorf("writing the symlink inlink changed its target: %q", data)
			}
			assertNoStage(t, tr.ws)
		})
	}
}

// assertNoStage fails when a stage file is left anywhere under dir.
func assertNoStage(t *testing.T, dir string) {
	t.Helper()
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && strings.Contains(d.Name(), ".hutch-stage-") {
			t.Errorf("stage file left behind: %s", p)
		}
		return nil
	})
}

// failingReader yields n bytes, then fails.
type failingReader struct{ n int }

func (r *failingReader) Read(p []byte) (int, error) {
	if r.n == 0 {
		return 0, errors.New("the source broke")
	}
	k := min(len(p), r.n)
	clear(p[:k])
	r.n -= k
	return k, nil
}

// TestFiles_WriteAtomic: a write whose content breaks off, or whose exec
// fails, leaves the old file as it was and no stage behind.
func TestFiles_WriteAtomic(t *testing.T) {
	t.Parallel()
	for _, v := range bridgeVariants {
		t.Run(v.name, func(t *testing.T) {
			t.Parallel()
			// Content for four execs, whatever the variant: the stdin
			// extension's chunk of 8 MiB made as small as the base64 one.
			const stdinChunk = 48 << 10
			size := stdinChunk*3 + 5
			start := func(t *testing.T, b *localBridge) *cloudflare.Runtime {
				rt := startLocal(t, v.flavour, b)
				rt.SetStdinChunk(stdinChunk)
				return rt
			}
			t.Run("source_fails", func(t *testing.T) {
				t.Parallel()
				files := start(t, &localBridge{extensions: v.extensions}).RemoteFiles(spec)
				tr := newFileTree(t)
				err := files.WriteFileWithin(t.Context(), tr.ws+"/file.txt", tr.roots, &failingReader{n: size}, 0)
				if want := "[unavailable] Writing " + tr.ws + "/file.txt failed: the content did not arrive whole: the source broke"; errText(err) != want {
					t.Errorf("got %s\nwant %s", errText(err), want)
				}
				if data, _ := os.ReadFile(tr.ws + "/file.txt"); string(data) != "hello" {
					t.Errorf("the target after a failed write holds %d bytes %.20q; want the old content", len(data), data)
				}
				assertNoStage(t, tr.ws)
			})
			t.Run("exec_fails", func(t *testing.T) {
				t.Parallel()
				// The second exec fails; the third (the clean-up) runs.
				b := &localBridge{extensions: v.extensions, fail: func(n int) bool { return n == 2 }}
				files := start(t, b).RemoteFiles(spec)
				tr := newFileTree(t)
				err := files.WriteFileWithin(t.Context(), tr.ws+"/file.txt", tr.roots, bytes.NewReader(allBytes(size)), 0)
				if !errdefs.IsUnavailable(err) || !strings.Contains(err.Error(), "injected failure of exec 2") {
					t.Errorf("got %s; want the bridge's failure", errText(err))
				}
				if data, _ := os.ReadFile(tr.ws + "/file.txt"); string(data) != "hello" {
					t.Errorf("the target after a failed write holds %d bytes %.20q; want the old content", len(data), data)
				}
				assertNoStage(t, tr.ws)
				if n := len(b.requests()); n != 3 {
					t.Errorf("%d execs; want 3 (prepare, the failed one, the clean-up)", n)
				}
			})
			t.Run("refused_midway", func(t *testing.T) {
				t.Parallel()
				// Between two execs the parent is swapped for a symlink
				// leading outside: the next exec refuses, and removes
				// nothing outside.
				tr := newFileTree(t)
				if err := os.Mkdir(tr.ws+"/d", 0o755); err != nil {
					t.Fatal(err)
				}
				b := &localBridge{extensions: v.extensions}
				b.fail = func(n int) bool {
					if n == 2 {
						if err := os.Rename(tr.ws+"/d", tr.base+"/moved"); err != nil {
							t.Error(err)
						}
						if err := os.Symlink(tr.out, tr.ws+"/d"); err != nil {
							t.Error(err)
						}
					}
					return false
				}
				files := start(t, b).RemoteFiles(spec)
				err := files.WriteFileWithin(t.Context(), tr.ws+"/d/f.txt", tr.roots, bytes.NewReader(allBytes(size)), 0)
				if want := "[failed precondition] Path " + tr.ws + "/d/f.txt is outside the sandbox's workspace"; errText(err) != want {
					t.Errorf("got %s\nwant %s", errText(err), want)
				}
				entries, _ := os.ReadDir(tr.out)
				for _, e := range entries {
					if strings.Contains(e.Name(), "f.txt") {
						t.Errorf("written outside: %s", e.Name())
					}
				}
			})
		})
	}
}

// TestFiles_Stat checks the fields Stat and List report against the
// files themselves, in both stat flavours.
func TestFiles_Stat(t *testing.T) {
	t.Parallel()
	for _, flavour := range []string{"gnu", "busybox"} {
		t.Run(flavour, func(t *testing.T) {
			t.Parallel()
			files := startLocal(t, flavour, &localBridge{}).RemoteFiles(spec)
			tr := newFileTree(t)
			mtime := time.Date(2024, 2, 29, 12, 34, 56, 0, time.UTC)
			if err := os.Chtimes(tr.ws+"/file.txt", mtime, mtime); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(tr.ws+"/sub", os.ModeSticky|0o750); err != nil {
				t.Fatal(err)
			}
			fi, err := files.Stat(t.Context(), tr.ws+"/inlink", tr.roots)
			want := sandbox.FileInfo{Name: "inlink", Size: 5, Mode: 0o644, ModTime: mtime, Link: "file.txt"}
			if diff := cmp.Diff(want, fi); err != nil || diff != "" {
				t.Errorf("Stat(inlink): %v; mismatch (-want +got):\n%s", err, diff)
			}
			fi, err = files.Stat(t.Context(), tr.ws+"/sub", tr.roots)
			if err != nil || !fi.IsDir || fi.Mode != os.ModeDir|os.ModeSticky|0o750 || fi.Name != "sub" {
				t.Errorf("Stat(sub): %+v, %v; want a sticky 0750 directory", fi, err)
			}
			fi, err = files.Stat(t.Context(), tr.ws+"/fifo", tr.roots)
			if err != nil || fi.Mode != os.ModeNamedPipe|0o644 {
				t.Errorf("Stat(fifo): %+v, %v; want a named pipe", fi, err)
			}
			list, err := files.List(t.Context(), tr.ws, tr.roots)
			if err != nil {
				t.Fatal(err)
			}
			byName := map[string]sandbox.FileInfo{}
			var names []string
			for _, e := range list {
				byName[e.Name] = e
				names = append(names, e.Name)
			}
			wantNames := []string{"*", "-dash", "..dots", ".hidden", "dangling", "danglingin", "escape", "escdir", "escrel", "evilsibling", "fifo", "file.txt", "inlink", "it's \"quoted\"", "loop", "new\nline |x", "sub", "subdir", "viaoutside", "ünï code"}
			if diff := cmp.Diff(wantNames, names); diff != "" {
				t.Errorf("List names mismatch (-want +got):\n%s", diff)
			}
			if e := byName["escape"]; e.Mode&os.ModeSymlink == 0 || e.Link != tr.out+"/secret.txt" || e.Size != int64(len(tr.out+"/secret.txt")) {
				t.Errorf("List entry escape: %+v; want the symlink itself", e)
			}
			if e := byName["file.txt"]; e.Size != 5 || !e.ModTime.Equal(mtime) || e.Mode != 0o644 || e.Link != "" {
				t.Errorf("List entry file.txt: %+v", e)
			}
			if e := byName["sub"]; !e.IsDir {
				t.Errorf("List entry sub: %+v; want a directory", e)
			}
			empty := tr.ws + "/sub"
			if list, err := files.List(t.Context(), empty+"/..", nil); err == nil || list != nil {
				t.Errorf("List of a path with '..': %v, %v; want refused", list, err)
			}
			if err := os.Remove(empty + "/inner.txt"); err != nil {
				t.Fatal(err)
			}
			if list, err := files.List(t.Context(), empty, tr.roots); err != nil || list == nil || len(list) != 0 {
				t.Errorf("List of an empty directory: %#v, %v; want an empty list", list, err)
			}
		})
	}
}

// TestFiles_ReadStopsWhenWriterFails: a writer that wants no more stops
// the read, and its error is the answer.
func TestFiles_ReadStopsWhenWriterFails(t *testing.T) {
	t.Parallel()
	files := startLocal(t, "gnu", &localBridge{}).RemoteFiles(spec)
	tr := newFileTree(t)
	if err := os.WriteFile(tr.ws+"/big", allBytes(1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	enough := errors.New("enough")
	w := &stopWriter{after: 1000, err: enough}
	if err := files.ReadFileWithin(t.Context(), tr.ws+"/big", tr.roots, w); !errors.Is(err, enough) {
		t.Errorf("got %v; want the writer's error", err)
	}
}

type stopWriter struct {
	after, n int
	err      error
}

func (w *stopWriter) Write(p []byte) (int, error) {
	w.n += len(p)
	if w.n > w.after {
		return 0, w.err
	}
	return len(p), nil
}

// TestFiles_BridgeCutsOutput: a bridge that drops the end of the output
// (as bridges may truncate large output) makes the read fail, rather than
// return a short file.
func TestFiles_BridgeCutsOutput(t *testing.T) {
	t.Parallel()
	var cut http.HandlerFunc = func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/health" {
			_, _ = fmt.Fprint(w, "ok")
			return
		}
		out := base64.StdEncoding.EncodeToString([]byte("the beginning of a long file"))
		writeJSON(w, http.StatusOK, protocol.ExecResponse{Stdout: out + "\n", Error: "output truncated"})
	}
	srv := httptest.NewServer(cut)
	t.Cleanup(srv.Close)
	rt, err := cloudflare.New(cloudflare.Config{SandboxID: "box", URL: srv.URL, HTTPClient: srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	err = rt.RemoteFiles(spec).ReadFileWithin(t.Context(), "/workspace/f", []string{"/workspace"}, &got)
	if !errdefs.IsUnavailable(err) || !strings.Contains(err.Error(), "cut short") {
		t.Errorf("got %v; want ErrUnavailable saying the output was cut short", err)
	}
}

// TestFiles_NoEnv: the file operations' commands carry no env: a file
// operation needs no credential, so the vault's values stay with the
// conversation's own commands.
func TestFiles_NoEnv(t *testing.T) {
	t.Parallel()
	b := &localBridge{}
	files := startLocal(t, "gnu", b).RemoteFiles(spec)
	tr := newFileTree(t)
	if _, err := files.Stat(t.Context(), tr.ws, tr.roots); err != nil {
		t.Fatal(err)
	}
	reqs := b.requests()
	if len(reqs) != 1 || len(reqs[0].Env) != 0 || reqs[0].SandboxID != remoteID {
		t.Errorf("requests %+v; want one for %s without env", reqs, remoteID)
	}
}

// TestFiles_HutchBridge runs the operations through hutch's own bridge
// (every extension: streamed output, stdin, argv, exec ids), backed by
// host mode.
func TestFiles_HutchBridge(t *testing.T) {
	t.Parallel()
	rt, _ := hostBridge(t, "files")
	files := rt.RemoteFiles(sandbox.Spec{OfficeKey: "v1-web-files-0123456789abcdef"})
	tr := newFileTree(t)
	ctx := t.Context()
	content := allBytes(3<<20 + 17)
	p := tr.ws + "/deep/er/data.bin"
	if err := files.WriteFileWithin(ctx, p, tr.roots, bytes.NewReader(content), 0); err != nil {
		t.Fatalf("write: %v", err)
	}
	var got bytes.Buffer
	if err := files.ReadFileWithin(ctx, p, tr.roots, &got); err != nil || !bytes.Equal(got.Bytes(), content) {
		t.Errorf("read back %d bytes (%v); want the %d written", got.Len(), err, len(content))
	}
	if fi, err := files.Stat(ctx, p, tr.roots); err != nil || fi.Size != int64(len(content)) || fi.Mode != 0o644 {
		t.Errorf("Stat: %+v, %v", fi, err)
	}
	if list, err := files.List(ctx, tr.ws+"/deep/er", tr.roots); err != nil || len(list) != 1 || list[0].Name != "data.bin" {
		t.Errorf("List: %+v, %v", list, err)
	}
	err := files.ReadFileWithin(ctx, tr.ws+"/escape", tr.roots, &got)
	if want := "[failed precondition] Path " + tr.ws + "/escape is outside the sandbox's workspace"; errText(err) != want {
		t.Errorf("read escape: %s; want %s", errText(err), want)
	}
}
