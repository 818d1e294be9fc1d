// Package sandboxtest is the conformance suite every sandbox mode must
// pass: Run checks the exec contract of sandbox.Runtime (exit codes, argv,
// streams, stdin, working directory, env, time zone, timeout, abort, process-tree
// cleanup, signals, output cap, concurrency) through Runtime.Exec alone,
// so it holds for commands that run on the host, in a container or in a VM
// alike. The commands it runs use POSIX sh and busybox applets only.
package sandboxtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"path"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/sandbox"
)

// Harness is what a mode provides to run the suite.
type Harness struct {
	// New returns a runtime and a spec for a fresh conversation; called
	// once per subtest. The spec's OfficeRuntimePath must be the office as
	// `pwd` prints it inside the runtime (no symlinks), and the office must
	// be writable. /tmp must be writable inside the runtime. New registers
	// with t.Cleanup whatever must be torn down.
	New func(t *testing.T) (sandbox.Runtime, sandbox.Spec)
}

// returnDeadline bounds how long the suite waits for an Exec that must
// return on its own (after a cancel, or once its leader exited). It only
// turns a hang into a failure; it is not a performance expectation.
const returnDeadline = time.Minute

// deathPolls is how often, deathInterval apart, the suite looks for a
// killed process before calling it a survivor.
const (
	deathPolls    = 40
	deathInterval = 250 * time.Millisecond
)

// Run runs the conformance suite against the mode h provides. Each check
// is a subtest of its own (selectable with -run) and runs in parallel.
func Run(t *testing.T, h Harness) {
	t.Helper()
	if h.New == nil {
		t.Fatal("sandboxtest.Harness.New is nil")
	}
	runParallel(t, h, []check{
		{"capabilities", testCapabilities},
		{"exit_codes", testExitCodes},
		{"argv_without_shell", testArgvWithoutShell},
		{"streams_kept_apart", testStreamsKeptApart},
		{"stdin", testStdin},
		{"working_dir", testWorkingDir},
		{"env", testEnv},
		{"time_zone", testTimeZone},
		{"time_zone_env_wins", testTimeZoneEnvWins},
		{"timeout_kills_tree", testTimeout},
		{"abort_kills_tree", testAbort},
		{"leader_exit_kills_background", testLeaderExit},
		{"signal", testSignal},
		{"output_limit", testOutputLimit},
		{"concurrent", testConcurrent},
	})
}

// check is one check of a suite.
type check struct {
	name string
	f    func(*testing.T, sandbox.Runtime, sandbox.Spec)
}

// runParallel runs each check as a subtest of its own, in parallel, on a
// conversation from h.New.
func runParallel(t *testing.T, h Harness, checks []check) {
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			rt, spec := h.New(t)
			c.f(t, rt, spec)
		})
	}
}

// ignoreDuration drops the wall time from result comparisons.
var ignoreDuration = cmpopts.IgnoreFields(sandbox.ExecResult{}, "Duration")

// output is what one Exec printed and how it ended.
type output struct {
	res            sandbox.ExecResult
	stdout, stderr string
}

// run executes req (capturing both streams unless req sets writers) and
// fails the test when Exec returns an error.
func run(t *testing.T, rt sandbox.Runtime, spec sandbox.Spec, req sandbox.ExecRequest) output {
	t.Helper()
	return runCtx(t, t.Context(), rt, spec, req)
}

func runCtx(t *testing.T, ctx context.Context, rt sandbox.Runtime, spec sandbox.Spec, req sandbox.ExecRequest) output {
	t.Helper()
	var out, errb bytes.Buffer
	if req.Stdout == nil {
		req.Stdout = &out
	}
	if req.Stderr == nil {
		req.Stderr = &errb
	}
	res, err := rt.Exec(ctx, spec, req)
	if err != nil {
		t.Fatalf("Exec(%q) error: %v", req.Argv, err)
	}
	return output{res: res, stdout: out.String(), stderr: errb.String()}
}

// unique returns a name no other run uses, for files the suite creates.
func unique() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "hutch-sbt-" + hex.EncodeToString(b[:])
}

