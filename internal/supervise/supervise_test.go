package supervise

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"golang.org/x/sys/unix"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/supervise/supervisetest"
)

// The test binary doubles as helper processes, chosen by this variable.
const helperEnv = "HUTCH_SUPERVISE_TEST_HELPER"

func TestMain(m *testing.M) {
	supervisetest.MaybeEscape()
	if os.Getenv(helperEnv) == "reap-all" {
		os.Exit(reapAllHelper())
	}
	os.Exit(m.Run())
}

// ignoreDuration drops the wall time from result comparisons.
var ignoreDuration = cmpopts.IgnoreFields(Result{}, "Duration")

// shellCommand is a Command running script in dir.
func shellCommand(t *testing.T, dir, script string) Command {
	t.Helper()
	cmd, err := Resolve([]string{script}, dir, os.Environ())
	if err != nil {
		t.Fatal(err)
	}
	return cmd
}

// run starts cmd and waits for it with ctx.
func run(t *testing.T, ctx context.Context, cmd Command) Result {
	t.Helper()
	p, err := Start(cmd)
	if err != nil {
		t.Fatalf("Start(%q) error: %v", cmd.Args, err)
	}
	return p.Wait(ctx)
}

func TestWait_ExitCodeAndSignal(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		script string
		want   Result
	}{
		{"true", Result{ExitCode: 0}},
		{"exit 3", Result{ExitCode: 3}},
		{"kill -SEGV $$", Result{ExitCode: -1, Signal: "SIGSEGV"}},
	} {
		t.Run(tt.script, func(t *testing.T) {
			t.Parallel()
			got := run(t, context.Background(), shellCommand(t, t.TempDir(), tt.script))
			if diff := cmp.Diff(tt.want, got, ignoreDuration); diff != "" {
				t.Errorf("result mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestWait_StreamsKeptApartAndStdinFed(t *testing.T) {
	t.Parallel()
	var out, errOut bytes.Buffer
	cmd := shellCommand(t, t.TempDir(), "cat; echo err >&2")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = strings.NewReader("in\n"), &out, &errOut
	if res := run(t, context.Background(), cmd); res.ExitCode != 0 {
		t.Fatalf("exit %d, want 0", res.ExitCode)
	}
	if out.String() != "in\n" || errOut.String() != "err\n" {
		t.Errorf("stdout %q, stderr %q; want %q, %q", out.String(), errOut.String(), "in\n", "err\n")
	}
}

// A command without stdin gets /dev/null, not an empty pipe: programs that
// read stdin whenever it is a pipe (ripgrep, for one) would answer
// differently.
func TestStart_NoStdinIsDevNull(t *testing.T) {
	t.Parallel()
	script := `if [ -c /dev/stdin ]; then echo chardev; elif [ -p /dev/stdin ]; then echo fifo; fi`
	for _, tt := range []struct {
		name  string
		stdin io.Reader
		want  string
	}{
		{"nil", nil, "chardev\n"},
		{"reader", strings.NewReader(""), "fifo\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			cmd := shellCommand(t, t.TempDir(), script)
			cmd.Stdin, cmd.Stdout = tt.stdin, &out
			run(t, context.Background(), cmd)
			if out.String() != tt.want {
				t.Errorf("stdin is %q, want %q", out.String(), tt.want)
			}
		})
	}
}

// familyScript starts a child that starts a grandchild, records the pids
// of all three, and leaves the leader running `tail`.
func familyScript(tail string) string {
	return `echo $$ > leader.tmp && mv leader.tmp leader; ` +
		`sh -c 'sleep 300 & echo $! > grandchild.tmp && mv grandchild.tmp grandchild; wait' & ` +
		`echo $! > child.tmp && mv child.tmp child; ` +
		`while [ ! -e grandchild ]; do sleep 0.01; done; ` + tail
}

func TestWait_AbortKillsTheWholeGroup(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmd := shellCommand(t, dir, familyScript("sleep 300"))
	cmd.Timeout = time.Hour // armed, but the abort must win and be reported as such
	done := make(chan Result, 1)
	go func() { done <- run(t, ctx, cmd) }()
	// The grandchild's file can appear before the leader has written the
	// child's (the background shell races it): wait for all three.
	for _, who := range []string{"leader", "child", "grandchild"} {
		supervisetest.WaitForFile(t, filepath.Join(dir, who))
	}
	cancel()
	want := Result{ExitCode: -1, Aborted: true}
	if diff := cmp.Diff(want, <-done, ignoreDuration); diff != "" {
		t.Errorf("result mismatch (-want +got):\n%s", diff)
	}
	for _, who := range []string{"leader", "child", "grandchild"} {
		supervisetest.AssertDead(t, who, supervisetest.ReadPid(t, filepath.Join(dir, who)))
	}
}

func TestWait_TimeoutIsReportedAsSuch(t *testing.T) {
	t.Parallel()
	cmd := shellCommand(t, t.TempDir(), "exec sleep 300")
	cmd.Timeout = 50 * time.Millisecond
	want := Result{ExitCode: -1, TimedOut: true} // no Signal: the SIGKILL was ours
	if diff := cmp.Diff(want, run(t, context.Background(), cmd), ignoreDuration); diff != "" {
		t.Errorf("result mismatch (-want +got):\n%s", diff)
	}
}

func TestWait_LeaderExitKillsTheGroup(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var out bytes.Buffer
	cmd := shellCommand(t, dir, familyScript("echo done"))
	cmd.Stdout = &out
	// Were the family left alive, it would hold stdout open and Wait would
	// sit out the whole drain grace: make that a visible hang.
	cmd.DrainGrace = time.Hour
	want := Result{ExitCode: 0}
	if diff := cmp.Diff(want, run(t, context.Background(), cmd), ignoreDuration); diff != "" {
		t.Errorf("result mismatch (-want +got):\n%s", diff)
	}
	if out.String() != "done\n" {
		t.Errorf("stdout = %q, want %q", out.String(), "done\n")
	}
	supervisetest.AssertDead(t, "child", supervisetest.ReadPid(t, filepath.Join(dir, "child")))
	supervisetest.AssertDead(t, "grandchild", supervisetest.ReadPid(t, filepath.Join(dir, "grandchild")))
}

// countWriter counts what it is given.
type countWriter struct{ n int64 }

func (c *countWriter) Write(p []byte) (int, error) {
	c.n += int64(len(p))
	return len(p), nil
}

func TestWait_DrainsOutputWrittenBeforeTheEnd(t *testing.T) {
	t.Parallel()
	const size = 4 << 20 // far more than a pipe holds
	var out countWriter
	cmd := shellCommand(t, t.TempDir(), fmt.Sprintf("head -c %d /dev/zero; exit 1", size))
	cmd.Stdout = &out
	if res := run(t, context.Background(), cmd); res.ExitCode != 1 {
		t.Fatalf("exit %d, want 1", res.ExitCode)
	}
	if out.n != size {
		t.Errorf("got %d bytes of output, want %d", out.n, size)
	}
}

func TestWait_DrainGraceBoundsAnEscapedHolder(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := supervisetest.NewEscaper(t, dir)
	cmd, err := Resolve(e.Argv, dir, os.Environ())
	if err != nil {
		t.Fatal(err)
	}
	// Without the grace Wait would wait for the child's five minutes.
	var out bytes.Buffer
	cmd.Stdout, cmd.DrainGrace = &out, 100*time.Millisecond
	res := run(t, context.Background(), cmd)
	e.Check(t, res.ExitCode, out.String())
}

// blockedReader blocks in Read until it is closed, and records that it
// returned.
type blockedReader struct {
	closed   chan struct{}
	returned atomic.Bool
}

func (b *blockedReader) Read([]byte) (int, error) {
	<-b.closed
	b.returned.Store(true)
	return 0, io.ErrClosedPipe
}

func (b *blockedReader) Close() error {
	close(b.closed)
	return nil
}

func TestWait_StdinCloserEndsABlockedRead(t *testing.T) {
	t.Parallel()
	stdin := &blockedReader{closed: make(chan struct{})}
	cmd := shellCommand(t, t.TempDir(), "true")
	cmd.Stdin, cmd.StdinCloser = stdin, stdin
	run(t, context.Background(), cmd)
	if !stdin.returned.Load() {
		t.Error("Wait returned while the stdin copy still waited in Read")
	}
}

func TestStart_ErrorsKeepClassAndText(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	noexec := filepath.Join(dir, "noexec")
	if err := os.WriteFile(noexec, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing")
	for _, tt := range []struct {
		name   string
		cmd    Command
		class  error
		prefix string
	}{
		{"not_found", Command{Path: missing, Args: []string{"prog"}, Prog: "prog", Dir: dir},
			errdefs.ErrInvalid, "Program not found: prog"},
		{"not_executable", Command{Path: noexec, Args: []string{"prog"}, Prog: "prog", Dir: dir},
			errdefs.ErrInvalid, "Program is not executable: prog"},
		{"cgroup_missing", Command{Path: "/bin/true", Args: []string{"true"}, Prog: "true", Dir: dir, Cgroup: missing},
			errdefs.ErrFailedPrecondition, "Commands' cgroup " + missing + " cannot be opened: "},
		{"cgroup_not_v2", Command{Path: "/bin/true", Args: []string{"true"}, Prog: "true", Dir: dir, Cgroup: dir},
			errdefs.ErrFailedPrecondition, "Commands' cgroup is not a cgroup v2 directory: " + dir},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Start(tt.cmd)
			if err == nil {
				p.Wait(context.Background())
				t.Fatal("Start succeeded")
			}
			if !errors.Is(err, tt.class) || !strings.HasPrefix(err.Error(), tt.prefix) {
				t.Errorf("error %q (%T), want class %v and prefix %q", err, err, tt.class, tt.prefix)
			}
		})
	}
}

// TestKillAll is not parallel: it kills every command of the process.
func TestKillAll(t *testing.T) {
	p, err := Start(shellCommand(t, t.TempDir(), "exec sleep 300"))
	if err != nil {
		t.Fatal(err)
	}
	if n := KillAll(); n != 1 {
		t.Errorf("KillAll() = %d, want 1", n)
	}
	want := Result{ExitCode: -1, Signal: "SIGKILL"}
	if diff := cmp.Diff(want, p.Wait(context.Background()), ignoreDuration); diff != "" {
		t.Errorf("result mismatch (-want +got):\n%s", diff)
	}
}

// The reaper, unless told to ReapAll, leaves the statuses of children it
// did not start to whoever started them: the daemon uses os/exec too.
func TestReaper_LeavesOtherChildrenAlone(t *testing.T) {
	t.Parallel()
	p, err := Start(shellCommand(t, t.TempDir(), "sleep 0.2"))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Wait(context.Background())
	for range 20 {
		err := exec.Command("/bin/sh", "-c", "exit 7").Run()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 7 {
			t.Fatalf("os/exec child: %v, want exit status 7", err)
		}
	}
}

// reapAllHelper is a child subreaper that asks for ReapAll and runs a
// command whose background child outlives the leader's reaping long enough
// to be re-parented here, killed: a zombie unless the reaper collects it.
func reapAllHelper() int {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ReapAll(nil)
	cmd, err := Resolve([]string{"sleep 300 & echo $!"}, os.TempDir(), os.Environ())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	var out bytes.Buffer
	cmd.Stdout = &out
	p, err := Start(cmd)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	p.Wait(context.Background())
	orphan, err := strconv.Atoi(strings.TrimSpace(out.String()))
	if err != nil {
		fmt.Fprintln(os.Stderr, "no pid:", out.String())
		return 2
	}
	for deadline := time.Now().Add(supervisetest.WaitFor); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat("/proc/" + strconv.Itoa(orphan)); errors.Is(err, os.ErrNotExist) {
			return 0
		}
	}
	fmt.Fprintf(os.Stderr, "orphan %d was never reaped\n", orphan)
	return 1
}

func TestReapAll_CollectsOrphans(t *testing.T) {
	t.Parallel()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), helperEnv+"=reap-all")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("helper: %v\n%s", err, out)
	}
}
