package guest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// The test binary doubles as a helper process, chosen by this variable.
const helperEnv = "HUTCH_GUEST_TEST_HELPER"

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) == "caps" {
		os.Exit(capsHelper())
	}
	os.Exit(m.Run())
}

// threadPrctl is prctl on the calling thread only. The helper uses it
// instead of allThreadsPrctl, which a test binary linked with cgo cannot
// run; it locks its goroutine to that thread, so the command it then
// starts is forked from it.
func threadPrctl(option, arg uintptr) error { return unix.Prctl(int(option), arg, 0, 0, 0) }

// capsHelper drops the capabilities as the guest does, then prints the
// status lines of a command it starts and its own capabilities after
// the drop.
func capsHelper() int {
	runtime.LockOSThread()
	prctl := prctlFunc(allThreadsPrctl)
	if err := allThreadsPrctl(unix.PR_CAPBSET_READ, unix.CAP_CHOWN); errors.Is(err, unix.ENOTSUP) {
		prctl = threadPrctl
	}
	if _, err := dropCapabilities(prctl); err != nil {
		fmt.Fprintln(os.Stderr, "drop:", err)
		if errors.Is(err, unix.EPERM) {
			return 3
		}
		return 2
	}
	out, err := exec.Command("/bin/sh", "-c", "grep -E '^(CapBnd|CapEff|CapPrm|NoNewPrivs):' /proc/self/status").Output()
	if err != nil {
		fmt.Fprintln(os.Stderr, "command:", err)
		return 2
	}
	self, err := os.ReadFile("/proc/thread-self/status")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	fmt.Print(string(out))
	for _, line := range strings.Split(string(self), "\n") {
		if strings.HasPrefix(line, "CapEff:") {
			fmt.Println("Agent" + line)
		}
	}
	return 0
}

// statusCaps reads "Name:\tHEX" lines into numbers.
func statusCaps(t *testing.T, out string) map[string]uint64 {
	t.Helper()
	got := map[string]uint64{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			t.Fatalf("status line %q", line)
		}
		n, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
		if err != nil {
			t.Fatalf("status line %q: %v", line, err)
		}
		got[k] = n
	}
	return got
}

// TestDropCapabilities checks the reasoning the guest relies on: after
// the bounding set drop, a command root starts has only the kept
// capabilities (so no mount, no module loading) and no_new_privs, while
// the agent keeps every capability it had to serve guest setups.
func TestDropCapabilities(t *testing.T) {
	before, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	var own map[string]uint64
	var lines []string
	for _, l := range strings.Split(string(before), "\n") {
		if strings.HasPrefix(l, "CapBnd:") || strings.HasPrefix(l, "CapEff:") {
			lines = append(lines, l)
		}
	}
	own = statusCaps(t, strings.Join(lines, "\n"))
	if os.Geteuid() != 0 || own["CapEff"]&(1<<unix.CAP_SETPCAP) == 0 {
		t.Skip("needs root with CAP_SETPCAP to drop from the bounding set")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), helperEnv+"=caps")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		if cmd.ProcessState != nil && cmd.ProcessState.ExitCode() == 3 {
			t.Skipf("the bounding set cannot be changed here: %s", stderr.String())
		}
		t.Fatalf("helper: %v\n%s", err, stderr.String())
	}
	got := statusCaps(t, string(out))
	kept := keptMask() & own["CapBnd"]
	for _, k := range []string{"CapBnd", "CapPrm", "CapEff"} {
		if got[k] != kept {
			t.Errorf("command %s = %#x, want the kept set %#x", k, got[k], kept)
		}
	}
	if got["NoNewPrivs"] != 1 {
		t.Errorf("command NoNewPrivs = %d, want 1", got["NoNewPrivs"])
	}
	if got["AgentCapEff"] != own["CapEff"] {
		t.Errorf("agent CapEff after the drop = %#x, want unchanged %#x", got["AgentCapEff"], own["CapEff"])
	}
}