func testCapabilities(t *testing.T, rt sandbox.Runtime, _ sandbox.Spec) {
	caps := rt.Capabilities()
	if !caps.CommandExecution {
		t.Errorf("Capabilities().CommandExecution is false for a runtime that executes commands")
	}
	if diff := cmp.Diff(sandbox.CapabilitiesOf(rt.Mode().Kind), caps); diff != "" {
		t.Errorf("Capabilities() differ from the table's entry for %s (-table +runtime):\n%s", rt.Mode(), diff)
	}
}

func testExitCodes(t *testing.T, rt sandbox.Runtime, spec sandbox.Spec) {
	tests := []struct {
		name string
		argv []string
		want int
	}{
		{"zero", []string{"true"}, 0},
		{"three", []string{"exit 3"}, 3},
		{"argv_seven", []string{"sh", "-c", "exit 7"}, 7},
		{"missing_program_127", []string{"hutch-no-such-program-xyz"}, 127},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			o := run(t, rt, spec, sandbox.ExecRequest{Argv: tt.argv})
			got := sandbox.ExecResult{ExitCode: o.res.ExitCode, Signal: o.res.Signal, TimedOut: o.res.TimedOut, Aborted: o.res.Aborted}
			if diff := cmp.Diff(sandbox.ExecResult{ExitCode: tt.want}, got); diff != "" {
				t.Errorf("Exec(%q) mismatch (-want +got):\n%s\nstderr: %q", tt.argv, diff, o.stderr)
			}
		})
	}
}

func testArgvWithoutShell(t *testing.T, rt sandbox.Runtime, spec sandbox.Spec) {
	argv := []string{"printf", "%s|", "a b", "$HOME", "*", ";", `"q"`, ""}
	o := run(t, rt, spec, sandbox.ExecRequest{Argv: argv})
	if want := `a b|$HOME|*|;|"q"||`; o.stdout != want || o.res.ExitCode != 0 {
		t.Errorf("Exec(%q): exit %d, stdout %q, stderr %q; want exit 0, stdout %q (each argument passed as is, no shell)",
			argv, o.res.ExitCode, o.stdout, o.stderr, want)
	}
}

