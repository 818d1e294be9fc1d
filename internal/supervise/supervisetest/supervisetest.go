// Package supervisetest holds what tests of supervised commands share:
// reading the pids a command records, waiting for its files, telling
// whether a process is dead, and a helper process that escapes a
// command's process group while holding its output open.
package supervisetest

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// WaitFor bounds how long a test waits for something that happens
// asynchronously (a process to die, a file to appear). It is a bound
// against hangs, not a timing assertion.
const WaitFor = 20 * time.Second

// ReadPid reads the pid a command wrote to path.
func ReadPid(t testing.TB, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("pid file: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 {
		t.Fatalf("pid file %s holds %q", path, b)
	}
	return pid
}

// WaitForFile polls until path exists (the command is slower than us).
func WaitForFile(t testing.TB, path string) {
	t.Helper()
	for deadline := time.Now().Add(WaitFor); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if _, err := os.Stat(path); err == nil {
			return
		}
	}
	t.Fatalf("%s never appeared", path)
}

// Dead reports whether pid no longer runs: gone from the process table, or
// a zombie whose parent is not this process (so not ours to reap).
func Dead(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return errors.Is(err, os.ErrNotExist) || errors.Is(err, unix.ESRCH)
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return false
	}
	f := strings.Fields(s[i+1:]) // state ppid ...
	return len(f) >= 2 && f[0] == "Z" && f[1] != strconv.Itoa(os.Getpid())
}

// AssertDead polls for the kernel to finish a kill; a pid still alive is
// killed so a failing test leaves nothing behind.
func AssertDead(t testing.TB, what string, pid int) {
	t.Helper()
	for deadline := time.Now().Add(WaitFor); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if Dead(pid) {
			return
		}
	}
	_ = unix.Kill(pid, unix.SIGKILL)
	t.Errorf("%s (pid %d) still runs after the command ended", what, pid)
}

// escapeEnv, set to a pid file, makes a test binary the escaping child of
// an Escaper's command.
const escapeEnv = "HUTCH_SUPERVISETEST_ESCAPE"

// Escaper is a command whose child leaves the command's process group
// (setsid) while holding its stdout open, the one case in which a drain
// grace bounds a command's end. The command prints "before", waits until
// the child has left the group, and exits 5. The child is the test binary
// itself: its TestMain must call MaybeEscape first.
type Escaper struct {
	// Argv is the command to run.
	Argv    []string
	pidfile string
}

// NewEscaper returns the command, which records the child's pid in dir.
func NewEscaper(t testing.TB, dir string) *Escaper {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	pidfile := filepath.Join(dir, "escaped")
	return &Escaper{
		Argv: []string{"/bin/sh", "-c",
			`echo before; ` + escapeEnv + `="$1" "$0" & while [ ! -s "$1" ]; do sleep 0.01; done; exit 5`,
			self, pidfile},
		pidfile: pidfile,
	}
}

// Check checks how the command ended: exit 5 with all of its stdout, and
// the child still alive, or the test did not exercise an escaped holder.
// The child is killed when the test ends.
func (e *Escaper) Check(t testing.TB, exitCode int, stdout string) {
	t.Helper()
	pid := ReadPid(t, e.pidfile)
	t.Cleanup(func() {
		_ = unix.Kill(pid, unix.SIGKILL)
		AssertDead(t, "escaped child", pid)
	})
	if exitCode != 5 || stdout != "before\n" {
		t.Errorf("got exit %d, stdout %q; want exit 5, stdout %q", exitCode, stdout, "before\n")
	}
	if Dead(pid) {
		t.Errorf("escaped child (pid %d) died; the test did not exercise an escaped pipe holder", pid)
	}
}

// MaybeEscape makes this process an Escaper's child when a test started it
// as one, and then never returns; otherwise it returns at once.
func MaybeEscape() {
	pidfile := os.Getenv(escapeEnv)
	if pidfile == "" {
		return
	}
	if _, err := unix.Setsid(); err != nil {
		os.Exit(2)
	}
	tmp := pidfile + ".tmp"
	if err := os.WriteFile(tmp, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o600); err != nil {
		os.Exit(2)
	}
	if err := os.Rename(tmp, pidfile); err != nil {
		os.Exit(2)
	}
	time.Sleep(5 * time.Minute)
	os.Exit(0)
}
