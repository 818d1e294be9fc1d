package tools_test

import (
	"context"
	"errors"
	"flag"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/hutchsandbox/hutch/internal/atomicfile"
	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/sandbox/host"
	"github.com/hutchsandbox/hutch/internal/tools"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// hostSandbox is a Sandbox over a temporary office on this machine:
// commands run through the real host runtime, files through the os
// package, and every path is checked (symlinks followed) against the
// roots, as a real runtime must.
type hostSandbox struct {
	office string
	roots  []string
	rt     *host.Runtime
}

var _ tools.Sandbox = (*hostSandbox)(nil)

func newSandbox(t *testing.T) *hostSandbox {
	t.Helper()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	office := filepath.Join(dir, "office")
	if err := os.Mkdir(office, 0o755); err != nil {
		t.Fatal(err)
	}
	return &hostSandbox{office: office, roots: []string{office}, rt: host.New(nil)}
}

func (s *hostSandbox) Office() string  { return s.office }
func (s *hostSandbox) Roots() []string { return s.roots }

func (s *hostSandbox) Exec(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	return s.rt.Exec(ctx, sandbox.Spec{OfficeDir: s.office, OfficeRuntimePath: s.office}, req)
}

// check refuses a path whose real location (its deepest existing
// ancestor with symlinks resolved) is outside the roots.
func (s *hostSandbox) check(p string) error {
	real, rest := p, ""
	for {
		r, err := filepath.EvalSymlinks(real)
		if err == nil {
			real = filepath.Join(r, rest)
			break
		}
		if real == "/" {
			break
		}
		rest = filepath.Join(filepath.Base(real), rest)
		real = filepath.Dir(real)
	}
	for _, root := range s.roots {
		if real == root || strings.HasPrefix(real, root+"/") {
			return nil
		}
	}
	return errdefs.New(errdefs.ErrFailedPrecondition, "Path "+p+" is outside the sandbox's workspace")
}

func notFound(err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return errdefs.New(errdefs.ErrNotFound, "No such file: "+err.(*fs.PathError).Path)
	}
	return err
}

func (s *hostSandbox) ReadFile(ctx context.Context, p string, w io.Writer) error {
	if err := s.check(p); err != nil {
		return err
	}
	f, err := os.Open(p)
	if err != nil {
		return notFound(err)
	}
	defer f.Close()
	_, err = io.Copy(w, f)
	return err
}

func (s *hostSandbox) WriteFile(ctx context.Context, p string, r io.Reader, mode os.FileMode) error {
	if err := s.check(p); err != nil {
		return err
	}
	if mode == 0 {
		mode = 0o644
		if fi, err := os.Stat(p); err == nil {
			mode = fi.Mode().Perm()
		}
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	data, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(p, data, mode)
}

func (s *hostSandbox) Stat(ctx context.Context, p string) (tools.FileInfo, error) {
	if err := s.check(p); err != nil {
		return tools.FileInfo{}, err
	}
	fi, err := os.Stat(p)
	if err != nil {
		return tools.FileInfo{}, notFound(err)
	}
	return tools.FileInfo{Name: fi.Name(), Size: fi.Size(), Mode: fi.Mode(), ModTime: fi.ModTime(), IsDir: fi.IsDir()}, nil
}

func (s *hostSandbox) List(ctx context.Context, p string) ([]tools.FileInfo, error) {
	if err := s.check(p); err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(p)
	if err != nil {
		return nil, notFound(err)
	}
	var out []tools.FileInfo
	for _, e := range entries {
		fi, err := e.Info()
		if err != nil {
			return nil, err
		}
		out = append(out, tools.FileInfo{Name: fi.Name(), Size: fi.Size(), Mode: fi.Mode(), ModTime: fi.ModTime(), IsDir: fi.IsDir()})
	}
	return out, nil
}

// put writes a file into the office.
func (s *hostSandbox) put(t *testing.T, rel string, data []byte) {
	t.Helper()
	p := filepath.Join(s.office, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// get reads a file of the office.
func (s *hostSandbox) get(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(s.office, rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

var logID = regexp.MustCompile(`\.hutch/output/[0-9a-f]{16}\.log`)

// golden compares got with testdata/<name>.golden (rewritten with -update).
// Saved-output ids, which are random, are masked.
func golden(t *testing.T, name, got string) {
	t.Helper()
	got = logID.ReplaceAllString(got, ".hutch/output/<id>.log")
	file := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from %s:\n--- got ---\n%s\n--- want ---\n%s", name, file, got, want)
	}
}

// lastLines returns the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	return strings.Join(lines[max(len(lines)-n, 0):], "\n")
}

// errText is err's text, failing when err is nil.
func errText(t *testing.T, err error) string {
	t.Helper()
	if err == nil {
		t.Fatal("no error")
	}
	return err.Error()
}

func errorsIs(err, target error) bool { return errors.Is(err, target) }