func testStreamsKeptApart(t *testing.T, rt sandbox.Runtime, spec sandbox.Spec) {
	o := run(t, rt, spec, sandbox.ExecRequest{Argv: []string{"echo out; echo err >&2; echo more"}})
	if diff := cmp.Diff([]string{"out\nmore\n", "err\n"}, []string{o.stdout, o.stderr}); diff != "" {
		t.Errorf("[stdout, stderr] mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(sandbox.ExecResult{StdoutBytes: 9, StderrBytes: 4}, o.res, ignoreDuration); diff != "" {
		t.Errorf("result mismatch (-want +got):\n%s", diff)
	}
}

func testStdin(t *testing.T, rt sandbox.Runtime, spec sandbox.Spec) {
	t.Run("fed", func(t *testing.T) {
		t.Parallel()
		o := run(t, rt, spec, sandbox.ExecRequest{Argv: []string{"cat"}, Stdin: strings.NewReader("hello\nworld\n")})
		if o.stdout != "hello\nworld\n" || o.res.ExitCode != 0 {
			t.Errorf("cat: exit %d, stdout %q, stderr %q; want exit 0, stdout %q", o.res.ExitCode, o.stdout, o.stderr, "hello\nworld\n")
		}
	})
	t.Run("large", func(t *testing.T) {
		t.Parallel()
		in := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
		o := run(t, rt, spec, sandbox.ExecRequest{Argv: []string{"cat"}, Stdin: bytes.NewReader(in)})
		if o.stdout != string(in) || o.res.ExitCode != 0 {
			t.Errorf("cat of 1 MiB: exit %d, %d bytes back (equal: %v), stderr %q", o.res.ExitCode, len(o.stdout), o.stdout == string(in), o.stderr)
		}
	})
	t.Run("nil_is_empty", func(t *testing.T) {
		t.Parallel()
		// A stdin left open would make cat wait for ever: the timeout
		// turns that into a failure.
		const timeout = 30 * time.Second
		o := run(t, rt, spec, sandbox.ExecRequest{Argv: []string{"cat"}, Timeout: timeout})
		if diff := cmp.Diff(sandbox.ExecResult{Timeout: timeout}, o.res, ignoreDuration); diff != "" {
			t.Errorf("cat with nil stdin: result mismatch (-want +got):\n%s", diff)
		}
		if o.stdout != "" {
			t.Errorf("cat with nil stdin printed %q, want nothing", o.stdout)
		}
	})
}

func testWorkingDir(t *testing.T, rt sandbox.Runtime, spec sandbox.Spec) {
	office := spec.OfficeRuntimePath
	sub := unique()
	if o := run(t, rt, spec, sandbox.ExecRequest{Argv: []string{"mkdir", "-p", sub + "/dir"}}); o.res.ExitCode != 0 {
		t.Fatalf("mkdir -p %s/dir in the office: exit %d, stderr %q", sub, o.res.ExitCode, o.stderr)
	}
	t.Cleanup(func() {
		_, _ = rt.Exec(context.Background(), spec, sandbox.ExecRequest{Argv: []string{"rm", "-rf", sub}})
	})
	pwd := func(t *testing.T, dir, want string) {
		t.Helper()
		o := run(t, rt, spec, sandbox.ExecRequest{Argv: []string{"pwd"}, Dir: dir})
		if got := strings.TrimSuffix(o.stdout, "\n"); got != want || o.res.ExitCode != 0 {
			t.Errorf("pwd with Dir %q: exit %d, printed %q, stderr %q; want %q", dir, o.res.ExitCode, got, o.stderr, want)
		}
	}
	t.Run("default_is_office", func(t *testing.T) {
		t.Parallel()
		pwd(t, "", office)
	})
	t.Run("relative_resolves_against_office", func(t *testing.T) {
		t.Parallel()
		pwd(t, sub+"/dir", path.Join(office, sub, "dir"))
	})
	t.Run("absolute", func(t *testing.T) {
		t.Parallel()
		pwd(t, path.Join(office, sub), path.Join(office, sub))
	})
	for _, tt := range []struct{ name, dir string }{
		{"missing_relative", sub + "/missing"},
		{"missing_absolute", path.Join(office, sub, "missing")},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res, err := rt.Exec(t.Context(), spec, sandbox.ExecRequest{Argv: []string{"pwd"}, Dir: tt.dir})
			if !errdefs.IsInvalid(err) {
				t.Errorf("Exec with missing Dir %q: result %+v, error %v; want an error of class ErrInvalid", tt.dir, res, err)
			}
		})
	}
}

// testTimeZone: every mode runs a command with TZ set to the request's
// TimeZone (sandbox.timezone), unless the request's env sets TZ.
func testTimeZone(t *testing.T, rt sandbox.Runtime, spec sandbox.Spec) {
	o := run(t, rt, spec, sandbox.ExecRequest{Argv: []string{`printf %s "$TZ"`}, TimeZone: "Asia/Tokyo"})
	if o.stdout != "Asia/Tokyo" || o.res.ExitCode != 0 {
		t.Errorf("TZ with TimeZone Asia/Tokyo: exit %d, printed %q, stderr %q", o.res.ExitCode, o.stdout, o.stderr)
	}
}

// testTimeZoneEnvWins: a TZ in the request's env (a vault's) wins over
// TimeZone, in the modes that inject env.
func testTimeZoneEnvWins(t *testing.T, rt sandbox.Runtime, spec sandbox.Spec) {
	if !rt.Capabilities().VaultEnv {
		t.Skip("the mode injects no env")
	}
	o := run(t, rt, spec, sandbox.ExecRequest{Argv: []string{`printf %s "$TZ"`}, TimeZone: "Asia/Tokyo", Env: map[string]string{"TZ": "UTC"}})
	if o.stdout != "UTC" || o.res.ExitCode != 0 {
		t.Errorf("TZ with TimeZone Asia/Tokyo and Env TZ=UTC: exit %d, printed %q, stderr %q; want UTC", o.res.ExitCode, o.stdout, o.stderr)
	}
}

