package container_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/sandbox/container"
	"github.com/hutchsandbox/hutch/internal/testenv"
)

// returnDeadline turns an Exec that never returns into a failure.
const returnDeadline = time.Minute

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func TestNew_Mode(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if _, err := container.New(container.Config{Engine: e.eng, Agent: e.bin}); err == nil {
		t.Errorf("New without a name succeeded, want an error")
	}
	if _, err := container.New(container.Config{Engine: e.eng, Name: "x"}); err == nil {
		t.Errorf("New without an agent succeeded, want an error")
	}
	rt, err := container.New(container.Config{Engine: e.eng, Name: "some-box", Agent: e.bin})
	if err != nil {
		t.Fatal(err)
	}
	if got := rt.Mode().String(); got != "container:some-box" {
		t.Errorf("Mode() = %q, want %q", got, "container:some-box")
	}
	if got, want := rt.Capabilities(), sandbox.CapabilitiesOf(sandbox.KindContainer); !reflect.DeepEqual(got, want) {
		t.Errorf("Capabilities() = %+v, want %+v", got, want)
	}
}

// checkPrecondition asserts err is of class ErrFailedPrecondition with
// exactly the text want.
func checkPrecondition(t *testing.T, what string, err error, want string) {
	t.Helper()
	if err == nil || err.Error() != want || !errdefs.IsFailedPrecondition(err) {
		t.Errorf("%s: error %v (failed precondition: %v);\nwant %q of class ErrFailedPrecondition", what, err, errdefs.IsFailedPrecondition(err), want)
	}
}

func TestValidate_MissingContainer(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, tt := range []struct {
		name, workspace, shown string
	}{
		{"with_workspace", "/srv/hutch/workspace", "/srv/hutch/workspace"},
		{"without_workspace", "", "<workspace>"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			name := testenv.Name(t)
			testenv.CleanupContainers(t, e.cli, testLabel+"="+name)
			rt, err := container.New(container.Config{Engine: e.eng, Name: name, Agent: e.bin, Workspace: tt.workspace})
			if err != nil {
				t.Fatal(err)
			}
			want := "Container '" + name + "' does not exist. Create it with: docker run -d --name " + name +
				" -v " + tt.shown + ":/workspace <image> sleep infinity"
			_, err = rt.Validate(t.Context())
			checkPrecondition(t, "Validate", err, want)
			res, err := rt.Exec(t.Context(), sandbox.Spec{OfficeKey: "k", OfficeRuntimePath: "/workspace/k"}, sandbox.ExecRequest{Argv: []string{"true"}})
			checkPrecondition(t, "Exec", err, want)
			if res != (sandbox.ExecResult{}) {
				t.Errorf("Exec result = %+v, want none", res)
			}
			if _, err := rt.Agent(t.Context()); err == nil {
				t.Errorf("Agent succeeded for a missing container")
			}
			// hutch created nothing.
			if _, err := e.cli.ContainerInspect(t.Context(), name, client.ContainerInspectOptions{}); !cerrdefs.IsNotFound(err) {
				t.Errorf("ContainerInspect %s after use: %v, want not found (hutch must not create it)", name, err)
			}
		})
	}
}

