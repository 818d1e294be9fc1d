package host

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/supervise/supervisetest"
)

func TestMain(m *testing.M) {
	supervisetest.MaybeEscape()
	os.Exit(m.Run())
}

// ignoreDuration drops the wall time from result comparisons.
var ignoreDuration = cmpopts.IgnoreFields(sandbox.ExecResult{}, "Duration")

func mustExec(t *testing.T, rt *Runtime, spec sandbox.Spec, req sandbox.ExecRequest) sandbox.ExecResult {
	t.Helper()
	res, err := rt.Exec(context.Background(), spec, req)
	if err != nil {
		t.Fatalf("Exec(%q) error: %v", req.Argv, err)
	}
	return res
}

func office(t *testing.T) sandbox.Spec {
	t.Helper()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return sandbox.Spec{OfficeKey: "o1", OfficeDir: dir, OfficeRuntimePath: dir}
}

func TestRuntime_ModeAndCapabilities(t *testing.T) {
	rt := New(nil)
	if diff := cmp.Diff(sandbox.Mode{Kind: sandbox.KindHost}, rt.Mode()); diff != "" {
		t.Errorf("Mode() mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(sandbox.CapabilitiesOf(sandbox.KindHost), rt.Capabilities()); diff != "" {
		t.Errorf("Capabilities() mismatch (-want +got):\n%s", diff)
	}
}

func TestExec_ExitCode(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		argv   []string
		want   int
		signal string
	}{
		{"shell_exit_3", []string{"exit 3"}, 3, ""},
		{"shell_true", []string{"true"}, 0, ""},
		{"argv_direct", []string{"sh", "-c", "exit 7"}, 7, ""},
		{"shell_not_found", []string{"hutch-no-such-program-xyz"}, 127, ""},
		{"killed_by_signal", []string{"kill -TERM $$"}, -1, "SIGTERM"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res := mustExec(t, New(nil), office(t), sandbox.ExecRequest{Argv: tt.argv})
			want := sandbox.ExecResult{ExitCode: tt.want, Signal: tt.signal}
			if tt.name == "shell_not_found" {
				want.StderrBytes = res.StderrBytes // the shell's complaint
			}
			if diff := cmp.Diff(want, res, ignoreDuration); diff != "" {
				t.Errorf("result mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestExec_StreamsKeptApart(t *testing.T) {
	t.Parallel()
	var out, errb bytes.Buffer
	res := mustExec(t, New(nil), office(t), sandbox.ExecRequest{
		Argv:   []string{"echo out; echo error >&2; echo more"},
		Stdout: &out, Stderr: &errb,
	})
	got := []string{out.String(), errb.String()}
	if diff := cmp.Diff([]string{"out\nmore\n", "error\n"}, got); diff != "" {
		t.Errorf("streams mismatch (-want +got):\n%s", diff)
	}
	want := sandbox.ExecResult{StdoutBytes: 9, StderrBytes: 6}
	if diff := cmp.Diff(want, res, ignoreDuration); diff != "" {
		t.Errorf("result mismatch (-want +got):\n%s", diff)
	}
}

func TestExec_SameWriterForBothStreams(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	res := mustExec(t, New(nil), office(t), sandbox.ExecRequest{
		Argv:   []string{"for i in 1 2 3 4 5; do echo o; echo e >&2; done"},
		Stdout: &buf, Stderr: &buf,
	})
	if got := strings.Count(buf.String(), "o\n") + strings.Count(buf.String(), "e\n"); got != 10 {
		t.Errorf("shared buffer holds %d lines, want 10: %q", got, buf.String())
	}
	if res.StdoutBytes != 10 || res.StderrBytes != 10 {
		t.Errorf("byte counts = %d/%d, want 10/10", res.StdoutBytes, res.StderrBytes)
	}
}

func TestExec_Stdin(t *testing.T) {
	t.Parallel()
	t.Run("fed", func(t *testing.T) {
		t.Parallel()
		var out bytes.Buffer
		mustExec(t, New(nil), office(t), sandbox.ExecRequest{
			Argv: []string{"cat"}, Stdin: strings.NewReader("hello\nworld\n"), Stdout: &out,
		})
		if diff := cmp.Diff("hello\nworld\n", out.String()); diff != "" {
			t.Errorf("stdout mismatch (-want +got):\n%s", diff)
		}
	})
	t.Run("nil_is_empty", func(t *testing.T) {
		t.Parallel()
		var out bytes.Buffer
		res := mustExec(t, New(nil), office(t), sandbox.ExecRequest{Argv: []string{"wc -c"}, Stdout: &out})
		if got := strings.TrimSpace(out.String()); got != "0" || res.ExitCode != 0 {
			t.Errorf("wc -c on nil stdin = %q, exit %d; want \"0\", exit 0", got, res.ExitCode)
		}
	})
	t.Run("unread", func(t *testing.T) {
		t.Parallel()
		// More than a pipe holds, never read: the command still ends.
		res := mustExec(t, New(nil), office(t), sandbox.ExecRequest{
			Argv: []string{"exit 4"}, Stdin: bytes.NewReader(make([]byte, 4<<20)),
		})
		if res.ExitCode != 4 {
			t.Errorf("ExitCode = %d, want 4", res.ExitCode)
		}
	})
}

func TestExec_WorkingDir(t *testing.T) {
	t.Parallel()
	spec := office(t)
	sub := filepath.Join(spec.OfficeDir, "sub", "deeper")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	other, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	tool := filepath.Join(sub, "tool.sh")
	if err := os.WriteFile(tool, []byte("#!/bin/sh\necho tool \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		dir  string
		argv []string
		want string
	}{
		{"default_is_office", "", []string{"pwd -P"}, spec.OfficeDir + "\n"},
		{"relative_joins_office", "sub/deeper", []string{"pwd -P"}, sub + "\n"},
		{"absolute_as_is", other, []string{"pwd -P"}, other + "\n"},
		{"pwd_env_matches", "sub", []string{"echo $PWD"}, filepath.Join(spec.OfficeDir, "sub") + "\n"},
		{"relative_program_resolves_in_dir", "sub/deeper", []string{"./tool.sh", "a b", "c"}, "tool a b c\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var out bytes.Buffer
			mustExec(t, New(nil), spec, sandbox.ExecRequest{Argv: tt.argv, Dir: tt.dir, Stdout: &out})
			if diff := cmp.Diff(tt.want, out.String()); diff != "" {
				t.Errorf("stdout mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestExec_InvalidRequests(t *testing.T) {
	t.Parallel()
	spec := office(t)
	file := filepath.Join(spec.OfficeDir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(spec.OfficeDir, "noexec"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		spec sandbox.Spec
		req  sandbox.ExecRequest
		want string
	}{
		{"missing_dir", spec, sandbox.ExecRequest{Argv: []string{"true"}, Dir: "nope"},
			"Working directory does not exist: " + filepath.Join(spec.OfficeDir, "nope")},
		{"missing_office", sandbox.Spec{OfficeDir: filepath.Join(spec.OfficeDir, "gone")}, sandbox.ExecRequest{Argv: []string{"true"}},
			"Working directory does not exist: " + filepath.Join(spec.OfficeDir, "gone")},
		{"dir_is_file", spec, sandbox.ExecRequest{Argv: []string{"true"}, Dir: file},
			"Working directory is not a directory: " + file},
		{"missing_program", spec, sandbox.ExecRequest{Argv: []string{"hutch-no-such-program-xyz", "arg"}},
			"Program not found: hutch-no-such-program-xyz"},
		{"missing_relative_program", spec, sandbox.ExecRequest{Argv: []string{"./missing", "arg"}},
			"Program not found: ./missing"},
		{"not_executable", spec, sandbox.ExecRequest{Argv: []string{"./noexec", "arg"}},
			"Program is not executable: ./noexec"},
		{"empty_argv", spec, sandbox.ExecRequest{}, "Command is empty"},
		{"blank_shell_string", spec, sandbox.ExecRequest{Argv: []string{"  "}}, "Command is empty"},
		{"env_refused", spec, sandbox.ExecRequest{Argv: []string{"true"}, Env: map[string]string{"TOKEN": "s3cret"}},
			"Sandbox 'host' does not inject vault env"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res, err := New(nil).Exec(context.Background(), tt.spec, tt.req)
			if err == nil {
				t.Fatalf("Exec succeeded (%+v), want error %q", res, tt.want)
			}
			if diff := cmp.Diff(tt.want, err.Error()); diff != "" {
				t.Errorf("error text mismatch (-want +got):\n%s", diff)
			}
			if !errdefs.IsInvalid(err) {
				t.Errorf("error %v is not of class ErrInvalid", err)
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Errorf("error text leaks an env value: %v", err)
			}
		})
	}
}

func TestExec_AlreadyCancelled(t *testing.T) {
	t.Parallel()
	spec := office(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res, err := New(nil).Exec(ctx, spec, sandbox.ExecRequest{Argv: []string{"touch ran"}})
	if err != nil {
		t.Fatalf("Exec error: %v", err)
	}
	if diff := cmp.Diff(sandbox.ExecResult{ExitCode: -1, Aborted: true}, res, ignoreDuration); diff != "" {
		t.Errorf("result mismatch (-want +got):\n%s", diff)
	}
	if _, err := os.Stat(filepath.Join(spec.OfficeDir, "ran")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the command ran after cancellation (stat: %v)", err)
	}
}

// spawnScript starts a background grandchild and records both pids; the
// leader then runs `tail`.
func spawnScript(tail string) string {
	return `echo $$ > leader.tmp && mv leader.tmp leader; ` +
		`sleep 300 & echo $! > child.tmp && mv child.tmp child; ` + tail
}

func TestExec_TimeoutKillsGroup(t *testing.T) {
	t.Parallel()
	spec := office(t)
	res := mustExec(t, New(nil), spec, sandbox.ExecRequest{
		Argv:    []string{spawnScript("sleep 300")},
		Timeout: time.Second,
	})
	want := sandbox.ExecResult{ExitCode: -1, TimedOut: true, Timeout: time.Second}
	if diff := cmp.Diff(want, res, ignoreDuration); diff != "" {
		t.Errorf("result mismatch (-want +got):\n%s", diff)
	}
	if got, want := res.Message(), "Command timed out after 1 second"; got != want {
		t.Errorf("Message() = %q, want %q", got, want)
	}
	supervisetest.AssertDead(t, "leader", supervisetest.ReadPid(t, filepath.Join(spec.OfficeDir, "leader")))
	supervisetest.AssertDead(t, "grandchild", supervisetest.ReadPid(t, filepath.Join(spec.OfficeDir, "child")))
}

func TestExec_AbortKillsGroup(t *testing.T) {
	t.Parallel()
	spec := office(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type outcome struct {
		res sandbox.ExecResult
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := New(nil).Exec(ctx, spec, sandbox.ExecRequest{
			Argv:    []string{spawnScript("sleep 300")},
			Timeout: time.Hour, // armed, but the abort must win and be reported as such
		})
		done <- outcome{res, err}
	}()
	supervisetest.WaitForFile(t, filepath.Join(spec.OfficeDir, "child"))
	cancel()
	o := <-done
	if o.err != nil {
		t.Fatalf("Exec error: %v", o.err)
	}
	want := sandbox.ExecResult{ExitCode: -1, Aborted: true, Timeout: time.Hour}
	if diff := cmp.Diff(want, o.res, ignoreDuration); diff != "" {
		t.Errorf("result mismatch (-want +got):\n%s", diff)
	}
	if got, want := o.res.Message(), "Command aborted"; got != want {
		t.Errorf("Message() = %q, want %q", got, want)
	}
	supervisetest.AssertDead(t, "leader", supervisetest.ReadPid(t, filepath.Join(spec.OfficeDir, "leader")))
	supervisetest.AssertDead(t, "grandchild", supervisetest.ReadPid(t, filepath.Join(spec.OfficeDir, "child")))
}

func TestExec_LeaderExitKillsBackground(t *testing.T) {
	t.Parallel()
	spec := office(t)
	rt := New(nil)
	// Were the background child left alive, it would hold stdout open and
	// Exec would sit out the whole drain grace; make that a visible hang.
	rt.drainGrace = time.Hour
	var out bytes.Buffer
	res := mustExec(t, rt, spec, sandbox.ExecRequest{Argv: []string{spawnScript("echo done")}, Stdout: &out})
	want := sandbox.ExecResult{ExitCode: 0, StdoutBytes: 5}
	if diff := cmp.Diff(want, res, ignoreDuration); diff != "" {
		t.Errorf("result mismatch (-want +got):\n%s", diff)
	}
	if out.String() != "done\n" {
		t.Errorf("stdout = %q, want %q", out.String(), "done\n")
	}
	supervisetest.AssertDead(t, "background child", supervisetest.ReadPid(t, filepath.Join(spec.OfficeDir, "child")))
}

func TestExec_EscapedProcessDoesNotHoldResult(t *testing.T) {
	t.Parallel()
	spec := office(t)
	e := supervisetest.NewEscaper(t, spec.OfficeDir)
	rt := New(nil)
	rt.drainGrace = 100 * time.Millisecond
	var out bytes.Buffer
	res := mustExec(t, rt, spec, sandbox.ExecRequest{Argv: e.Argv, Stdout: &out})
	e.Check(t, res.ExitCode, out.String())
}

func TestExec_OutputCap(t *testing.T) {
	// Not parallel: the allocation counters must see this test alone.
	const total = 200_000_000
	const limit = 1 << 20
	var out bytes.Buffer
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	res := mustExec(t, New(nil), office(t), sandbox.ExecRequest{
		Argv:        []string{"head -c 200000000 /dev/zero; echo tail >&2"},
		Stdout:      &out,
		OutputLimit: limit,
	})
	// Collected first, so HeapAlloc is what is still held, not garbage a
	// loaded machine's collector has not reached yet; TotalAlloc below
	// bounds the garbage.
	runtime.GC()
	runtime.ReadMemStats(&after)
	want := sandbox.ExecResult{StdoutTruncated: true, StdoutBytes: total, StderrBytes: 5}
	if diff := cmp.Diff(want, res, ignoreDuration); diff != "" {
		t.Errorf("result mismatch (-want +got):\n%s", diff)
	}
	if out.Len() != limit {
		t.Errorf("kept %d bytes, want exactly %d", out.Len(), limit)
	}
	const bound = 32 << 20
	if grew := int64(after.HeapAlloc) - int64(before.HeapAlloc); grew > bound {
		t.Errorf("heap grew by %d bytes, want < %d", grew, bound)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > bound {
		t.Errorf("allocated %d bytes in total, want < %d", alloc, bound)
	}
}

func TestRuntime_Exec_ReportsSignal(t *testing.T) {
	res, err := New(nil).Exec(context.Background(), sandbox.Spec{OfficeDir: t.TempDir()}, sandbox.ExecRequest{Argv: []string{"kill -SEGV $$"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Signal != "SIGSEGV" || res.ExitCode != -1 {
		t.Errorf("got Signal %q, ExitCode %d; want SIGSEGV, -1", res.Signal, res.ExitCode)
	}
	if got, want := res.Message(), "Command was killed by SIGSEGV"; got != want {
		t.Errorf("Message() got %q, want %q", got, want)
	}
}