func testEnv(t *testing.T, rt sandbox.Runtime, spec sandbox.Spec) {
	if !rt.Capabilities().VaultEnv {
		// The mode injects no env: a request carrying some is refused
		// before anything runs, never run without it.
		marker := "/tmp/" + unique()
		t.Cleanup(func() {
			_, _ = rt.Exec(context.Background(), spec, sandbox.ExecRequest{Argv: []string{"rm", "-f", marker}})
		})
		res, err := rt.Exec(t.Context(), spec, sandbox.ExecRequest{
			Argv: []string{"touch " + marker}, Env: map[string]string{"HUTCH_T": "v"},
		})
		if !errdefs.IsInvalid(err) {
			t.Errorf("Exec with Env in a mode without VaultEnv: result %+v, error %v; want an error of class ErrInvalid", res, err)
		}
		if o := run(t, rt, spec, sandbox.ExecRequest{Argv: []string{"test", "-e", marker}}); o.res.ExitCode != 1 {
			t.Errorf("the refused command ran anyway: %s exists (test -e exit %d)", marker, o.res.ExitCode)
		}
		return
	}
	const value = "s3cret value with spaces"
	env := map[string]string{"HUTCH_T": value}
	for _, tt := range []struct {
		name string
		argv []string
	}{
		{"shell", []string{`echo "$HUTCH_T"`}},
		{"argv", []string{"sh", "-c", `echo "$HUTCH_T"`}},
	} {
		o := run(t, rt, spec, sandbox.ExecRequest{Argv: tt.argv, Env: env})
		if o.stdout != value+"\n" || o.res.ExitCode != 0 {
			t.Errorf("%s: Env did not reach the command: exit %d, stdout %q, stderr %q; want %q", tt.name, o.res.ExitCode, o.stdout, o.stderr, value+"\n")
		}
	}
	o := run(t, rt, spec, sandbox.ExecRequest{Argv: []string{`echo "${HUTCH_T-unset}"`}})
	if o.stdout != "unset\n" {
		t.Errorf("a later command without Env sees HUTCH_T: stdout %q, want %q", o.stdout, "unset\n")
	}
}

// pidFiles records, under /tmp inside the runtime, the pid of a command's
// leader and of a background grandchild it starts.
type pidFiles struct {
	rt     sandbox.Runtime
	spec   sandbox.Spec
	prefix string
}

func newPidFiles(t *testing.T, rt sandbox.Runtime, spec sandbox.Spec) *pidFiles {
	p := &pidFiles{rt: rt, spec: spec, prefix: "/tmp/" + unique()}
	t.Cleanup(func() {
		_, _ = rt.Exec(context.Background(), spec, sandbox.ExecRequest{
			Argv: []string{"rm", "-f", p.prefix + ".leader", p.prefix + ".child"},
		})
	})
	return p
}

// script writes the leader's pid, starts `sleep 600` in the background,
// writes its pid, then runs tail. Each file appears complete or not at all.
func (p *pidFiles) script(tail string) string {
	return `echo $$ > ` + p.prefix + `.leader.tmp && mv ` + p.prefix + `.leader.tmp ` + p.prefix + `.leader; ` +
		`sleep 600 & echo $! > ` + p.prefix + `.child.tmp && mv ` + p.prefix + `.child.tmp ` + p.prefix + `.child; ` + tail
}

// read returns the pids named (leader, child or both), failing the test
// when a file is missing.
func (p *pidFiles) read(t *testing.T, names ...string) []int {
	t.Helper()
	argv := []string{"cat"}
	for _, n := range names {
		argv = append(argv, p.prefix+"."+n)
	}
	o := run(t, p.rt, p.spec, sandbox.ExecRequest{Argv: argv})
	fields := strings.Fields(o.stdout)
	if o.res.ExitCode != 0 || len(fields) != len(names) {
		t.Fatalf("reading the pid files %v: exit %d, stdout %q, stderr %q (the command did not get to write them)", names, o.res.ExitCode, o.stdout, o.stderr)
	}
	pids := make([]int, len(names))
	for i, name := range names {
		pid, err := strconv.Atoi(fields[i])
		if err != nil || pid <= 1 {
			t.Fatalf("pid file %s.%s holds %q", p.prefix, name, fields[i])
		}
		pids[i] = pid
	}
	return pids
}

