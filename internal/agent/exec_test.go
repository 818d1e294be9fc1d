package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/moby/moby/api/pkg/stdcopy"
	"golang.org/x/net/http2"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/sandbox"
)

// ignoreDuration drops the wall time from result comparisons.
var ignoreDuration = cmpopts.IgnoreFields(sandbox.ExecResult{}, "Duration")

func mustExec(t *testing.T, c *Client, req sandbox.ExecRequest) sandbox.ExecResult {
	t.Helper()
	res, err := c.Exec(context.Background(), req)
	if err != nil {
		t.Fatalf("Exec(%q) error: %v", req.Argv, err)
	}
	return res
}

func TestExec_ExitCodesAndSignals(t *testing.T) {
	f := newFixture(t, nil)
	tests := []struct {
		name string
		argv []string
		want sandbox.ExecResult
	}{
		{"shell_true", []string{"true"}, sandbox.ExecResult{ExitCode: 0}},
		{"shell_exit_3", []string{"exit 3"}, sandbox.ExecResult{ExitCode: 3}},
		{"direct_argv", []string{"sh", "-c", "exit 7"}, sandbox.ExecResult{ExitCode: 7}},
		{"crash_is_a_signal", []string{"kill -SEGV $$"}, sandbox.ExecResult{ExitCode: -1, Signal: "SIGSEGV"}},
		{"self_sigkill_is_not_oom", []string{"kill -KILL $$"}, sandbox.ExecResult{ExitCode: -1, Signal: "SIGKILL"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := mustExec(t, f.client, sandbox.ExecRequest{Argv: tt.argv})
			if diff := cmp.Diff(tt.want, got, ignoreDuration); diff != "" {
				t.Errorf("result mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestExec_StreamsKeptApart(t *testing.T) {
	f := newFixture(t, nil)
	var stdout, stderr bytes.Buffer
	res := mustExec(t, f.client, sandbox.ExecRequest{
		Argv:   []string{"printf out1; printf err1 >&2; printf out2; printf err2 >&2"},
		Stdout: &stdout, Stderr: &stderr,
	})
	want := sandbox.ExecResult{ExitCode: 0, StdoutBytes: 8, StderrBytes: 8}
	if diff := cmp.Diff(want, res, ignoreDuration); diff != "" {
		t.Errorf("result mismatch (-want +got):\n%s", diff)
	}
	if got, want := stdout.String(), "out1out2"; got != want {
		t.Errorf("stdout got %q, want %q", got, want)
	}
	if got, want := stderr.String(), "err1err2"; got != want {
		t.Errorf("stderr got %q, want %q", got, want)
	}
}

func TestExec_SharedWriter(t *testing.T) {
	f := newFixture(t, nil)
	var out bytes.Buffer
	mustExec(t, f.client, sandbox.ExecRequest{Argv: []string{"echo a; echo b >&2; echo c"}, Stdout: &out, Stderr: &out})
	// Two pipes: the order across them is the scheduler's, within one it is kept.
	lines := strings.Fields(out.String())
	if diff := cmp.Diff([]string{"a", "b", "c"}, lines, cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
		t.Errorf("output lines mismatch (-want +got):\n%s", diff)
	}
	if strings.Index(out.String(), "a") > strings.Index(out.String(), "c") {
		t.Errorf("stdout order lost: %q", out.String())
	}
}

func TestExec_Stdin(t *testing.T) {
	f := newFixture(t, nil)
	t.Run("fed", func(t *testing.T) {
		var out bytes.Buffer
		mustExec(t, f.client, sandbox.ExecRequest{Argv: []string{"tr a-z A-Z"}, Stdin: strings.NewReader("hello\n"), Stdout: &out})
		if got, want := out.String(), "HELLO\n"; got != want {
			t.Errorf("stdout got %q, want %q", got, want)
		}
	})
	t.Run("large", func(t *testing.T) {
		in := bytes.Repeat([]byte("0123456789abcdef"), 256<<10) // 4 MiB
		var out bytes.Buffer
		mustExec(t, f.client, sandbox.ExecRequest{Argv: []string{"cat"}, Stdin: bytes.NewReader(in), Stdout: &out})
		if !bytes.Equal(out.Bytes(), in) {
			t.Errorf("cat returned %d bytes, want the %d sent", out.Len(), len(in))
		}
	})
	t.Run("nil_is_empty", func(t *testing.T) {
		var out bytes.Buffer
		mustExec(t, f.client, sandbox.ExecRequest{Argv: []string{"wc -c"}, Stdout: &out})
		if got, want := strings.TrimSpace(out.String()), "0"; got != want {
			t.Errorf("wc -c got %q, want %q", got, want)
		}
	})
	t.Run("unread_and_endless", func(t *testing.T) {
		// The command ignores its stdin; a reader that never ends must
		// not keep Exec waiting.
		pr, pw := io.Pipe()
		defer func() { _ = pw.Close() }()
		go func() {
			chunk := make([]byte, 32<<10)
			for {
				if _, err := pw.Write(chunk); err != nil {
					return
				}
			}
		}()
		res := mustExec(t, f.client, sandbox.ExecRequest{Argv: []string{"exit 4"}, Stdin: pr})
		if res.ExitCode != 4 {
			t.Errorf("exit code got %d, want 4", res.ExitCode)
		}
	})
}

func TestExec_Env(t *testing.T) {
	t.Setenv("HUTCH_AGENT_BASE", "from-agent")
	t.Setenv("HUTCH_AGENT_OVER", "agent-value")
	f := newFixture(t, nil)
	var out bytes.Buffer
	mustExec(t, f.client, sandbox.ExecRequest{
		Argv:   []string{`printf '%s|%s|%s' "$HUTCH_AGENT_BASE" "$HUTCH_AGENT_OVER" "$HUTCH_AGENT_NEW"`},
		Env:    map[string]string{"HUTCH_AGENT_OVER": "request-value", "HUTCH_AGENT_NEW": "s3cr=t value"},
		Stdout: &out,
	})
	if got, want := out.String(), "from-agent|request-value|s3cr=t value"; got != want {
		t.Errorf("env got %q, want %q", got, want)
	}
}

func TestExec_ProgramLookedUpInCommandPath(t *testing.T) {
	f := newFixture(t, nil)
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "hutch-test-prog"), []byte("#!/bin/sh\necho \"prog $1\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	mustExec(t, f.client, sandbox.ExecRequest{
		Argv:   []string{"hutch-test-prog", "ran"},
		Env:    map[string]string{"PATH": bin + ":/usr/bin:/bin"},
		Stdout: &out,
	})
	if got, want := out.String(), "prog ran\n"; got != want {
		t.Errorf("stdout got %q, want %q", got, want)
	}
	t.Run("relative_to_dir", func(t *testing.T) {
		var out bytes.Buffer
		mustExec(t, f.client, sandbox.ExecRequest{Argv: []string{"./hutch-test-prog", "rel"}, Dir: bin, Stdout: &out})
		if got, want := out.String(), "prog rel\n"; got != want {
			t.Errorf("stdout got %q, want %q", got, want)
		}
	})
}

func TestExec_Dir(t *testing.T) {
	f := newFixture(t, nil)
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, dir, want string
	}{
		{"given", dir, dir},
		{"default_is_agent_wd", "", wd},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			mustExec(t, f.client, sandbox.ExecRequest{Argv: []string{"pwd -P"}, Dir: tt.dir, Stdout: &out})
			if got := strings.TrimSpace(out.String()); got != tt.want {
				t.Errorf("pwd got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestExec_ErrorsKeepClassAndText(t *testing.T) {
	f := newFixture(t, nil)
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		req     sandbox.ExecRequest
		class   error
		message string
	}{
		{"no_argv", sandbox.ExecRequest{}, errdefs.ErrInvalid, "Command is empty"},
		{"blank_shell_string", sandbox.ExecRequest{Argv: []string{"  "}}, errdefs.ErrInvalid, "Command is empty"},
		{"missing_dir", sandbox.ExecRequest{Argv: []string{"true"}, Dir: dir + "/nope"}, errdefs.ErrInvalid, "Working directory does not exist: " + dir + "/nope"},
		{"dir_is_file", sandbox.ExecRequest{Argv: []string{"true"}, Dir: file}, errdefs.ErrInvalid, "Working directory is not a directory: " + file},
		{"program_not_found", sandbox.ExecRequest{Argv: []string{"hutch-no-such-program", "x"}}, errdefs.ErrInvalid, "Program not found: hutch-no-such-program"},
		{"program_not_executable", sandbox.ExecRequest{Argv: []string{file, "x"}}, errdefs.ErrInvalid, "Program is not executable: " + file},
		{"bad_env_name", sandbox.ExecRequest{Argv: []string{"true"}, Env: map[string]string{"A=B": "v"}}, errdefs.ErrInvalid, `Env name is not valid: "A=B"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := f.client.Exec(context.Background(), tt.req)
			if !errors.Is(err, tt.class) {
				t.Fatalf("Exec error %v, want class %v", err, tt.class)
			}
			if err.Error() != tt.message {
				t.Errorf("Exec error text got %q, want %q", err.Error(), tt.message)
			}
		})
	}
	t.Run("bad_json", func(t *testing.T) {
		resp, _, err := f.client.roundTrip(context.Background(), http.MethodPost, pathExec,
			func() *lazyBody { return newLazyBody([]byte(`{"argv": [1]}`), nil) })
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("status got %d, want 400", resp.StatusCode)
		}
		err = responseError(resp)
		if !errdefs.IsInvalid(err) || !strings.HasPrefix(err.Error(), "Exec request is not valid JSON: ") {
			t.Errorf("error got %v, want an invalid-class 'Exec request is not valid JSON: ...'", err)
		}
	})
}

func TestExec_OutputLimit(t *testing.T) {
	f := newFixture(t, nil)
	var out, errOut bytes.Buffer
	res := mustExec(t, f.client, sandbox.ExecRequest{
		Argv:        []string{"printf 0123456789; printf abc >&2"},
		Stdout:      &out,
		Stderr:      &errOut,
		OutputLimit: 4,
	})
	want := sandbox.ExecResult{ExitCode: 0, StdoutTruncated: true, StdoutBytes: 10, StderrBytes: 3}
	if diff := cmp.Diff(want, res, ignoreDuration); diff != "" {
		t.Errorf("result mismatch (-want +got):\n%s", diff)
	}
	if out.String() != "0123" || errOut.String() != "abc" {
		t.Errorf("kept stdout %q stderr %q, want %q and %q", out.String(), errOut.String(), "0123", "abc")
	}
}

// backgroundCommand starts a grandchild (sleep) in the background, writes
// its pid to pidfile, and waits for it.
func backgroundCommand(pidfile string) string {
	return fmt.Sprintf("sleep 300 & echo $! > %[1]s.tmp && mv %[1]s.tmp %[1]s; wait", pidfile)
}

func TestExec_TimeoutKillsTheGroup(t *testing.T) {
	f := newFixture(t, nil)
	pidfile := filepath.Join(t.TempDir(), "pid")
	res := mustExec(t, f.client, sandbox.ExecRequest{Argv: []string{backgroundCommand(pidfile)}, Timeout: 300 * time.Millisecond})
	want := sandbox.ExecResult{ExitCode: -1, TimedOut: true, Timeout: 300 * time.Millisecond}
	if diff := cmp.Diff(want, res, ignoreDuration); diff != "" {
		t.Errorf("result mismatch (-want +got):\n%s", diff)
	}
	if got, want := res.Message(), "Command timed out after 0.3 seconds"; got != want {
		t.Errorf("Message() got %q, want %q", got, want)
	}
	waitDead(t, readPid(t, pidfile))
}

func TestExec_CancelKillsTheGroup(t *testing.T) {
	f := newFixture(t, nil)
	pidfile := filepath.Join(t.TempDir(), "pid")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type outcome struct {
		res sandbox.ExecResult
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := f.client.Exec(ctx, sandbox.ExecRequest{Argv: []string{backgroundCommand(pidfile)}})
		done <- outcome{res, err}
	}()
	pid := readPid(t, pidfile)
	cancel()
	o := <-done
	if o.err != nil {
		t.Fatalf("Exec error: %v", o.err)
	}
	if !o.res.Aborted || o.res.ExitCode != -1 {
		t.Errorf("result got %+v, want Aborted with exit code -1", o.res)
	}
	waitDead(t, pid)

	t.Run("connection_still_serves", func(t *testing.T) {
		mustExec(t, f.client, sandbox.ExecRequest{Argv: []string{"true"}})
		if got := f.dialCount(); got != 1 {
			t.Errorf("dials got %d, want 1: a cancelled request must not cost the connection", got)
		}
	})
}

func TestExec_CancelledBeforeStart(t *testing.T) {
	f := newFixture(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res, err := f.client.Exec(ctx, sandbox.ExecRequest{Argv: []string{"true"}, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	want := sandbox.ExecResult{ExitCode: -1, Aborted: true, Timeout: time.Second}
	if diff := cmp.Diff(want, res, ignoreDuration); diff != "" {
		t.Errorf("result mismatch (-want +got):\n%s", diff)
	}
}

func TestExec_DaemonGoneKillsTheGroup(t *testing.T) {
	f := newFixture(t, nil)
	dir := t.TempDir()
	leaderFile, pidfile := filepath.Join(dir, "leader"), filepath.Join(dir, "pid")
	done := make(chan error, 1)
	go func() {
		_, err := f.client.Exec(context.Background(), sandbox.ExecRequest{
			Argv: []string{fmt.Sprintf("echo $$ > %[1]s.tmp && mv %[1]s.tmp %[1]s; %s", leaderFile, backgroundCommand(pidfile))},
		})
		done <- err
	}()
	leader, pid := readPid(t, leaderFile), readPid(t, pidfile)
	// The daemon dies: its end of the connection closes under the command.
	f.mu.Lock()
	conns := f.clientConns
	f.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
	if err := <-done; !errdefs.IsUnavailable(err) || !strings.HasPrefix(err.Error(), "agent connection lost: ") {
		t.Errorf("Exec error got %v, want unavailable 'agent connection lost: ...'", err)
	}
	waitDead(t, pid)
	waitDead(t, leader)
}

func TestClient_ReconnectsAfterBrokenConnection(t *testing.T) {
	f := newFixture(t, nil)
	mustExec(t, f.client, sandbox.ExecRequest{Argv: []string{"true"}})
	f.mu.Lock()
	for _, c := range f.serverConns {
		_ = c.Close()
	}
	f.mu.Unlock()
	var out bytes.Buffer
	res := mustExec(t, f.client, sandbox.ExecRequest{Argv: []string{"echo again"}, Stdout: &out})
	if res.ExitCode != 0 || out.String() != "again\n" {
		t.Errorf("after reconnect got exit %d output %q", res.ExitCode, out.String())
	}
	if got := f.dialCount(); got != 2 {
		t.Errorf("dials got %d, want 2", got)
	}
}

func TestClient_ConcurrentExecsShareOneConnection(t *testing.T) {
	f := newFixture(t, nil)
	const n = 100
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			var out bytes.Buffer
			res, err := f.client.Exec(context.Background(), sandbox.ExecRequest{
				Argv:   []string{"sh", "-c", `echo "$1"; echo "e$1" >&2`, "sh", strconv.Itoa(i)},
				Stdout: &out,
			})
			switch {
			case err != nil:
				errs[i] = err
			case res.ExitCode != 0 || out.String() != strconv.Itoa(i)+"\n" || res.StderrBytes != int64(len(strconv.Itoa(i))+2):
				errs[i] = fmt.Errorf("exec %d: exit %d stdout %q stderr bytes %d", i, res.ExitCode, out.String(), res.StderrBytes)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Error(err)
	}
	if got := f.dialCount(); got != 1 {
		t.Errorf("dials got %d, want 1", got)
	}
}

// TestExec_HugeOutputKeepsMemoryFlat streams 200 MiB through a 1 MiB
// output limit and watches the live heap (what the last GC found still
// reachable), not HeapAlloc: garbage waiting for a collector that a
// loaded machine starves is not memory the exec path holds, and once
// made CI fail here at 43 MiB of HeapAlloc while the live heap stayed
// flat. Output kept instead of dropped would show as live heap.
func TestExec_HugeOutputKeepsMemoryFlat(t *testing.T) {
	f := newFixture(t, nil)
	const total = 200 << 20
	const limit = 1 << 20
	runtime.GC()
	base := liveHeap()

	stop := make(chan struct{})
	peak := make(chan uint64, 1)
	go func() {
		var max uint64
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			max = maxU64(max, liveHeap())
			select {
			case <-stop:
				peak <- max
				return
			case <-tick.C:
			}
		}
	}()
	var out bytes.Buffer
	res := mustExec(t, f.client, sandbox.ExecRequest{
		Argv:        []string{"head -c " + strconv.Itoa(total) + " /dev/zero"},
		Stdout:      &out,
		OutputLimit: limit,
	})
	close(stop)
	growth := int64(<-peak) - int64(base)
	want := sandbox.ExecResult{ExitCode: 0, StdoutTruncated: true, StdoutBytes: total}
	if diff := cmp.Diff(want, res, ignoreDuration); diff != "" {
		t.Errorf("result mismatch (-want +got):\n%s", diff)
	}
	if out.Len() != limit {
		t.Errorf("kept %d bytes, want exactly %d", out.Len(), limit)
	}
	if growth >= 32<<20 {
		t.Errorf("live heap grew by %d MiB while streaming %d MiB, want < 32 MiB", growth>>20, total>>20)
	}
	t.Logf("live heap growth %.1f MiB", float64(growth)/(1<<20))
}

// liveHeap is the heap the last garbage collection found reachable.
func liveHeap() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

func maxU64(a, b uint64) uint64 {
	if a > b {
		return a
	}
	return b
}

func TestExec_OOMKill(t *testing.T) {
	tests := []struct {
		name  string
		shell string // run with $COUNTER set to the counter file
		want  sandbox.ExecResult
	}{
		{
			name:  "sigkill_while_counter_rose",
			shell: `printf 'oom 1\noom_kill 1\noom_group_kill 0\n' > "$COUNTER"; kill -KILL $$`,
			want:  sandbox.ExecResult{ExitCode: -1, Signal: "SIGKILL", OOMKilled: true},
		},
		{
			name:  "sigkill_without_oom",
			shell: `kill -KILL $$`,
			want:  sandbox.ExecResult{ExitCode: -1, Signal: "SIGKILL"},
		},
		{
			name:  "counter_rose_but_exited",
			shell: `printf 'oom_kill 5\n' > "$COUNTER"; exit 0`,
			want:  sandbox.ExecResult{ExitCode: 0},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			counter := filepath.Join(t.TempDir(), "memory.events")
			if err := os.WriteFile(counter, []byte("low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\noom_group_kill 0\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			f := newFixture(t, &Server{OOMCounterPath: counter})
			res := mustExec(t, f.client, sandbox.ExecRequest{Argv: []string{tt.shell}, Env: map[string]string{"COUNTER": counter}})
			if diff := cmp.Diff(tt.want, res, ignoreDuration); diff != "" {
				t.Errorf("result mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestReadOOMKills(t *testing.T) {
	tests := []struct {
		name, content string
		want          int64
		ok            bool
	}{
		{"cgroup_v2", "low 0\nhigh 0\nmax 3\noom 2\noom_kill 2\noom_group_kill 1\n", 2, true},
		{"cgroup_v1", "oom_kill_disable 0\nunder_oom 0\noom_kill 7\n", 7, true},
		{"no_counter", "oom_kill_disable 0\nunder_oom 0\n", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "f")
			if err := os.WriteFile(p, []byte(tt.content), 0o644); err != nil {
				t.Fatal(err)
			}
			got, ok := readOOMKills(p)
			if got != tt.want || ok != tt.ok {
				t.Errorf("readOOMKills got %d, %v; want %d, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestServeConn_NetPipe(t *testing.T) {
	srv := &Server{Log: testLogger(t)}
	sc, cc := net.Pipe()
	served := make(chan struct{})
	go func() {
		srv.ServeConn(context.Background(), sc)
		close(served)
	}()
	var once sync.Once
	c := NewClient(func(context.Context) (net.Conn, error) {
		var conn net.Conn = nil
		err := errors.New("the pipe was already used")
		once.Do(func() { conn, err = cc, nil })
		return conn, err
	}, testLogger(t))
	var out bytes.Buffer
	res := mustExec(t, c, sandbox.ExecRequest{Argv: []string{"echo piped; exit 2"}, Stdout: &out})
	if res.ExitCode != 2 || out.String() != "piped\n" {
		t.Errorf("got exit %d output %q", res.ExitCode, out.String())
	}
	info, err := c.Ping(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Info{PID: os.Getpid()}, info); diff != "" {
		t.Errorf("Ping mismatch (-want +got):\n%s", diff)
	}
	_ = c.Close()
	<-served
}

// TestExec_SilentAgentHostDeadline: an agent that stops answering (its
// runtime paused, frozen or starved) cannot hold a command past its
// timeout. The client gives up a grace after the timeout, whatever the
// agent does, keeps the output that came, and says it could not confirm
// the command was killed.
func TestExec_SilentAgentHostDeadline(t *testing.T) {
	tests := []struct {
		name string
		// serve is the agent's side of the connection, which stops
		// answering at some point.
		serve   func(t *testing.T, peer net.Conn)
		wantOut string
	}{
		{"before_the_answer", func(t *testing.T, peer net.Conn) {
			_, _ = io.Copy(io.Discard, peer)
		}, ""},
		{"mid_output", func(t *testing.T, peer net.Conn) {
			frozen := make(chan struct{})
			t.Cleanup(func() { close(frozen) })
			// The agent's own server is x/net/http2's (server.go, excluded
			// from SA1019 for that reason); this one stands in for it.
			//nolint:staticcheck
			(&http2.Server{}).ServeConn(peer, &http2.ServeConnOpts{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", contentTypeStream)
				w.Header().Set("Trailer", trailerResult)
				w.WriteHeader(http.StatusOK)
				_, _ = (&frameWriter{out: &muxWriter{w: w, rc: http.NewResponseController(w)}, stream: stdcopy.Stdout}).Write([]byte("partial"))
				<-frozen // deaf to the reset too, as a frozen agent is
			})})
		}, "partial"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := NewClient(func(context.Context) (net.Conn, error) {
				conn, peer := net.Pipe()
				go tc.serve(t, peer)
				t.Cleanup(func() { _ = peer.Close() })
				return conn, nil
			}, nil)
			t.Cleanup(func() { _ = c.Close() })
			type outcome struct {
				res sandbox.ExecResult
				err error
			}
			done := make(chan outcome, 1)
			var out bytes.Buffer
			start := time.Now()
			go func() {
				res, err := c.Exec(context.Background(), sandbox.ExecRequest{Argv: []string{"sleep 60"}, Stdout: &out, Timeout: 300 * time.Millisecond})
				done <- outcome{res, err}
			}()
			var o outcome
			select {
			case o = <-done:
			case <-time.After(30 * time.Second):
				t.Fatal("Exec with a 0.3 s timeout still waits for a silent agent after 30 s")
			}
			if o.err != nil {
				t.Fatalf("Exec error: %v", o.err)
			}
			if d := time.Since(start); d < 300*time.Millisecond {
				t.Errorf("returned after %v, before the timeout", d)
			}
			want := sandbox.ExecResult{ExitCode: -1, TimedOut: true, KillUnconfirmed: true, Timeout: 300 * time.Millisecond, StdoutBytes: int64(len(tc.wantOut))}
			if diff := cmp.Diff(want, o.res, ignoreDuration); diff != "" {
				t.Errorf("result mismatch (-want +got):\n%s", diff)
			}
			if out.String() != tc.wantOut {
				t.Errorf("stdout got %q, want %q", out.String(), tc.wantOut)
			}
			if got, want := o.res.Message(), "Command timed out after 0.3 seconds; the sandbox stopped answering, so hutch could not confirm the command was killed"; got != want {
				t.Errorf("Message() got %q, want %q", got, want)
			}
		})
	}
}
