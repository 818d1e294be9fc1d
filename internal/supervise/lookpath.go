package supervise

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/hutchsandbox/hutch/internal/errdefs"
)

const (
	// shell runs single-string commands.
	shell = "/bin/sh"
	// DefaultPath is searched when the command's environment has no PATH.
	DefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
)

// Resolve turns argv into the program part of a Command for a command that
// runs in dir with env: a single element is a shell string, run by
// /bin/sh -c; more are a program and its arguments, the program found by
// LookPath. The caller has refused an empty argv.
func Resolve(argv []string, dir string, env []string) (Command, error) {
	cmd := Command{Dir: dir, Env: env}
	if len(argv) == 1 {
		cmd.Path, cmd.Args, cmd.Prog = shell, []string{"sh", "-c", argv[0]}, "sh"
		return cmd, nil
	}
	path, err := LookPath(argv[0], dir, env)
	if err != nil {
		return Command{}, err
	}
	cmd.Path, cmd.Args, cmd.Prog = path, argv, argv[0]
	return cmd, nil
}

// LookPath finds prog the way a shell started in dir with env would: a
// name with a slash is taken as it is (relative to dir), any other is
// searched in env's PATH (DefaultPath when it has none), whose relative
// entries, the empty one included, also resolve against dir.
//
// Against dir, not this process's working directory: the command runs in
// dir, and a program found anywhere else would be one the command itself,
// and a shell string in the same place, could never find. Nor are such
// entries refused, as os/exec refuses them (ErrDot): that guards a Go
// program against running a file from its own directory by surprise, but
// here the PATH and the directory are the command's own choice.
//
// Its errors are of class ErrInvalid, with the texts users see:
// "Program not found: prog" and "Program is not executable: prog".
func LookPath(prog, dir string, env []string) (string, error) {
	notFound := errdefs.New(errdefs.ErrInvalid, "Program not found: "+prog)
	notExecutable := errdefs.New(errdefs.ErrInvalid, "Program is not executable: "+prog)
	if prog == "" {
		return "", notFound
	}
	if strings.Contains(prog, "/") {
		p := prog
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		switch err := executable(p); {
		case err == nil:
			return p, nil
		case errors.Is(err, fs.ErrNotExist):
			return "", notFound
		default:
			return "", notExecutable
		}
	}
	pathEnv, ok := lookupEnv(env, "PATH")
	if !ok {
		pathEnv = DefaultPath
	}
	var denied bool
	for _, d := range filepath.SplitList(pathEnv) {
		if d == "" {
			d = "."
		}
		if !filepath.IsAbs(d) {
			d = filepath.Join(dir, d)
		}
		p := filepath.Join(d, prog)
		switch err := executable(p); {
		case err == nil:
			return p, nil
		case !errors.Is(err, fs.ErrNotExist):
			denied = true
		}
	}
	if denied {
		return "", notExecutable
	}
	return "", notFound
}

// executable reports whether p is a file someone may execute. Whether this
// user may is left to execve, whose refusal has the same text.
func executable(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	if fi.IsDir() || fi.Mode()&0o111 == 0 {
		return fs.ErrPermission
	}
	return nil
}

// OverlayEnv returns base with overlay's variables set, each once: the
// last value wins, at the place of the name's first appearance. execve
// keeps duplicates, and which one a program sees is up to its libc.
func OverlayEnv(base []string, overlay map[string]string) []string {
	out := make([]string, 0, len(base)+len(overlay))
	at := make(map[string]int, len(base))
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if i, ok := at[k]; ok {
			out[i] = kv
			continue
		}
		at[k] = len(out)
		out = append(out, kv)
	}
	for _, k := range slices.Sorted(maps.Keys(overlay)) {
		kv := k + "=" + overlay[k]
		if i, ok := at[k]; ok {
			out[i] = kv
			continue
		}
		out = append(out, kv)
	}
	return out
}

// lookupEnv finds key in env (the last one wins, as OverlayEnv keeps it).
func lookupEnv(env []string, key string) (string, bool) {
	for i := len(env) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(env[i], "="); ok && k == key {
			return v, true
		}
	}
	return "", false
}

// WorkDir resolves dir against this process's working directory ("" is
// that directory itself) and checks it is a directory, so that a bad one
// is refused with its own text rather than as a program that cannot start
// (execve's ENOENT names no path).
func WorkDir(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("Working directory %s cannot be resolved: %v", dir, err))
	}
	fi, err := os.Stat(abs)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", errdefs.New(errdefs.ErrInvalid, "Working directory does not exist: "+abs)
	case err != nil:
		return "", errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("Working directory %s cannot be used: %v", abs, err))
	case !fi.IsDir():
		return "", errdefs.New(errdefs.ErrInvalid, "Working directory is not a directory: "+abs)
	}
	return abs, nil
}
