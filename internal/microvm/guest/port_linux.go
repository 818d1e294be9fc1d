package guest

import (
	"errors"
	"log/slog"
	"net"
	"os"

	"golang.org/x/sys/unix"

	"github.com/hutchsandbox/hutch/internal/agent"
)

// NewPort is the port whose device is /dev/<name> (as findPort names it).
func NewPort(name string, log *slog.Logger) *Port {
	return &Port{dev: vport{path: "/dev/" + name}, log: log}
}

// vport is a virtio-serial port device.
type vport struct{ path string }

func (v vport) open() (portHandle, error) {
	// os.OpenFile registers the device with Go's poller (virtio ports
	// support poll), which gives it the deadlines a session ends with.
	f, err := os.OpenFile(v.path, os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	return vportFile{f}, nil
}

type vportFile struct{ f *os.File }

func (h vportFile) hostConnected() (bool, error) {
	sc, err := h.f.SyscallConn()
	if err != nil {
		return false, err
	}
	var (
		revents int16
		perr    error
	)
	if err := sc.Control(func(fd uintptr) {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		for {
			_, perr = unix.Poll(fds, 0)
			if !errors.Is(perr, unix.EINTR) {
				break
			}
		}
		revents = fds[0].Revents
	}); err != nil {
		return false, err
	}
	if perr != nil {
		return false, perr
	}
	return revents&unix.POLLHUP == 0, nil
}

// conn is the port file itself: os.File registered with Go's poller
// supports deadlines and a Close that ends a blocked Read.
func (h vportFile) conn() net.Conn { return agent.NewStdioConn(h.f, h.f) }
