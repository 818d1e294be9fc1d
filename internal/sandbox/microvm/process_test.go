package microvm_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/internal/agent"
	"github.com/hutchsandbox/hutch/internal/daemon"
	"github.com/hutchsandbox/hutch/internal/testenv"
)

// server is a real `hutch serve --sandbox gondolin:default` process.
type server struct {
	bin, state, run, assets string
}

func (s server) env() []string {
	return append(os.Environ(), "HUTCH_STATE_DIR="+s.state, "HUTCH_RUN_DIR="+s.run, "HUTCH_MICROVM_ASSETS="+s.assets, "HUTCH_SANDBOX=gondolin:default")
}

func (s server) start(t *testing.T) *exec.Cmd {
	t.Helper()
	return testenv.Serve(t, s.bin, daemon.SocketPath(s.state), s.env(), "--sandbox", "gondolin:default")
}

func (s server) exec(t *testing.T, command string) string {
	t.Helper()
	cmd := exec.Command(s.bin, "exec", "--conversation", "web/procs", "--", command)
	cmd.Env = s.env()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("hutch exec %q: %v\n%s", command, err, out)
	}
	return string(out)
}

// qemuPids lists the QEMU processes whose command line names dir.
func qemuPids(dir string) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && bytes.Contains(cmdline, []byte("qemu-system")) && bytes.Contains(cmdline, []byte(dir)) && alive(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

func waitNoQEMU(t *testing.T, dir string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		pids := qemuPids(dir)
		if len(pids) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("QEMU processes still running after %s: %v", within, pids)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestServe_ShutdownAndLeftovers: SIGTERM to hutch powers every VM off;
// a hutch killed with SIGKILL leaves its QEMU running, and the next hutch
// ends it when it starts.
func TestServe_ShutdownAndLeftovers(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	run, err := os.MkdirTemp("", "hvm")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = agent.RemoveSocketDir(run) }) // sealed socket dirs included
	s := server{bin: testenv.HutchBinary(t), state: filepath.Join(root, "state"), run: run, assets: testenv.MicroVMAssets(t)}

	first := s.start(t)
	if out := s.exec(t, "echo hello from the VM"); !strings.Contains(out, "hello from the VM") {
		t.Fatalf("exec: %q", out)
	}
	if len(qemuPids(run)) != 1 {
		t.Fatalf("QEMU processes after a command: %v, want one", qemuPids(run))
	}
	if err := first.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if _, err := first.Process.Wait(); err != nil {
		t.Fatal(err)
	}
	waitNoQEMU(t, run, 5*time.Second)

	second := s.start(t)
	s.exec(t, "echo again")
	left := qemuPids(run)
	if len(left) != 1 {
		t.Fatalf("QEMU processes: %v, want one", left)
	}
	if err := second.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_, _ = second.Process.Wait()
	time.Sleep(500 * time.Millisecond)
	if got := qemuPids(run); len(got) != 1 || got[0] != left[0] {
		t.Fatalf("after SIGKILL to hutch the QEMU processes are %v; want %v left behind", got, left)
	}
	s.start(t)
	for _, pid := range left {
		deadline := time.Now().Add(15 * time.Second)
		for alive(pid) {
			if time.Now().After(deadline) {
				t.Fatalf("the leftover QEMU %d still runs after the next hutch started", pid)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	if out := s.exec(t, "echo third"); !strings.Contains(out, "third") {
		t.Errorf("exec after reconcile: %q", out)
	}
}