// waitFor polls until the pid file name exists.
func (p *pidFiles) waitFor(t *testing.T, name string) {
	t.Helper()
	for deadline := time.Now().Add(returnDeadline); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		o := run(t, p.rt, p.spec, sandbox.ExecRequest{Argv: []string{"test", "-s", p.prefix + "." + name}})
		if o.res.ExitCode == 0 {
			return
		}
	}
	t.Fatalf("pid file %s.%s never appeared", p.prefix, name)
}

// aliveScript prints those of its arguments that name a running process:
// a pid without /proc/<pid>/stat, or a zombie (state Z, waiting to be
// reaped by whichever process inherited it), counts as dead.
const aliveScript = `alive=
for p do
	s=$(cat "/proc/$p/stat" 2>/dev/null) || continue
	s=${s##*) }
	case $s in
	'' | Z*) ;;
	*) alive="$alive $p" ;;
	esac
done
echo $alive`

// alive returns the pids among pids that still run inside the runtime.
func alive(t *testing.T, rt sandbox.Runtime, spec sandbox.Spec, pids []int) []string {
	t.Helper()
	argv := []string{"sh", "-c", aliveScript, "sh"}
	for _, p := range pids {
		argv = append(argv, strconv.Itoa(p))
	}
	o := run(t, rt, spec, sandbox.ExecRequest{Argv: argv})
	if o.res.ExitCode != 0 {
		t.Fatalf("liveness check: exit %d, stderr %q", o.res.ExitCode, o.stderr)
	}
	return strings.Fields(o.stdout)
}

// assertDead polls for the kernel to finish the kill; survivors fail the
// test and are killed so that nothing is left behind.
func assertDead(t *testing.T, rt sandbox.Runtime, spec sandbox.Spec, what string, pids []int) {
	t.Helper()
	var left []string
	for i := 0; i < deathPolls; i++ {
		if left = alive(t, rt, spec, pids); len(left) == 0 {
			return
		}
		time.Sleep(deathInterval)
	}
	t.Errorf("%s (pids %v) still run after Exec returned", what, left)
	_, _ = rt.Exec(context.Background(), spec, sandbox.ExecRequest{Argv: append([]string{"kill", "-KILL"}, left...)})
}

func testTimeout(t *testing.T, rt sandbox.Runtime, spec sandbox.Spec) {
	p := newPidFiles(t, rt, spec)
	o := run(t, rt, spec, sandbox.ExecRequest{Argv: []string{p.script("sleep 600")}, Timeout: time.Second})
	want := sandbox.ExecResult{ExitCode: -1, TimedOut: true, Timeout: time.Second}
	if diff := cmp.Diff(want, o.res, ignoreDuration); diff != "" {
		t.Errorf("result mismatch (-want +got):\n%s", diff)
	}
	if got, want := o.res.Message(), "Command timed out after 1 second"; got != want {
		t.Errorf("Message() = %q, want %q", got, want)
	}
	assertDead(t, rt, spec, "the leader and its background grandchild", p.read(t, "leader", "child"))
}

func testAbort(t *testing.T, rt sandbox.Runtime, spec sandbox.Spec) {
	p := newPidFiles(t, rt, spec)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	type outcome struct {
		res sandbox.ExecResult
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := rt.Exec(ctx, spec, sandbox.ExecRequest{
			Argv:    []string{p.script("sleep 600")},
			Timeout: time.Hour, // armed, but the abort must win and be reported as such
		})
		done <- outcome{res, err}
	}()
	p.waitFor(t, "child")
	cancel()
	var o outcome
	select {
	case o = <-done:
	case <-time.After(returnDeadline):
		t.Fatalf("Exec did not return within %v of the cancel", returnDeadline)
	}
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
	assertDead(t, rt, spec, "the leader and its background grandchild", p.read(t, "leader", "child"))
}