func TestValidate_NotRunning(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, tt := range []struct {
		name    string
		started bool // started, then stopped (exited), rather than only created
	}{
		{"created", false},
		{"exited", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := e.newBox(t, boxOptions{noStart: !tt.started})
			if tt.started {
				ctx, cancel := context.WithTimeout(context.Background(), apiTimeout)
				defer cancel()
				zero := 0
				if _, err := e.cli.ContainerStop(ctx, b.id, client.ContainerStopOptions{Timeout: &zero}); err != nil {
					t.Fatalf("ContainerStop: %v", err)
				}
			}
			before := e.inspect(t, b.name).Container
			rt := e.runtime(t, b, nil)
			spec := b.office(t, "k")
			want := "Container '" + b.name + "' is not running. Start it with: docker start " + b.name
			_, err := rt.Validate(t.Context())
			checkPrecondition(t, "Validate", err, want)
			res, err := rt.Exec(t.Context(), spec, sandbox.ExecRequest{Argv: []string{"touch /workspace/k/ran"}})
			checkPrecondition(t, "Exec", err, want)
			if res != (sandbox.ExecResult{}) {
				t.Errorf("Exec result = %+v, want none", res)
			}
			// Twice: a second attempt neither starts it.
			_, err = rt.Exec(t.Context(), spec, sandbox.ExecRequest{Argv: []string{"true"}})
			checkPrecondition(t, "second Exec", err, want)

			after := e.inspect(t, b.name).Container
			if after.ID != b.id {
				t.Fatalf("container %s is now %s, want the same %s (hutch must not remove or re-create it)", b.name, after.ID, b.id)
			}
			if after.State.Status != before.State.Status || after.State.Running ||
				after.State.StartedAt != before.State.StartedAt || after.RestartCount != before.RestartCount {
				t.Errorf("state after use: status %q running %v started %q restarts %d; before: status %q started %q restarts %d (hutch must not start it)",
					after.State.Status, after.State.Running, after.State.StartedAt, after.RestartCount,
					before.State.Status, before.State.StartedAt, before.RestartCount)
			}
			if len(after.ExecIDs) != 0 {
				t.Errorf("ExecIDs = %v, want none", after.ExecIDs)
			}
			// Nothing was copied in either.
			if _, err := e.cli.ContainerStatPath(t.Context(), b.id, client.ContainerStatPathOptions{Path: "/.hutch"}); !cerrdefs.IsNotFound(err) {
				t.Errorf("stat /.hutch in the stopped container: %v, want not found", err)
			}
		})
	}
}

