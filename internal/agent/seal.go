package agent

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// fsImmutableFL is FS_IMMUTABLE_FL of linux/fs.h (chattr +i).
const fsImmutableFL = 0x10

// SealSocketDir makes the host directory that holds an agent's socket
// immutable once the agent listens in it. The directory is bind-mounted
// read-write into the runtime, whose root would otherwise replace the
// socket with a link (the channel proof then refuses whoever answers,
// but the runtime is wedged) or fill the host's run dir with files.
// Immutable, it takes no new entry, rename or removal from anyone
// without CAP_LINUX_IMMUTABLE, which no runtime keeps, and the socket
// still accepts connections. Setting the flag needs that capability on
// the host: without it (hutch not root) the error says so and the caller
// carries on with the proof alone.
func SealSocketDir(dir string) error {
	return setImmutable(dir, true)
}

// RemoveSocketDir removes a socket directory SealSocketDir may have
// sealed, and whatever lies under dir (a run dir holding several). A
// missing dir is no error.
func RemoveSocketDir(dir string) error {
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = setImmutable(p, false)
		}
		return nil
	})
	return os.RemoveAll(dir)
}

func setImmutable(dir string, on bool) error {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("socket dir %s: %w", dir, err)
	}
	defer func() { _ = unix.Close(fd) }()
	flags, err := unix.IoctlGetUint32(fd, unix.FS_IOC_GETFLAGS)
	if err != nil {
		if errors.Is(err, unix.ENOTTY) || errors.Is(err, unix.EOPNOTSUPP) {
			return fmt.Errorf("socket dir %s: its file system has no immutable flag: %w", dir, err)
		}
		return fmt.Errorf("socket dir %s: read its flags: %w", dir, err)
	}
	want := flags &^ fsImmutableFL
	if on {
		want = flags | fsImmutableFL
	}
	if want == flags {
		return nil
	}
	if err := unix.IoctlSetPointerInt(fd, unix.FS_IOC_SETFLAGS, int(want)); err != nil {
		return fmt.Errorf("socket dir %s: set its immutable flag (needs CAP_LINUX_IMMUTABLE): %w", dir, err)
	}
	return nil
}
