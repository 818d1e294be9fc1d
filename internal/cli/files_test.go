package cli

import (
	"bytes"
	"crypto/rand"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestFiles_PutGetLs copies a binary file in and out of a conversation's
// sandbox (host mode, in-process) and lists it: the bytes come back
// unchanged, with the mode asked for, and a failed get leaves the local
// file as it was.
func TestFiles_PutGetLs(t *testing.T) {
	e := newEnv(t)
	e.ok("door", "set", "web/files", "shared")
	data := make([]byte, 300<<10)
	if _, err := rand.Read(data); err != nil {
		t.Fatal(err)
	}
	local := filepath.Join(t.TempDir(), "in.bin")
	if err := os.WriteFile(local, data, 0o644); err != nil {
		t.Fatal(err)
	}
	_, errOut, code := e.run("", "files", "put", "--conversation", "web/files", "--mode", "0600", local, "sub/data.bin")
	if code != 0 || !strings.HasPrefix(errOut, "Copied 300.0 KiB to ") || !strings.HasSuffix(strings.TrimSpace(errOut), "/sub/data.bin") {
		t.Fatalf("put: exit %d: %s", code, errOut)
	}
	out, errOut, code := e.run("", "files", "get", "--conversation", "web/files", "sub/data.bin")
	if code != 0 || !bytes.Equal([]byte(out), data) {
		t.Fatalf("get to stdout: exit %d, %d bytes (want %d): %s", code, len(out), len(data), errOut)
	}
	dir := t.TempDir()
	e.ok("files", "get", "--conversation", "web/files", "sub/data.bin", dir)
	if got, err := os.ReadFile(filepath.Join(dir, "data.bin")); err != nil || !bytes.Equal(got, data) {
		t.Errorf("get into a directory: %d bytes, %v", len(got), err)
	}
	// Standard input in, a name that is not UTF-8.
	_, errOut, code = e.run("from stdin", "files", "put", "--conversation", "web/files", "-", "caf\xe9.txt")
	if code != 0 {
		t.Fatalf("put from stdin: exit %d: %s", code, errOut)
	}
	ls := e.ok("files", "ls", "--conversation", "web/files")
	for _, want := range []string{`"caf\xe9.txt"`, "sub"} {
		if !strings.Contains(ls, want) {
			t.Errorf("ls does not show %s:\n%s", want, ls)
		}
	}
	if ls := e.ok("files", "ls", "--conversation", "web/files", "sub"); !strings.Contains(ls, "-rw-------") || !strings.Contains(ls, "307200") {
		t.Errorf("ls sub: want data.bin with mode 0600 and its size:\n%s", ls)
	}
	// A get that fails leaves the local file alone.
	keep := filepath.Join(dir, "keep")
	if err := os.WriteFile(keep, []byte("kept"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, errOut, code = e.run("", "files", "get", "--conversation", "web/files", "missing.bin", keep)
	if code != 1 || !strings.Contains(errOut, "File not found: ") {
		t.Errorf("get of a missing file: exit %d: %s", code, errOut)
	}
	if got, _ := os.ReadFile(keep); string(got) != "kept" {
		t.Errorf("a failed get changed the local file to %q", got)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 2 {
		t.Errorf("a failed get left files behind: %v", entries)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"files", "get", "--conversation", "web/files", "/etc/passwd"}, "Path /etc/passwd is outside the sandbox's workspace"},
		{[]string{"files", "put", "--conversation", "web/files", local, "../../x"}, "Path ../../x is outside the sandbox's workspace"},
		{[]string{"files", "put", "--conversation", "web/files", "--mode", "888", local, "x"}, "--mode 888 is not valid"},
		{[]string{"files", "put", "--conversation", "web/files", dir, "x"}, "is not a regular file"},
		{[]string{"files", "ls", "sub"}, "--conversation <platform>/<conversation-id> is required"},
	} {
		if _, errOut, code := e.run("", tc.args...); code == 0 || !strings.Contains(errOut, tc.want) {
			t.Errorf("hutch %s: exit %d: %s; want %q", strings.Join(tc.args, " "), code, errOut, tc.want)
		}
	}
}

// TestFiles_UseDaemon: with a daemon answering, put and get go through
// its API, bytes unchanged.
func TestFiles_UseDaemon(t *testing.T) {
	e := newEnv(t)
	e.ok("door", "set", "web/serve", "shared")
	p := startServe(t, e, "--log-level", "debug")
	data := []byte("\x00\x01binary\xff through the daemon")
	put := e.hutchCmd("files", "put", "--conversation", "web/serve", "-", "via-daemon.bin")
	put.Stdin = bytes.NewReader(data)
	if out, err := put.CombinedOutput(); err != nil {
		t.Fatalf("put: %v %s", err, out)
	}
	get := e.hutchCmd("files", "get", "--conversation", "web/serve", "via-daemon.bin")
	out, err := get.Output()
	if err != nil || !bytes.Equal(out, data) {
		t.Fatalf("get: %q, %v", out, err)
	}
	ls := e.hutchCmd("files", "ls", "--conversation", "web/serve")
	if out, err := ls.Output(); err != nil || !strings.Contains(string(out), "via-daemon.bin") {
		t.Errorf("ls: %s, %v", out, err)
	}
	var ee *exec.ExitError
	missing := e.hutchCmd("files", "get", "--conversation", "web/serve", "nothing")
	if out, err := missing.CombinedOutput(); !errors.As(err, &ee) || !strings.Contains(string(out), "File not found: ") {
		t.Errorf("get of a missing file through the daemon: %v %s", err, out)
	}
	// The daemon served them: its log names each endpoint.
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	_ = p.cmd.Wait()
	for _, path := range []string{"/v1/files/write", "/v1/files/read", "/v1/files/list"} {
		if !strings.Contains(p.err.String(), "path="+path) {
			t.Errorf("the daemon's log does not show %s:\n%s", path, p.err.String())
		}
	}
}