// TestExec_WorkspaceNotMounted: an operator container without the
// workspace at /workspace gets an ErrInvalid saying to mount it.
func TestExec_WorkspaceNotMounted(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.newBox(t, boxOptions{noWorkspace: true})
	const ws = "/srv/hutch/workspace"
	rt, err := container.New(container.Config{Engine: e.eng, Name: b.name, Agent: e.bin, Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	spec := sandbox.Spec{OfficeKey: "k", OfficeDir: "/nonexistent/k", OfficeRuntimePath: "/workspace/k"}
	_, err = rt.Exec(t.Context(), spec, sandbox.ExecRequest{Argv: []string{"true"}})
	hint := "(mount the workspace at /workspace: docker run -v " + ws + ":/workspace ...)"
	if !errdefs.IsInvalid(err) || !strings.HasSuffix(fmt.Sprint(err), hint) {
		t.Errorf("Exec in an unmounted office: error %v; want class ErrInvalid ending in %q", err, hint)
	}
	// An absolute directory that exists still works.
	if o := mustExec(t, rt, spec, sandbox.ExecRequest{Argv: []string{"pwd"}, Dir: "/tmp"}); o.stdout != "/tmp\n" {
		t.Errorf("pwd in /tmp printed %q", o.stdout)
	}
}

// scanScript prints those of its arguments that are files holding the
// line it reads on stdin. It never puts that line in an argv, an env or a
// file: the pattern reaches grep through a here-document (a pipe), and the
// files' NULs become newlines first (busybox grep stops a line at a NUL).
const scanScript = `read -r pat
for f do
	[ -f "$f" ] || continue
	if tr '\0' '\n' < "$f" 2>/dev/null | grep -qF -f /proc/self/fd/3 3<<EOF
$pat
EOF
	then echo "$f"; fi
done`

// scan runs scanScript (via the Engine API, not through hutch) on the
// files that the shell words in glob name, looking for secret.
func (e *env) scan(t *testing.T, id, glob, secret string) []string {
	t.Helper()
	out, errOut, code := e.dockerExec(t, id, secret+"\n", "sh", "-c", `set -- `+glob+`; `+scanScript, "sh")
	if code != 0 {
		t.Fatalf("scanning %s: exit %d, stderr %q", glob, code, errOut)
	}
	return strings.Fields(out)
}

// procsWith lists the pids inside the container whose /proc/<pid>/<file>
// holds secret.
func (e *env) procsWith(t *testing.T, id, file, secret string) []string {
	t.Helper()
	var pids []string
	for _, f := range e.scan(t, id, "/proc/[0-9]*/"+file, secret) {
		pids = append(pids, strings.Split(f, "/")[2])
	}
	return pids
}

// checkNoSecretInEngine fails when the engine's view of the container or
// of any of its execs holds secret; it returns the exec ids it looked at.
func (e *env) checkNoSecretInEngine(t *testing.T, b *box, secret string) []string {
	t.Helper()
	in := e.inspect(t, b.name)
	for _, v := range in.Container.Config.Env {
		if strings.Contains(v, secret) {
			t.Errorf("Config.Env holds the vault value: %q", v)
		}
	}
	if bytes.Contains(in.Raw, []byte(secret)) {
		t.Errorf("the container's inspect holds the vault value:\n%s", in.Raw)
	}
	for _, id := range in.Container.ExecIDs {
		if raw := e.rawGet(t, "/exec/"+id+"/json"); bytes.Contains(raw, []byte(secret)) {
			t.Errorf("exec %s's inspect holds the vault value:\n%s", id, raw)
		}
	}
	return in.Container.ExecIDs
}

// TestVaultEnv_PerCommand: vault env reaches the command it is given to,
// and no other process, no config, no argv, no file and no log.
func TestVaultEnv_PerCommand(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.newBox(t, boxOptions{})
	var log syncBuffer
	rt := e.runtime(t, b, &log)
	spec := b.office(t, "vault")
	secret := "hutch-vault-" + randomHex(16)
	env := map[string]string{"HUTCH_SECRET": secret}

	if o := mustExec(t, rt, spec, sandbox.ExecRequest{Argv: []string{`printf %s "$HUTCH_SECRET"`}, Env: env}); o.stdout != secret {
		t.Fatalf("the command saw HUTCH_SECRET=%q, want %q", o.stdout, secret)
	}

	t.Run("while_running", func(t *testing.T) {
		// A command holding the secret runs; only its own process has it.
		pidFile := "/tmp/vault-" + randomHex(4) + ".pid"
		stdin, feed := io.Pipe()
		done := make(chan output, 1)
		go func() {
			done <- execRT(context.Background(), rt, spec, sandbox.ExecRequest{
				Argv:  []string{`echo $$ > ` + pidFile + `.tmp && mv ` + pidFile + `.tmp ` + pidFile + ` && exec cat`},
				Env:   env,
				Stdin: stdin,
			})
		}()
		defer func() {
			_ = feed.Close()
			select {
			case o := <-done:
				if o.err != nil || o.res.ExitCode != 0 {
					t.Errorf("the command holding the secret: error %v, exit %d, stderr %q", o.err, o.res.ExitCode, o.stderr)
				}
			case <-time.After(returnDeadline):
				t.Errorf("the command holding the secret did not end once its stdin closed")
			}
		}()
		var pid string
		for deadline := time.Now().Add(returnDeadline); pid == "" && time.Now().Before(deadline); {
			out, _, code := e.dockerExec(t, b.id, "", "cat", pidFile)
			if code == 0 {
				pid = strings.TrimSpace(out)
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if pid == "" {
			t.Fatalf("the command never wrote %s", pidFile)
		}
		if got := e.procsWith(t, b.id, "environ", secret); !slices.Equal(got, []string{pid}) {
			t.Errorf("processes whose environ holds the secret: %v, want only the command (pid %s)", got, pid)
		}
		if got := e.procsWith(t, b.id, "cmdline", secret); len(got) != 0 {
			t.Errorf("processes whose argv holds the secret: %v, want none", got)
		}
		cl, err := rt.Agent(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		info, err := cl.Ping(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if strconv.Itoa(info.PID) == pid {
			t.Fatalf("the agent's pid is the command's")
		}
		ids := e.checkNoSecretInEngine(t, b, secret)
		// The agent's own exec session is among those looked at.
		found := false
		for _, id := range ids {
			raw := e.rawGet(t, "/exec/"+id+"/json")
			var ex struct {
				Running       bool
				ProcessConfig struct{ Arguments []string }
			}
			if err := json.Unmarshal(raw, &ex); err != nil {
				t.Fatal(err)
			}
			if ex.Running && slices.Equal(ex.ProcessConfig.Arguments, []string{"agent", "--stdio"}) {
				found = true
			}
		}
		if !found {
			t.Errorf("no running `agent --stdio` exec among the container's ExecIDs %v", ids)
		}
	})

	t.Run("between_commands", func(t *testing.T) {
		for _, glob := range []string{"environ", "cmdline"} {
			o := mustExec(t, rt, spec, sandbox.ExecRequest{Argv: []string{"cat /proc/*/" + glob + " 2>/dev/null; true"}})
			if strings.Contains(o.stdout, secret) {
				t.Errorf("cat /proc/*/%s (through hutch) shows the vault value", glob)
			}
			if len(o.stdout) == 0 {
				t.Errorf("cat /proc/*/%s printed nothing: the check is void", glob)
			}
			if got := e.procsWith(t, b.id, glob, secret); len(got) != 0 {
				t.Errorf("processes whose %s holds the vault value: %v, want none", glob, got)
			}
		}
		e.checkNoSecretInEngine(t, b, secret)
		// No file in the container holds it (the workspace and the agent
		// included); the scan finds it where it is (a check of the check).
		files := `$(find / /.hutch \( -path /proc -o -path /sys -o -path /dev \) -prune -o -type f -print)`
		if got := e.scan(t, b.id, files, secret); len(got) != 0 {
			t.Errorf("files holding the vault value: %q, want none", got)
		}
		probe := b.workspace + "/vault/probe"
		if err := os.WriteFile(probe, []byte("a\x00"+secret+"\x00b"), 0o600); err != nil {
			t.Fatal(err)
		}
		if got := e.scan(t, b.id, files, secret); !slices.Equal(got, []string{"/workspace/vault/probe"}) {
			t.Errorf("the scan found %q, want only the probe file /workspace/vault/probe", got)
		}
		_ = os.Remove(probe)
		if strings.Contains(log.String(), secret) {
			t.Errorf("hutch's log holds the vault value:\n%s", log.String())
		}
	})
}

// TestAgent_CopiedOnce: runtimes of several hutch processes sharing one
// container share one copy of the agent.
func TestAgent_CopiedOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	want := []string{"hutch-" + e.bin.SHA256[:16]}

	t.Run("one_after_another", func(t *testing.T) {
		t.Parallel()
		b := e.newBox(t, boxOptions{})
		spec := b.office(t, "k")
		rt1, rt2 := e.runtime(t, b, nil), e.runtime(t, b, nil)
		mustExec(t, rt1, spec, sandbox.ExecRequest{Argv: []string{"true"}})
		mustExec(t, rt2, spec, sandbox.ExecRequest{Argv: []string{"true"}})
		mustExec(t, rt1, spec, sandbox.ExecRequest{Argv: []string{"true"}})
		if got := e.agentFiles(t, b.id); !slices.Equal(got, want) {
			t.Errorf("/.hutch holds %q, want %q", got, want)
		}
		// Two agents, one per runtime.
		p1, p2 := agentPID(t, rt1), agentPID(t, rt2)
		if p1 == p2 {
			t.Errorf("both runtimes talk to the agent pid %d, want one agent each", p1)
		}
	})

	// First use by several runtimes at once: the copy must not race with
	// a start of the agent.
	for i := range 3 {
		t.Run("at_once_"+strconv.Itoa(i), func(t *testing.T) {
			t.Parallel()
			b := e.newBox(t, boxOptions{})
			spec := b.office(t, "k")
			const n = 4
			rts := make([]*container.Runtime, n)
			for j := range rts {
				rts[j] = e.runtime(t, b, nil)
			}
			var wg sync.WaitGroup
			start := make(chan struct{})
			outs := make([]output, n)
			for j, rt := range rts {
				wg.Go(func() {
					<-start
					ctx, cancel := context.WithTimeout(context.Background(), apiTimeout)
					defer cancel()
					outs[j] = execRT(ctx, rt, spec, sandbox.ExecRequest{Argv: []string{"echo ok"}})
				})
			}
			close(start)
			wg.Wait()
			for j, o := range outs {
				if o.err != nil || o.res.ExitCode != 0 || o.stdout != "ok\n" {
					t.Errorf("runtime %d: error %v, exit %d, stdout %q, stderr %q", j, o.err, o.res.ExitCode, o.stdout, o.stderr)
				}
			}
			if got := e.agentFiles(t, b.id); !slices.Equal(got, want) {
				t.Errorf("/.hutch holds %q, want %q", got, want)
			}
		})
	}
}

func agentPID(t *testing.T, rt *container.Runtime) int {
	t.Helper()
	cl, err := rt.Agent(t.Context())
	if err != nil {
		t.Fatalf("Agent: %v", err)
	}
	info, err := cl.Ping(t.Context())
	if err != nil {
		t.Fatalf("Ping: %v", err)
	}
	if info.PID <= 1 {
		t.Fatalf("agent pid %d", info.PID)
	}
	return info.PID
}

// killAgent kills pid inside the container with SIGKILL, through the
// Engine API (not through hutch), and waits until it is gone.
func (e *env) killAgent(t *testing.T, b *box, pid int) {
	t.Helper()
	p := strconv.Itoa(pid)
	// Make sure it is the agent before killing it.
	if out, _, _ := e.dockerExec(t, b.id, "", "cat", "/proc/"+p+"/cmdline"); !strings.Contains(out, "agent\x00--stdio") {
		t.Fatalf("pid %s is not the agent: cmdline %q", p, out)
	}
	if _, errOut, code := e.dockerExec(t, b.id, "", "kill", "-KILL", p); code != 0 {
		t.Fatalf("kill -KILL %s: exit %d, stderr %q", p, code, errOut)
	}
	for deadline := time.Now().Add(returnDeadline); ; time.Sleep(20 * time.Millisecond) {
		if _, _, code := e.dockerExec(t, b.id, "", "test", "-e", "/proc/"+p); code != 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("agent pid %s still there after SIGKILL", p)
		}
	}
}

// TestAgent_StreamBroken: when the agent dies, the next command re-dials.
func TestAgent_StreamBroken(t *testing.T) {
	t.Parallel()
	e := newEnv(t)

	t.Run("idle", func(t *testing.T) {
		t.Parallel()
		b := e.newBox(t, boxOptions{})
		rt := e.runtime(t, b, nil)
		spec := b.office(t, "k")
		for i := range 3 {
			mustExec(t, rt, spec, sandbox.ExecRequest{Argv: []string{"true"}})
			old := agentPID(t, rt)
			e.killAgent(t, b, old)
			if o := mustExec(t, rt, spec, sandbox.ExecRequest{Argv: []string{"echo again"}}); o.stdout != "again\n" {
				t.Errorf("round %d: after the agent died, stdout %q, want %q", i, o.stdout, "again\n")
			}
			if now := agentPID(t, rt); now == old {
				t.Errorf("round %d: still agent pid %d after it was killed", i, now)
			}
		}
		if got := e.agentFiles(t, b.id); len(got) != 1 {
			t.Errorf("/.hutch holds %q, want one agent", got)
		}
	})

	t.Run("mid_command", func(t *testing.T) {
		t.Parallel()
		b := e.newBox(t, boxOptions{})
		rt := e.runtime(t, b, nil)
		spec := b.office(t, "k")
		mustExec(t, rt, spec, sandbox.ExecRequest{Argv: []string{"true"}})
		old := agentPID(t, rt)
		pidFile := "/tmp/mid-" + randomHex(4) + ".pid"
		done := make(chan output, 1)
		go func() {
			done <- execRT(context.Background(), rt, spec, sandbox.ExecRequest{
				Argv: []string{`echo $$ > ` + pidFile + `.tmp && mv ` + pidFile + `.tmp ` + pidFile + ` && exec sleep 600`},
			})
		}()
		for deadline := time.Now().Add(returnDeadline); ; time.Sleep(50 * time.Millisecond) {
			if _, _, code := e.dockerExec(t, b.id, "", "test", "-s", pidFile); code == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the command never wrote %s", pidFile)
			}
		}
		e.killAgent(t, b, old)
		select {
		case o := <-done:
			if !errdefs.IsUnavailable(o.err) {
				t.Errorf("the command whose agent died: result %+v, error %v; want an error of class ErrUnavailable", o.res, o.err)
			}
		case <-time.After(returnDeadline):
			t.Fatalf("Exec did not return within %v of its agent's death", returnDeadline)
		}
		// Not checked: the command itself outlives an agent killed with
		// SIGKILL (it is re-parented to the container's pid 1; the agent
		// sets no parent-death signal), which no contract asks for yet.
		if o := mustExec(t, rt, spec, sandbox.ExecRequest{Argv: []string{"echo again"}}); o.stdout != "again\n" {
			t.Errorf("after the agent died: stdout %q, want %q", o.stdout, "again\n")
		}
		if now := agentPID(t, rt); now == old {
			t.Errorf("still agent pid %d after it was killed", now)
		}
	})
}

// TestContainer_ChangedBehindHutch: the operator restarts, stops or
// re-creates the container while a runtime holds an agent session in it.
func TestContainer_ChangedBehindHutch(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	zero := 0

	t.Run("restarted", func(t *testing.T) {
		t.Parallel()
		b := e.newBox(t, boxOptions{})
		rt := e.runtime(t, b, nil)
		spec := b.office(t, "k")
		for i := range 2 {
			mustExec(t, rt, spec, sandbox.ExecRequest{Argv: []string{"true"}})
			ctx, cancel := context.WithTimeout(context.Background(), apiTimeout)
			_, err := e.cli.ContainerRestart(ctx, b.id, client.ContainerRestartOptions{Timeout: &zero})
			cancel()
			if err != nil {
				t.Fatalf("ContainerRestart: %v", err)
			}
			if o := mustExec(t, rt, spec, sandbox.ExecRequest{Argv: []string{"echo back"}}); o.stdout != "back\n" {
				t.Errorf("round %d: after a restart, stdout %q, want %q", i, o.stdout, "back\n")
			}
		}
		if got := e.agentFiles(t, b.id); len(got) != 1 {
			t.Errorf("/.hutch holds %q, want one agent", got)
		}
	})

	t.Run("stopped_then_started", func(t *testing.T) {
		t.Parallel()
		b := e.newBox(t, boxOptions{})
		rt := e.runtime(t, b, nil)
		spec := b.office(t, "k")
		mustExec(t, rt, spec, sandbox.ExecRequest{Argv: []string{"true"}})
		ctx, cancel := context.WithTimeout(context.Background(), apiTimeout)
		defer cancel()
		if _, err := e.cli.ContainerStop(ctx, b.id, client.ContainerStopOptions{Timeout: &zero}); err != nil {
			t.Fatalf("ContainerStop: %v", err)
		}
		_, err := rt.Exec(t.Context(), spec, sandbox.ExecRequest{Argv: []string{"true"}})
		checkPrecondition(t, "Exec in the stopped container", err,
			"Container '"+b.name+"' is not running. Start it with: docker start "+b.name)
		if st := e.inspect(t, b.name).Container.State; st.Running {
			t.Fatalf("hutch started the stopped container")
		}
		if _, err := e.cli.ContainerStart(ctx, b.id, client.ContainerStartOptions{}); err != nil {
			t.Fatalf("ContainerStart: %v", err)
		}
		if o := mustExec(t, rt, spec, sandbox.ExecRequest{Argv: []string{"echo back"}}); o.stdout != "back\n" {
			t.Errorf("after a stop and start, stdout %q, want %q", o.stdout, "back\n")
		}
	})

	t.Run("recreated", func(t *testing.T) {
		t.Parallel()
		b := e.newBox(t, boxOptions{})
		rt := e.runtime(t, b, nil)
		spec := b.office(t, "k")
		mustExec(t, rt, spec, sandbox.ExecRequest{Argv: []string{"touch marker"}})
		ctx, cancel := context.WithTimeout(context.Background(), apiTimeout)
		defer cancel()
		if _, err := e.cli.ContainerRemove(ctx, b.id, client.ContainerRemoveOptions{Force: true}); err != nil {
			t.Fatalf("ContainerRemove: %v", err)
		}
		_, err := rt.Exec(t.Context(), spec, sandbox.ExecRequest{Argv: []string{"true"}})
		checkPrecondition(t, "Exec in the removed container", err,
			"Container '"+b.name+"' does not exist. Create it with: docker run -d --name "+b.name+" -v "+b.workspace+":/workspace <image> sleep infinity")
		// The operator creates it again under the same name.
		b.id = e.create(t, b.name, []string{b.workspace + ":/workspace"})
		if _, err := e.cli.ContainerStart(ctx, b.id, client.ContainerStartOptions{}); err != nil {
			t.Fatalf("ContainerStart: %v", err)
		}
		if o := mustExec(t, rt, spec, sandbox.ExecRequest{Argv: []string{"ls marker"}}); o.stdout != "marker\n" {
			t.Errorf("in the re-created container: stdout %q, want %q", o.stdout, "marker\n")
		}
		if got := e.agentFiles(t, b.id); len(got) != 1 {
			t.Errorf("/.hutch in the new container holds %q, want one agent", got)
		}
	})
}

// psSleeps returns the lines of `ps` (run through the Engine API, not
// hutch) of live processes (not zombies) whose command is `sleep <marker>`.
func (e *env) psSleeps(t *testing.T, id, marker string) []string {
	t.Helper()
	out, errOut, code := e.dockerExec(t, id, "", "ps", "-o", "pid,stat,args")
	if code != 0 {
		t.Fatalf("ps: exit %d, stderr %q", code, errOut)
	}
	var live []string
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) >= 4 && f[2] == "sleep" && f[3] == marker && !strings.HasPrefix(f[1], "Z") {
			live = append(live, line)
		}
	}
	return live
}

// TestKillsTree_PS: a timeout and a cancel kill the command and its
// background grandchild, as `ps` inside the container shows.
func TestKillsTree_PS(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, tt := range []struct {
		name    string
		timeout time.Duration
		cancel  bool
		want    sandbox.ExecResult
	}{
		// The timeout leaves ps time to see both sleeps first, even on a loaded machine.
		{"timeout", 8 * time.Second, false, sandbox.ExecResult{ExitCode: -1, TimedOut: true, Timeout: 8 * time.Second}},
		{"cancel", 0, true, sandbox.ExecResult{ExitCode: -1, Aborted: true}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := e.newBox(t, boxOptions{})
			rt := e.runtime(t, b, nil)
			spec := b.office(t, "k")
			// A marker no other process of the container has.
			marker := strconv.Itoa(1_000_000 + int(time.Now().UnixNano()%1_000_000))
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan output, 1)
			go func() {
				// The subshell exits at once: its sleep is an orphaned
				// grandchild of the command, still in its process group.
				done <- execRT(ctx, rt, spec, sandbox.ExecRequest{
					Argv:    []string{`(sleep ` + marker + ` &); sleep ` + marker},
					Timeout: tt.timeout,
				})
			}()
			for deadline := time.Now().Add(returnDeadline); len(e.psSleeps(t, b.id, marker)) < 2; time.Sleep(50 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("ps never showed both sleeps")
				}
			}
			if tt.cancel {
				cancel()
			}
			select {
			case o := <-done:
				if o.err != nil {
					t.Fatalf("Exec error: %v", o.err)
				}
				o.res.Duration = 0
				if o.res != tt.want {
					t.Errorf("result %+v, want %+v", o.res, tt.want)
				}
			case <-time.After(returnDeadline):
				t.Fatalf("Exec did not return")
			}
			var left []string
			for range 40 {
				if left = e.psSleeps(t, b.id, marker); len(left) == 0 {
					return
				}
				time.Sleep(250 * time.Millisecond)
			}
			t.Errorf("still running after Exec returned:\n%s", strings.Join(left, "\n"))
		})
	}
}