func testLeaderExit(t *testing.T, rt sandbox.Runtime, spec sandbox.Spec) {
	p := newPidFiles(t, rt, spec)
	type outcome struct {
		output
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		var out, errb bytes.Buffer
		res, err := rt.Exec(t.Context(), spec, sandbox.ExecRequest{Argv: []string{p.script("echo done")}, Stdout: &out, Stderr: &errb})
		done <- outcome{output{res: res, stdout: out.String(), stderr: errb.String()}, err}
	}()
	var o outcome
	select {
	case o = <-done:
	case <-time.After(returnDeadline):
		// The background sleep (600 s) holds the command up.
		t.Fatalf("Exec did not return within %v although the leader exited at once", returnDeadline)
	}
	if o.err != nil {
		t.Fatalf("Exec error: %v", o.err)
	}
	if diff := cmp.Diff(sandbox.ExecResult{StdoutBytes: 5}, o.res, ignoreDuration); diff != "" {
		t.Errorf("result mismatch (-want +got):\n%s\nstderr: %q", diff, o.stderr)
	}
	if o.stdout != "done\n" {
		t.Errorf("stdout = %q, want %q", o.stdout, "done\n")
	}
	assertDead(t, rt, spec, "the background child", p.read(t, "child"))
}

func testSignal(t *testing.T, rt sandbox.Runtime, spec sandbox.Spec) {
	o := run(t, rt, spec, sandbox.ExecRequest{Argv: []string{"kill -SEGV $$"}})
	if diff := cmp.Diff(sandbox.ExecResult{ExitCode: -1, Signal: "SIGSEGV"}, o.res, ignoreDuration); diff != "" {
		t.Errorf("result mismatch (-want +got):\n%s\nstderr: %q", diff, o.stderr)
	}
	if got, want := o.res.Message(), "Command was killed by SIGSEGV"; got != want {
		t.Errorf("Message() = %q, want %q", got, want)
	}
}

func testOutputLimit(t *testing.T, rt sandbox.Runtime, spec sandbox.Spec) {
	const total = 20_000_000
	const limit = 1 << 20
	var out bytes.Buffer
	o := run(t, rt, spec, sandbox.ExecRequest{
		Argv:        []string{"head -c " + strconv.Itoa(total) + " /dev/zero"},
		Stdout:      &out,
		OutputLimit: limit,
	})
	want := sandbox.ExecResult{StdoutTruncated: true, StdoutBytes: total}
	if diff := cmp.Diff(want, o.res, ignoreDuration); diff != "" {
		t.Errorf("result mismatch (-want +got):\n%s\nstderr: %q", diff, o.stderr)
	}
	if out.Len() != limit {
		t.Errorf("kept %d bytes, want exactly %d", out.Len(), limit)
	}
	if n := bytes.Count(out.Bytes(), []byte{0}); n != out.Len() {
		t.Errorf("kept output holds %d bytes other than NUL, want only what /dev/zero printed", out.Len()-n)
	}
}

func testConcurrent(t *testing.T, rt sandbox.Runtime, spec sandbox.Spec) {
	const n = 20
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			id := strconv.Itoa(i)
			var out, errb bytes.Buffer
			res, err := rt.Exec(t.Context(), spec, sandbox.ExecRequest{
				Argv:   []string{"sh", "-c", `echo "out-$1"; echo "err-$1" >&2; cat; exit "$1"`, "sh", id},
				Stdin:  strings.NewReader("in-" + id),
				Stdout: &out, Stderr: &errb,
			})
			if err != nil {
				t.Errorf("exec %d: error %v", i, err)
				return
			}
			got := []string{strconv.Itoa(res.ExitCode), out.String(), errb.String()}
			if diff := cmp.Diff([]string{id, "out-" + id + "\nin-" + id, "err-" + id + "\n"}, got); diff != "" {
				t.Errorf("exec %d: [exit, stdout, stderr] mismatch (-want +got):\n%s", i, diff)
			}
		})
	}
	wg.Wait()
}
