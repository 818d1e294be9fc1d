package agent

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// threadsHelper is the child TestWarmThreads starts: it warms its
// threads first when warm is set, then prints how many OS threads it has.
func threadsHelper(warm bool) {
	if warm {
		warmThreads(initThreads)
	}
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		os.Exit(2)
	}
	_, _ = os.Stdout.WriteString(strconv.Itoa(len(tasks)) + "\n")
	os.Exit(0)
}

// TestWarmThreads compares two fresh processes: one that warmed its
// threads holds at least initThreads of them, one that did not holds
// fewer (so the count is warmThreads' doing, not the test binary's).
func TestWarmThreads(t *testing.T) {
	if _, err := os.Stat("/proc/self/task"); err != nil {
		t.Skip("no /proc/self/task here")
	}
	count := func(mode string) int {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), helperEnv+"=threads-"+mode, "GOMAXPROCS=1")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s child: %v", mode, err)
		}
		n, err := strconv.Atoi(strings.TrimSpace(string(out)))
		if err != nil {
			t.Fatalf("%s child printed %q", mode, out)
		}
		return n
	}
	cold, warm := count("cold"), count("warm")
	if cold >= initThreads {
		t.Fatalf("a cold process already has %d threads; the comparison shows nothing", cold)
	}
	if warm < initThreads {
		t.Errorf("%d threads after warming %d (a cold process has %d)", warm, initThreads, cold)
	}
}
