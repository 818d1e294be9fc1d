package cli

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// asHutch makes the test binary act as the hutch binary when re-executed
// by these tests, so they exercise the real process: signals, exit codes
// and memory, without building anything.
const asHutch = "HUTCH_CLI_TEST_AS_HUTCH"

func TestMain(m *testing.M) {
	if os.Getenv(asHutch) == "1" {
		os.Exit(Run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// hutchCmd prepares the test binary as hutch with state in e.
func (e *env) hutchCmd(args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), asHutch+"=1", "HUTCH_STATE_DIR="+e.state)
	for k, v := range e.extra {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	return cmd
}

// alive reports whether pid is a process that is not a zombie. Killed
// grandchildren are re-parented to pid 1, which on some machines never
// reaps them; a zombie has ended and holds nothing.
func alive(pid int) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

func waitGone(t *testing.T, what string, pid int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("%s (pid %d) is still running", what, pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func readPid(t *testing.T, path string) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		data, err := os.ReadFile(path)
		if err == nil && strings.HasSuffix(string(data), "\n") {
			pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
			if err != nil {
				t.Fatalf("pid file %s: %v", path, err)
			}
			return pid
		}
		if time.Now().After(deadline) {
			t.Fatalf("pid file %s never appeared", path)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestExec_KillsGrandchild proves the whole process group dies, a
// background grandchild included, on timeout and when hutch itself is
// interrupted, and that hutch says which happened.
func TestExec_KillsGrandchild(t *testing.T) {
	for _, tc := range []struct {
		name     string
		args     []string
		signal   syscall.Signal // 0 = let the timeout fire
		wantCode int
		wantMsg  string
	}{
		{"timeout", []string{"--timeout", "2s"}, 0, 124, "hutch: Command timed out after 2 seconds\n"},
		{"sigint", nil, syscall.SIGINT, 130, "hutch: Command aborted\n"},
		{"sigterm", nil, syscall.SIGTERM, 130, "hutch: Command aborted\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.ok("door", "set", "web/kill", "shared")
			pids := t.TempDir()
			script := fmt.Sprintf(`sleep 300 & echo $! > %s/grandchild.tmp; mv %s/grandchild.tmp %s/grandchild; echo $$ > %s/leader.tmp; mv %s/leader.tmp %s/leader; sleep 300`,
				pids, pids, pids, pids, pids, pids)
			args := append([]string{"exec", "--conversation", "web/kill"}, tc.args...)
			cmd := e.hutchCmd(append(args, "--", script)...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			grandchild := readPid(t, filepath.Join(pids, "grandchild"))
			leader := readPid(t, filepath.Join(pids, "leader"))
			if !alive(grandchild) || !alive(leader) {
				t.Fatal("the command's processes did not start")
			}
			if tc.signal != 0 {
				if err := cmd.Process.Signal(tc.signal); err != nil {
					t.Fatal(err)
				}
			}
			err := cmd.Wait()
			code := cmd.ProcessState.ExitCode()
			if code != tc.wantCode || stderr.String() != tc.wantMsg {
				t.Errorf("hutch exit %d (%v), stderr %q; want %d, %q", code, err, stderr.String(), tc.wantCode, tc.wantMsg)
			}
			waitGone(t, "leader", leader)
			waitGone(t, "background grandchild", grandchild)
		})
	}
}

// TestExec_OutputDoesNotGrowMemory runs a command printing 200 MB and
// compares hutch's peak memory with a run printing 1 MB: streaming holds
// nothing, so the two must be close, and with --max-output the kept part
// is exactly the cap.
func TestExec_OutputDoesNotGrowMemory(t *testing.T) {
	e := newEnv(t)
	e.ok("door", "set", "web/mem", "shared")
	peak := func(t *testing.T, bytesOut int, extra ...string) (int64, int64, string) {
		t.Helper()
		args := append([]string{"exec", "--conversation", "web/mem"}, extra...)
		cmd := e.hutchCmd(append(args, "--", fmt.Sprintf("head -c %d /dev/zero", bytesOut))...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		n, err := io.Copy(io.Discard, out)
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Wait(); err != nil {
			t.Fatalf("hutch: %v, stderr %q", err, stderr.String())
		}
		// Maxrss is in KiB on Linux.
		return cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss * 1024, n, stderr.String()
	}
	small, n, _ := peak(t, 1_000_000)
	if n != 1_000_000 {
		t.Fatalf("small run passed %d bytes, want 1000000", n)
	}
	big, n, _ := peak(t, 200_000_000)
	if n != 200_000_000 {
		t.Fatalf("big run passed %d bytes, want 200000000", n)
	}
	const slack = 32 << 20
	t.Logf("peak RSS: 1 MB output %d MiB, 200 MB output %d MiB", small>>20, big>>20)
	if big > small+slack {
		t.Errorf("peak RSS grew from %d MiB to %d MiB with 200 MB of output; streaming must hold nothing", small>>20, big>>20)
	}
	capped, n, notice := peak(t, 200_000_000, "--max-output", "1MiB")
	if n != 1<<20 || notice != "[output truncated: stdout 190.7 MiB, only the first 1.0 MiB kept]\n" {
		t.Errorf("--max-output 1MiB passed %d bytes with notice %q", n, notice)
	}
	if capped > small+slack {
		t.Errorf("peak RSS with --max-output grew from %d MiB to %d MiB", small>>20, capped>>20)
	}
}
