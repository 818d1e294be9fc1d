package box_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/moby/moby/client"

	"github.com/hutchsandbox/hutch/internal/project"
	"github.com/hutchsandbox/hutch/internal/project/box"
)

// session is one `hutch project exec` process attached to the sandbox,
// running until its gate file appears in the project.
type session struct {
	cmd    *exec.Cmd
	gate   string
	stderr syncBuffer // read while the process may still write it
	done   chan error
}

// startSession starts `hutch project exec -- sh -c 'wait for gate'` as a
// process of its own.
func startSession(t *testing.T, f *fixture, gate string) *session {
	t.Helper()
	s := &session{gate: filepath.Join(f.project, gate), done: make(chan error, 1)}
	s.cmd = f.command("exec", "--", "sh", "-c", `while [ ! -e "$1" ]; do sleep 0.05; done`, "sh", s.gate)
	s.cmd.Stderr = &s.stderr
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { s.done <- s.cmd.Wait() }()
	t.Cleanup(func() {
		// A test that failed early leaves its sessions running.
		if s.cmd.ProcessState == nil {
			_ = s.cmd.Process.Kill()
			t.Logf("a session left running was killed: %v", <-s.done)
		}
	})
	return s
}

// end opens the session's gate and waits for the process to exit 0.
func (s *session) end(t *testing.T) {
	t.Helper()
	if err := os.WriteFile(s.gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	s.wait(t, nil)
}

// wait waits for the process to end, as want says (nil: exit 0).
func (s *session) wait(t *testing.T, want func(error) bool) {
	t.Helper()
	select {
	case err := <-s.done:
		if want == nil && err != nil || want != nil && !want(err) {
			t.Fatalf("session %s ended with %v\nstderr: %s", filepath.Base(s.gate), err, s.stderr.String())
		}
	case <-time.After(time.Minute):
		t.Fatalf("session %s did not end", filepath.Base(s.gate))
	}
}

// attached waits until every one of ss is counted as a session. When
// that does not happen it says what each session process printed and
// whether it ended.
func (f *fixture) attached(t *testing.T, ss ...*session) {
	t.Helper()
	// A hang detector, not a performance bound: under CI's full load (the
	// Kubernetes tests start a dozen pods beside it) an attach once took
	// longer than 30 s.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		got, err := f.sessions().Count()
		if err == nil && got == len(ss) {
			return
		}
		if time.Now().After(deadline) {
			var b strings.Builder
			fmt.Fprintf(&b, "waited 2m for %d sessions to attach: counted %d (%v)", len(ss), got, err)
			for _, s := range ss {
				state := "running"
				select {
				case err := <-s.done:
					state = fmt.Sprintf("ended: %v", err)
					s.done <- err
				default:
				}
				fmt.Fprintf(&b, "\nsession %s %s; stderr: %q", filepath.Base(s.gate), state, s.stderr.String())
			}
			t.Fatal(b.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (f *fixture) count(t *testing.T) int {
	t.Helper()
	n, err := f.sessions().Count()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestSessions_LastLeaves: with sandbox-persist off, two `hutch project
// exec` processes attach; the container keeps running when the first
// leaves and is stopped when the last does.
func TestSessions_LastLeaves(t *testing.T) {
	t.Parallel()
	f := newFixture(t, map[string]any{project.KeyPersist: false})
	f.mustHutch(t, "up")
	a, b := startSession(t, f, "gate-a"), startSession(t, f, "gate-b")
	f.attached(t, a, b)
	if out, _ := f.mustHutch(t, "status"); !bytes.Contains([]byte(out), []byte("2 attached")) {
		t.Errorf("status with two sessions:\n%s", out)
	}
	a.end(t)
	if _, running := f.running(t, f.name); !running {
		t.Fatal("the container stopped when the first of two sessions left")
	}
	if n := f.count(t); n != 1 {
		t.Errorf("%d sessions after the first left, want 1", n)
	}
	b.end(t)
	if exists, running := f.running(t, f.name); !exists || running {
		t.Errorf("after the last session left: exists %v running %v; want stopped, not removed", exists, running)
	}
	if n := f.count(t); n != 0 {
		t.Errorf("%d sessions after both left", n)
	}
	// The next command starts it again.
	if out, _ := f.mustHutch(t, "exec", "--", "echo", "again"); out != "again\n" {
		t.Errorf("exec after the stop: %q", out)
	}
	if _, running := f.running(t, f.name); running {
		t.Error("the container kept running after a one-off exec with persist off")
	}
}

// TestSessions_Persist: with sandbox-persist on (the default), the
// container keeps running after the last session leaves.
func TestSessions_Persist(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	f.mustHutch(t, "up")
	a, b := startSession(t, f, "gate-a"), startSession(t, f, "gate-b")
	f.attached(t, a, b)
	a.end(t)
	b.end(t)
	if _, running := f.running(t, f.name); !running {
		t.Error("the container stopped after the last session left, with persist on")
	}
	if n := f.count(t); n != 0 {
		t.Errorf("%d sessions after both left", n)
	}
}

// TestSessions_Killed: a session whose process is killed with SIGKILL (no
// chance to leave) is not counted, so the last live session still stops
// the container on its way out.
func TestSessions_Killed(t *testing.T) {
	t.Parallel()
	f := newFixture(t, map[string]any{project.KeyPersist: false})
	f.mustHutch(t, "up")
	a, k := startSession(t, f, "gate-a"), startSession(t, f, "gate-k")
	f.attached(t, a, k)
	if err := k.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	k.wait(t, func(err error) bool {
		var ee *exec.ExitError
		return errors.As(err, &ee) && !ee.Exited() // killed by a signal
	})
	if n := f.count(t); n != 1 {
		t.Errorf("%d sessions counted after one of two was killed, want 1", n)
	}
	if _, running := f.running(t, f.name); !running {
		t.Fatal("the container stopped when a session was killed")
	}
	// Its command went with it: the agent kills what a lost connection ran.
	tg := f.box(t).Attach(context.Background())
	if tg == nil {
		t.Fatal("Attach = nil for the running sandbox")
	}
	ag := tg.Agent()
	defer func() { _ = ag.Close() }()
	waitFor(t, 10*time.Second, "the killed session's command to end", func() bool {
		return !strings.Contains(mustRun(t, tg, "", "ps", "-o", "args"), "gate-k")
	})
	a.end(t)
	if _, running := f.running(t, f.name); running {
		t.Error("the container kept running after the last live session left (the killed one was counted)")
	}
	// The killed session's file was removed when it was found dead.
	if des, err := os.ReadDir(box.SessionDir(f.state, f.name)); err != nil || len(des) != 0 {
		t.Errorf("session files left: %v, %v", des, err)
	}
}

// TestSessions_ConcurrentColdStart: several `hutch project exec` processes
// started at once on a project without a container all run their command
// in the one container that one of them creates (the others' creates meet
// a name just reserved, before the engine lists the container).
func TestSessions_ConcurrentColdStart(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	const n = 6
	type result struct {
		out, errOut string
		err         error
	}
	results := make(chan result, n)
	for i := range n {
		go func() {
			var out, errb bytes.Buffer
			cmd := f.command("exec", "--", "sh", "-c", `echo "run $1"`, "sh", strconv.Itoa(i))
			cmd.Stdout, cmd.Stderr = &out, &errb
			err := cmd.Run()
			results <- result{out.String(), errb.String(), err}
		}()
	}
	var outs []string
	for range n {
		r := <-results
		if r.err != nil {
			t.Errorf("a concurrent cold exec failed: %v\nstderr: %s", r.err, r.errOut)
		}
		outs = append(outs, r.out)
	}
	slices.Sort(outs)
	var want []string
	for i := range n {
		want = append(want, fmt.Sprintf("run %d\n", i))
	}
	if diff := cmp.Diff(want, outs); diff != "" {
		t.Errorf("outputs (-want +got):\n%s", diff)
	}
	list, err := f.cli.ContainerList(context.Background(), client.ContainerListOptions{All: true, Filters: make(client.Filters).Add("label", project.LabelProject+"="+f.project)})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 {
		t.Errorf("%d containers for the project, want 1", len(list.Items))
	}
}
