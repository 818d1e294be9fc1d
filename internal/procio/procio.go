// Package procio holds what the two places that start commands as local
// processes share (host mode in hutch's own process, and the agent inside
// a sandbox): copying a command's output off its pipes, and the classes
// and texts of a command that cannot be started.
package procio

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"syscall"

	"github.com/hutchsandbox/hutch/internal/errdefs"
)

// copyBufferSize is the chunk Drain reads: the only memory a stream costs
// beyond what its writer keeps, and so the largest frame an agent's exec
// response carries.
const copyBufferSize = 32 << 10

// Drain copies r into w until EOF or until r is closed under it. Errors of
// w are ignored: the caller's writer decides what a broken reader means,
// and the command must never block on a full pipe because of one.
func Drain(r io.Reader, w io.Writer) {
	buf := make([]byte, copyBufferSize)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			_, _ = w.Write(buf[:n])
		}
		if err != nil {
			return
		}
	}
}

// StartError classes an error from starting the process of prog.
func StartError(err error, prog string) error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return errdefs.New(errdefs.ErrInvalid, "Program not found: "+prog)
	case errors.Is(err, fs.ErrPermission), errors.Is(err, syscall.ENOEXEC):
		return errdefs.New(errdefs.ErrInvalid, "Program is not executable: "+prog)
	case errors.Is(err, syscall.EINVAL):
		return errdefs.New(errdefs.ErrInvalid, "Command cannot be started (it may contain a NUL byte): "+prog)
	}
	return errdefs.New(errdefs.ErrUnavailable, fmt.Sprintf("Command cannot be started: %s: %v", prog, err))
}
