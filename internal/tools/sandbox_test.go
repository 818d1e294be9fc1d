package tools_test

import (
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/sandbox/host"
	"github.com/hutchsandbox/hutch/internal/tools"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// hostSandbox is a Sandbox over a temporary office on this machine: the
// real host runtime's commands and file operations (confined to the
// office, symlinks followed, as in every mode).
type hostSandbox struct {
	sandbox.Files
	office string
	rt     *host.Runtime
	spec   sandbox.Spec
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
	s := &hostSandbox{office: office, rt: host.New(nil), spec: sandbox.Spec{OfficeDir: office, OfficeRuntimePath: office}}
	s.addRoot(office)
	return s
}

// addRoot lets file operations reach root too.
func (s *hostSandbox) addRoot(root string) {
	s.spec.Mounts = append(s.spec.Mounts, sandbox.Mount{HostPath: root, RuntimePath: root})
	s.Files = s.rt.Files(s.spec)
}

func (s *hostSandbox) Exec(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	return s.rt.Exec(ctx, s.spec, req)
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

func errorsIs(err, target error) bool { return errors.Is(err, target) }
