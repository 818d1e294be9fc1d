package supervise

import (
	"errors"
	"fmt"
	"io/fs"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/hutchsandbox/hutch/internal/errdefs"
)

// startError classes an error from starting the process of prog. The
// errors with which clone3 refuses a cgroup (one with processes and child
// controllers enabled, a removed one) name the cgroup, not the program:
// the program is not at fault.
func startError(err error, prog, cgroup string) error {
	switch {
	case cgroup != "" && (errors.Is(err, unix.EBUSY) || errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EBADF) || errors.Is(err, unix.ENODEV)):
		return errdefs.New(errdefs.ErrFailedPrecondition, fmt.Sprintf("Command %s cannot start in the cgroup %s: %v", prog, cgroup, err))
	case errors.Is(err, fs.ErrNotExist):
		return errdefs.New(errdefs.ErrInvalid, "Program not found: "+prog)
	case errors.Is(err, fs.ErrPermission), errors.Is(err, syscall.ENOEXEC):
		return errdefs.New(errdefs.ErrInvalid, "Program is not executable: "+prog)
	case errors.Is(err, syscall.EINVAL):
		return errdefs.New(errdefs.ErrInvalid, "Command cannot be started (it may contain a NUL byte): "+prog)
	}
	return errdefs.New(errdefs.ErrUnavailable, fmt.Sprintf("Command cannot be started: %s: %v", prog, err))
}

// openCgroup opens the cgroup v2 directory dir for clone3's
// CLONE_INTO_CGROUP, and refuses anything else: a plain directory would
// only fail later, with an errno that names nothing.
func openCgroup(dir string) (int, error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, errdefs.New(errdefs.ErrFailedPrecondition, fmt.Sprintf("Commands' cgroup %s cannot be opened: %v", dir, err))
	}
	var st unix.Statfs_t
	if err := unix.Fstatfs(fd, &st); err != nil || st.Type != unix.CGROUP2_SUPER_MAGIC {
		_ = unix.Close(fd)
		return -1, errdefs.New(errdefs.ErrFailedPrecondition, "Commands' cgroup is not a cgroup v2 directory: "+dir)
	}
	return fd, nil
}
