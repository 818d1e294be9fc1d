package guest

import (
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// prctlFunc runs prctl(option, arg, 0, 0, 0).
type prctlFunc func(option, arg uintptr) error

// allThreadsPrctl runs prctl on every thread of the process: the
// bounding set and no_new_privs belong to a thread, and a command is
// forked from whichever thread starts it. It fails (ENOTSUP) in a binary
// linked with cgo; hutch is built without.
func allThreadsPrctl(option, arg uintptr) error {
	if _, _, errno := syscall.AllThreadsSyscall6(unix.SYS_PRCTL, option, arg, 0, 0, 0, 0); errno != 0 {
		return errno
	}
	return nil
}

// dropCapabilities removes every capability but the kept ones from the
// bounding set and sets no_new_privs, with prctl, and returns how many it
// dropped. The caller keeps its own effective and permitted sets, so the
// agent can still mount for a guest setup afterwards: the bounding set
// only limits what a later execve grants, which is exactly the commands.
func dropCapabilities(prctl prctlFunc) (int, error) {
	b, err := os.ReadFile("/proc/sys/kernel/cap_last_cap")
	if err != nil {
		return 0, fmt.Errorf("read the last capability: %w", err)
	}
	last, err := parseCapLastCap(b)
	if err != nil {
		return 0, err
	}
	drop := capabilitiesToDrop(last)
	for _, c := range drop {
		if err := prctl(unix.PR_CAPBSET_DROP, uintptr(c)); err != nil {
			return 0, fmt.Errorf("drop capability %d from the bounding set: %w", c, err)
		}
	}
	if err := prctl(unix.PR_SET_NO_NEW_PRIVS, 1); err != nil {
		return 0, fmt.Errorf("set no_new_privs: %w", err)
	}
	return len(drop), nil
}
