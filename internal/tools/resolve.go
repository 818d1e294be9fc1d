package tools

import (
	"path"
	"strings"

	"github.com/hutchsandbox/hutch/internal/errdefs"
)

// Resolve turns a path given by an agent into the absolute, cleaned path
// the runtime sees: a relative path is joined onto sb.Office(). It is the
// lexical first line of defence: a path containing a NUL byte, or whose
// cleaned form lies outside every entry of sb.Roots(), is refused with
// class errdefs.ErrFailedPrecondition and the text
// `Path <p> is outside the sandbox's workspace`. An empty path is refused
// with class errdefs.ErrInvalid (`Path is empty`). Symlinks are not
// looked at: following them, and refusing those that lead out of the
// roots, is the Sandbox's job.
//
// Runtime paths are POSIX paths whatever the host is, so Resolve uses
// package path, not path/filepath.
func Resolve(sb Sandbox, p string) (string, error) {
	if p == "" {
		return "", errdefs.New(errdefs.ErrInvalid, "Path is empty")
	}
	outside := errdefs.New(errdefs.ErrFailedPrecondition, "Path "+showPath(p)+" is outside the sandbox's workspace")
	if strings.IndexByte(p, 0) >= 0 {
		return "", outside
	}
	abs := p
	if !path.IsAbs(abs) {
		abs = path.Join(sb.Office(), abs)
	}
	abs = path.Clean(abs)
	if !path.IsAbs(abs) {
		// The office is not set (or not absolute): nothing to anchor on.
		return "", outside
	}
	for _, root := range sb.Roots() {
		if within(abs, root) {
			return abs, nil
		}
	}
	return "", outside
}

// within reports whether the clean absolute path p is root or lies below it.
func within(p, root string) bool {
	if root == "" || !path.IsAbs(root) {
		return false
	}
	root = path.Clean(root)
	if root == "/" || p == root {
		return true
	}
	return strings.HasPrefix(p, root+"/")
}
