package image_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"

	"github.com/hutchsandbox/hutch/internal/agent"
	"github.com/hutchsandbox/hutch/internal/agentbin"
	"github.com/hutchsandbox/hutch/internal/engine"
	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/office"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/sandbox/image"
	"github.com/hutchsandbox/hutch/internal/sandbox/sandboxtest"
	"github.com/hutchsandbox/hutch/internal/testenv"
)

// fixture is one hutch installation against the real engine: its own
// state dir (which labels everything it makes), run dir and workspace.
type fixture struct {
	cli            *client.Client
	eng            *engine.Engine
	img            string
	agent          agentbin.Binary
	state, run, ws string
	rt             *image.Runtime
	// pool, when above 0, is how many warm pool members office fills
	// before it hands out a spec: every first command then takes one.
	pool int
	// logs holds the warnings of every runtime of the fixture; pooled
	// counts hand-outs.
	logs   syncBuffer
	pooled atomic.Int64
	// noHandOut says the test hands out nothing on purpose.
	noHandOut bool
	// changes are what every runtime of the fixture told its Changed
	// hook.
	changesMu sync.Mutex
	changes   []sandbox.Change
}

// changed returns the changes told so far.
func (f *fixture) changed() []sandbox.Change {
	f.changesMu.Lock()
	defer f.changesMu.Unlock()
	return slices.Clone(f.changes)
}

// syncBuffer is a bytes.Buffer for several goroutines' logs.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// newPooledFixture is newFixture whose offices are served from the warm
// pool.
func newPooledFixture(t *testing.T) *fixture {
	t.Helper()
	f := newFixture(t)
	if why := f.rt.PoolUnusable(); why != "" {
		t.Skip(why)
	}
	f.pool = 1
	// Before the run dir goes (cleanups run last first): never remove
	// through a mount.
	t.Cleanup(func() {
		if err := image.DetachPool(f.run); err != nil {
			t.Errorf("detach the pool's mounts: %v", err)
		}
		// The suite proves something about pooled runtimes only if
		// its commands ran in some.
		if strings.Contains(f.logs.String(), "could not be handed out") {
			t.Errorf("a hand-out failed and the runtime started cold:\n%s", f.logs.String())
		}
		if f.pooled.Load() == 0 && !f.noHandOut {
			t.Error("no runtime was handed out from the pool")
		}
	})
	return f
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	cli := testenv.Docker(t)
	f := &fixture{cli: cli, img: testenv.BusyboxImage(t, cli)}
	eng, err := engine.Connect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = eng.Close() })
	f.eng = eng
	if f.agent, err = agentbin.Locate(testenv.HutchBinary(t)); err != nil {
		t.Fatal(err)
	}
	f.state = filepath.Join(t.TempDir(), "state")
	f.ws = filepath.Join(t.TempDir(), "ws")
	for _, d := range []string{f.state, f.ws} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	// Unix socket paths are short; t.TempDir paths are not.
	run, err := os.MkdirTemp("", "hr-")
	if err != nil {
		t.Fatal(err)
	}
	f.run = run
	testenv.CleanupContainers(t, cli, engine.LabelStateDir+"="+f.state)
	t.Cleanup(func() { _ = agent.RemoveSocketDir(run) }) // sealed socket dirs included
	f.rt = f.runtime(t)
	return f
}

// runtime makes another Runtime over the same installation, as a second
// hutch process would.
func (f *fixture) runtime(t *testing.T) *image.Runtime {
	t.Helper()
	return f.runtimeWith(t, func(*image.Config) {})
}

// runtimeWith is runtime with its config changed by change.
func (f *fixture) runtimeWith(t *testing.T, change func(*image.Config)) *image.Runtime {
	t.Helper()
	cfg := image.Config{Engine: f.eng, Image: f.img, StateDir: f.state, Workspace: f.ws, RunDir: f.run, Agent: f.agent,
		Log: slog.New(slog.NewTextHandler(io.MultiWriter(os.Stderr, &f.logs), &slog.HandlerOptions{Level: slog.LevelWarn})),
		Event: func(e string) {
			if e == "pooled" {
				f.pooled.Add(1)
			}
		},
		Changed: func(_ context.Context, c sandbox.Change) {
			f.changesMu.Lock()
			defer f.changesMu.Unlock()
			f.changes = append(f.changes, c)
		}}
	change(&cfg)
	rt, err := image.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return rt
}

// office makes an office directory and the spec of its conversation.
// The id gets a suffix of this installation's own: two runs of the tests
// on one engine (or two tests of one run) never name the same container,
// which hutch would refuse as another installation's.
func (f *fixture) office(t *testing.T, id string) sandbox.Spec {
	t.Helper()
	sum := sha256.Sum256([]byte(f.state))
	return f.exactOffice(t, id+"-"+hex.EncodeToString(sum[:3]))
}

// exactOffice is office with the id as given.
func (f *fixture) exactOffice(t *testing.T, id string) sandbox.Spec {
	t.Helper()
	addr, err := office.NewAddress("web", id)
	if err != nil {
		t.Fatal(err)
	}
	key := string(addr.Key())
	dir := filepath.Join(f.ws, key)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if f.pool > 0 {
		if err := f.rt.FillPool(context.Background(), f.pool); err != nil {
			t.Fatalf("FillPool: %v", err)
		}
	}
	return sandbox.Spec{
		OfficeKey:         key,
		Platform:          "web",
		ConversationID:    id,
		OfficeDir:         dir,
		OfficeRuntimePath: "/workspace/" + key,
		Mounts:            []sandbox.Mount{{HostPath: dir, RuntimePath: "/workspace/" + key}},
	}
}

func run(t *testing.T, rt sandbox.Runtime, spec sandbox.Spec, cmd string, env map[string]string) (string, sandbox.ExecResult) {
	t.Helper()
	var out, errb bytes.Buffer
	res, err := rt.Exec(context.Background(), spec, sandbox.ExecRequest{Argv: []string{cmd}, Env: env, Stdout: &out, Stderr: &errb, Timeout: 2 * time.Minute})
	if err != nil {
		t.Fatalf("Exec(%q): %v", cmd, err)
	}
	if res.ExitCode != 0 && res.Message() == "" {
		t.Fatalf("Exec(%q) exit %d: %s%s", cmd, res.ExitCode, out.String(), errb.String())
	}
	return out.String(), res
}

func (f *fixture) inspect(t *testing.T, spec sandbox.Spec) client.ContainerInspectResult {
	t.Helper()
	res, err := f.cli.ContainerInspect(context.Background(), image.ContainerName(spec.OfficeKey), client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestConformance(t *testing.T) {
	f := newFixture(t)
	sandboxtest.Run(t, sandboxtest.Harness{New: func(t *testing.T) (sandbox.Runtime, sandbox.Spec) {
		return f.rt, f.office(t, testenv.Name(t))
	}})
}

// TestFiles runs the files suite against one container: its checks
// work in directories of their own, so they share the conversation (one
// container to make, not one per check); the mounts check, last,
// re-creates it with mounts of its own.
func TestFiles(t *testing.T) {
	f := newFixture(t)
	spec := f.office(t, testenv.Name(t))
	sandboxtest.RunFiles(t, sandboxtest.Harness{New: func(t *testing.T) (sandbox.Runtime, sandbox.Spec) {
		return f.rt, spec
	}})
}

func secret(t *testing.T) string {
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return "hutch-secret-" + hex.EncodeToString(b)
}

// TestHardening checks what the container is made with, that vault env
// lives only as long as the command it was given to, and that vault
// files are owner-only and read-only inside.
func TestHardening(t *testing.T) {
	f := newFixture(t)
	spec := f.office(t, "hardening")
	value := secret(t)
	fileValue := secret(t)
	vdir := filepath.Join(f.state, "vaults", spec.OfficeKey)
	if err := os.MkdirAll(vdir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(vdir, ".netrc"), []byte(fileValue), 0o600); err != nil {
		t.Fatal(err)
	}
	spec.VaultFiles = []sandbox.Mount{{HostPath: filepath.Join(vdir, ".netrc"), RuntimePath: "/root/.netrc", ReadOnly: true}}

	out, _ := run(t, f.rt, spec, `echo "$HUTCH_T"`, map[string]string{"HUTCH_T": value})
	if out != value+"\n" {
		t.Fatalf("vault env did not reach the command: %q", out)
	}
	ins := f.inspect(t, spec)
	hc, cfg := ins.Container.HostConfig, ins.Container.Config
	// Podman's inspect lists the capabilities it dropped from its default
	// set instead of the "ALL" asked for; the bounding set checked below
	// is what counts there.
	dropsAll := len(hc.CapDrop) == 1 && hc.CapDrop[0] == "ALL" || f.eng.Flavor == engine.FlavorPodman
	if !strings.Contains(string(ins.Raw), "no-new-privileges") || !dropsAll {
		t.Errorf("not hardened: SecurityOpt %v CapDrop %v", hc.SecurityOpt, hc.CapDrop)
	}
	if hc.PidsLimit == nil || *hc.PidsLimit != 1024 || hc.Memory != 1<<30 || hc.MemorySwap != 1<<30 || hc.NanoCPUs != 5e8 {
		t.Errorf("limits: pids %v memory %d swap %d nanocpus %d", hc.PidsLimit, hc.Memory, hc.MemorySwap, hc.NanoCPUs)
	}
	for _, k := range []string{engine.LabelManaged, engine.LabelMode, engine.LabelOffice, engine.LabelPlatform, engine.LabelConversation, engine.LabelFingerprint, engine.LabelImageID} {
		if cfg.Labels[k] == "" {
			t.Errorf("label %s missing", k)
		}
	}
	if strings.Contains(string(ins.Raw), value) || strings.Contains(string(ins.Raw), fileValue) {
		t.Error("docker inspect shows a vault value")
	}
	if ins.Container.NetworkSettings == nil || ins.Container.NetworkSettings.Networks[image.NetworkName(spec.OfficeKey)] == nil {
		t.Errorf("container is not on its own network %s", image.NetworkName(spec.OfficeKey))
	}
	// Between commands no process holds the value, in env or argv.
	out, _ = run(t, f.rt, spec, `cat /proc/[0-9]*/environ /proc/[0-9]*/cmdline 2>/dev/null | tr '\0' '\n'`, nil)
	if strings.Contains(out, value) {
		t.Error("a process inside the container still holds the vault env value")
	}
	out, _ = run(t, f.rt, spec, `stat -c '%a %U' /root/.netrc; cat /root/.netrc; echo; echo x >> /root/.netrc && echo WRITABLE || echo READONLY`, nil)
	if want := "600 root\n" + fileValue + "\nREADONLY\n"; out != want {
		t.Errorf("vault file inside got %q, want %q", out, want)
	}
	out, _ = run(t, f.rt, spec, `grep Cap /proc/self/status; cat /proc/1/cmdline | tr '\0' ' '`, nil)
	// CHOWN, DAC_OVERRIDE, FOWNER, FSETID, KILL, SETGID, SETUID, NET_BIND_SERVICE.
	if !strings.Contains(out, "CapBnd:\t00000000000004fb") {
		t.Errorf("bounding capability set is not the documented one:\n%s", out)
	}
	if !strings.Contains(out, "/hutch/bin/hutch agent --init") {
		t.Errorf("pid 1 is not the agent:\n%s", out)
	}
}

// TestProvisioning_Serialised starts commands for a new office from two
// runtimes (two hutch processes) at once: one container results.
func TestProvisioning_Serialised(t *testing.T) {
	f := newFixture(t)
	spec := f.office(t, "serial")
	rts := []*image.Runtime{f.rt, f.runtime(t)}
	var wg sync.WaitGroup
	errs := make(chan error, 10)
	for i := 0; i < 10; i++ {
		wg.Add(1)
		go func(rt *image.Runtime) {
			defer wg.Done()
			res, err := rt.Exec(context.Background(), spec, sandbox.ExecRequest{Argv: []string{"true"}})
			if err == nil && res.ExitCode != 0 {
				err = io.ErrUnexpectedEOF
			}
			errs <- err
		}(rts[i%2])
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("concurrent first command: %v", err)
		}
	}
	list, err := f.cli.ContainerList(context.Background(), client.ContainerListOptions{All: true,
		Filters: make(client.Filters).Add("label", engine.LabelOffice+"="+spec.OfficeKey).Add("label", engine.LabelStateDir+"="+f.state)})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 {
		t.Errorf("%d containers for one office, want 1", len(list.Items))
	}
}

// TestDrift changes the door policy's mounts, then rotates a vault file:
// each re-creates the container on the next command, and a file the
// agent installed under /usr/local survives both.
func TestDrift(t *testing.T) {
	f := newFixture(t)
	spec := f.office(t, "drift")
	run(t, f.rt, spec, `echo installed > /usr/local/bin/marker`, nil)
	first := f.inspect(t, spec).Container.ID

	memory := filepath.Join(f.ws, "MEMORY.md")
	if err := os.WriteFile(memory, []byte("shared\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	spec.Mounts = append(spec.Mounts, sandbox.Mount{HostPath: memory, RuntimePath: "/workspace/MEMORY.md", ReadOnly: true})
	out, _ := run(t, f.rt, spec, `cat /usr/local/bin/marker /workspace/MEMORY.md`, nil)
	second := f.inspect(t, spec).Container.ID
	if second == first || out != "installed\nshared\n" {
		t.Fatalf("after a mount change: id changed %v, output %q", second != first, out)
	}

	vdir := filepath.Join(f.state, "vaults", spec.OfficeKey)
	if err := os.MkdirAll(vdir, 0o700); err != nil {
		t.Fatal(err)
	}
	cred := filepath.Join(vdir, "token")
	if err := os.WriteFile(cred, []byte("v1"), 0o600); err != nil {
		t.Fatal(err)
	}
	spec.VaultFiles = []sandbox.Mount{{HostPath: cred, RuntimePath: "/root/token", ReadOnly: true}}
	run(t, f.rt, spec, `true`, nil)
	third := f.inspect(t, spec).Container.ID
	if err := os.WriteFile(cred, []byte("v2"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, _ = run(t, f.rt, spec, `cat /usr/local/bin/marker /root/token`, nil)
	fourth := f.inspect(t, spec).Container.ID
	if fourth == third || out != "installed\nv2" {
		t.Errorf("after rotating a credential: id changed %v, output %q", fourth != third, out)
	}
	if _, err := f.cli.ImageInspect(context.Background(), image.SnapshotRef(spec.OfficeKey)); !engine.IsNotFound(err) {
		t.Errorf("snapshot tag left behind (inspect: %v)", err)
	}
	// Unchanged needs do not re-create.
	run(t, f.rt, spec, `true`, nil)
	if f.inspect(t, spec).Container.ID != fourth {
		t.Error("a command with unchanged needs re-created the container")
	}
	// Removing the runtime leaves no snapshot layers behind.
	if err := f.rt.Remove(context.Background(), spec.OfficeKey); err != nil {
		t.Fatal(err)
	}
	imgs, err := f.cli.ImageList(context.Background(), client.ImageListOptions{All: true,
		Filters: make(client.Filters).Add("label", engine.LabelSnapshotOf+"="+image.ContainerName(spec.OfficeKey))})
	if err != nil {
		t.Fatal(err)
	}
	if len(imgs.Items) != 0 {
		t.Errorf("%d snapshot images left after Remove", len(imgs.Items))
	}
}

// TestRecreatedWhenDeleted removes the container behind hutch's back.
func TestRecreatedWhenDeleted(t *testing.T) {
	f := newFixture(t)
	spec := f.office(t, "deleted")
	run(t, f.rt, spec, `true`, nil)
	id := f.inspect(t, spec).Container.ID
	if _, err := f.cli.ContainerRemove(context.Background(), id, client.ContainerRemoveOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	if out, _ := run(t, f.rt, spec, `echo back`, nil); out != "back\n" {
		t.Errorf("after deletion got %q", out)
	}
	if f.inspect(t, spec).Container.ID == id {
		t.Error("container id unchanged after deletion")
	}
	// Stopped behind hutch's back: started again.
	if _, err := f.cli.ContainerStop(context.Background(), image.ContainerName(spec.OfficeKey), client.ContainerStopOptions{}); err != nil {
		t.Fatal(err)
	}
	if out, _ := run(t, f.rt, spec, `echo started`, nil); out != "started\n" {
		t.Errorf("after a stop got %q", out)
	}
}

// TestIdleStop never stops a runtime with a command in flight, and
// stops it once idle; the next command starts it again.
func TestIdleStop(t *testing.T) {
	f := newFixture(t)
	spec := f.office(t, "idle")
	run(t, f.rt, spec, `true`, nil)
	done := make(chan struct{})
	go func() {
		defer close(done)
		run(t, f.rt, spec, `sleep 3`, nil)
	}()
	time.Sleep(500 * time.Millisecond)
	stopped, err := f.rt.StopIdle(context.Background(), time.Millisecond)
	if err != nil || len(stopped) != 0 {
		t.Fatalf("StopIdle with a command running stopped %v (%v)", stopped, err)
	}
	<-done
	if !f.inspect(t, spec).Container.State.Running {
		t.Fatal("container stopped while a command ran")
	}
	stopped, err = f.rt.StopIdle(context.Background(), time.Hour)
	if err != nil || len(stopped) != 0 {
		t.Fatalf("StopIdle(1h) right after a command stopped %v (%v)", stopped, err)
	}
	time.Sleep(20 * time.Millisecond)
	stopped, err = f.rt.StopIdle(context.Background(), 10*time.Millisecond)
	if err != nil || len(stopped) != 1 || stopped[0] != spec.OfficeKey {
		t.Fatalf("StopIdle(10ms) stopped %v (%v), want the office", stopped, err)
	}
	if f.inspect(t, spec).Container.State.Running {
		t.Fatal("idle container still running")
	}
	if out, _ := run(t, f.rt, spec, `echo again`, nil); out != "again\n" {
		t.Errorf("next command after idle stop got %q", out)
	}
}

// TestLimits applies global limits, a boost and temporary limits live
// (same container), and ends the boost with the runtime.
func TestLimits(t *testing.T) {
	f := newFixture(t)
	spec := f.office(t, "limits")
	run(t, f.rt, spec, `true`, nil)
	id := f.inspect(t, spec).Container.ID

	spec.Limits = sandbox.Limits{CPUs: 1, MemoryBytes: 512 << 20, Pids: 256}
	run(t, f.rt, spec, `true`, nil)
	hc := f.inspect(t, spec).Container.HostConfig
	if !f.eng.CanUpdateLimits() {
		// Podman before 5.1 cannot change a running container's limits:
		// new limits in settings re-create it, and boosts are refused.
		if f.inspect(t, spec).Container.ID == id || hc.NanoCPUs != 1e9 || hc.Memory != 512<<20 || *hc.PidsLimit != 256 {
			t.Fatalf("global limits not applied by a re-create: nanocpus %d memory %d pids %d", hc.NanoCPUs, hc.Memory, *hc.PidsLimit)
		}
		if _, err := f.rt.Boost(context.Background(), spec.OfficeKey, sandbox.Limits{CPUs: 2}); !errdefs.IsNotSupported(err) {
			t.Errorf("boost on an engine that cannot update limits: %v, want ErrNotSupported", err)
		}
		if _, err := f.rt.SetLimits(context.Background(), spec.OfficeKey, sandbox.Limits{Pids: 100}); !errdefs.IsNotSupported(err) {
			t.Errorf("temporary limits on an engine that cannot update limits: %v, want ErrNotSupported", err)
		}
		// The re-create left a snapshot image under the container; the
		// fixture's sweep removes containers, not images: Remove does.
		if err := f.rt.Remove(context.Background(), spec.OfficeKey); err != nil {
			t.Fatal(err)
		}
		imgs, err := f.cli.ImageList(context.Background(), client.ImageListOptions{All: true,
			Filters: make(client.Filters).Add("label", engine.LabelSnapshotOf+"="+image.ContainerName(spec.OfficeKey)).Add("label", engine.LabelStateDir+"="+f.state)})
		if err != nil || len(imgs.Items) != 0 {
			t.Errorf("snapshot images left after Remove: %d (%v)", len(imgs.Items), err)
		}
		return
	}
	if f.inspect(t, spec).Container.ID != id || hc.NanoCPUs != 1e9 || hc.Memory != 512<<20 || *hc.PidsLimit != 256 {
		t.Fatalf("global limits not applied live: nanocpus %d memory %d pids %d", hc.NanoCPUs, hc.Memory, *hc.PidsLimit)
	}
	st, err := f.rt.Boost(context.Background(), spec.OfficeKey, sandbox.Limits{CPUs: 2, MemoryBytes: 2 << 30})
	if err != nil {
		t.Fatal(err)
	}
	if !st.Boosted || st.Limits.CPUs != 2 || st.Limits.MemoryBytes != 2<<30 || st.Limits.Pids != 256 {
		t.Errorf("boost status %+v", st)
	}
	// A command keeps the boost.
	run(t, f.rt, spec, `true`, nil)
	if hc := f.inspect(t, spec).Container.HostConfig; hc.NanoCPUs != 2e9 || hc.MemorySwap != 2<<30 {
		t.Errorf("boost lost after a command: nanocpus %d swap %d", hc.NanoCPUs, hc.MemorySwap)
	}
	if _, err := f.rt.SetLimits(context.Background(), spec.OfficeKey, sandbox.Limits{Pids: 100}); err != nil {
		t.Fatal(err)
	}
	if hc := f.inspect(t, spec).Container.HostConfig; *hc.PidsLimit != 100 || hc.NanoCPUs != 2e9 {
		t.Errorf("temporary limits: pids %d nanocpus %d", *hc.PidsLimit, hc.NanoCPUs)
	}
	if err := f.rt.Stop(context.Background(), spec.OfficeKey); err != nil {
		t.Fatal(err)
	}
	run(t, f.rt, spec, `true`, nil)
	ins := f.inspect(t, spec)
	if ins.Container.ID != id || ins.Container.HostConfig.NanoCPUs != 1e9 || *ins.Container.HostConfig.PidsLimit != 256 {
		t.Errorf("after stop the boost should end: nanocpus %d pids %d", ins.Container.HostConfig.NanoCPUs, *ins.Container.HostConfig.PidsLimit)
	}
	if _, err := f.rt.Boost(context.Background(), "v1-web-nothing-0123456789abcdef", sandbox.Limits{}); err == nil {
		t.Error("boost of an office without a runtime succeeded")
	}
}

// TestForkBombAndOOM: a fork bomb hits the pid ceiling and the sandbox
// survives; a memory hog is reported as OOM.
func TestForkBombAndOOM(t *testing.T) {
	f := newFixture(t)
	spec := f.office(t, "bomb")
	spec.Limits = sandbox.Limits{Pids: 64, MemoryBytes: 64 << 20}
	var out bytes.Buffer
	res, err := f.rt.Exec(context.Background(), spec, sandbox.ExecRequest{
		Argv: []string{`bomb() { bomb | bomb & }; bomb; sleep 1; echo survived-fork`}, Timeout: 10 * time.Second, Stdout: &out, Stderr: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("fork bomb: exit %d timed out %v", res.ExitCode, res.TimedOut)
	if o, _ := run(t, f.rt, spec, `echo alive`, nil); o != "alive\n" {
		t.Fatalf("sandbox did not survive the fork bomb: %q", o)
	}
	res, err = f.rt.Exec(context.Background(), spec, sandbox.ExecRequest{
		Argv: []string{`dd if=/dev/zero of=/dev/null bs=200M count=1`}, Timeout: time.Minute, Stderr: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	if !res.OOMKilled || res.Message() != "Command was killed: the sandbox ran out of memory" {
		t.Errorf("memory hog: %+v, message %q; want OOMKilled", res, res.Message())
	}
	if o, _ := run(t, f.rt, spec, `echo alive`, nil); o != "alive\n" {
		t.Fatalf("sandbox did not survive the OOM: %q", o)
	}
}

// TestLargeOutput streams 256 MiB out of the container with a 1 MiB cap:
// exactly the cap is kept and the heap stays flat. A heap that kept the
// output would grow by eight times the allowance, so 256 MiB shows what
// 1 GiB did, for a quarter of the data through the agent (the test runs
// against both engines in CI).
func TestLargeOutput(t *testing.T) {
	f := newFixture(t)
	spec := f.office(t, "large")
	run(t, f.rt, spec, `true`, nil)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	var out bytes.Buffer
	res, err := f.rt.Exec(context.Background(), spec, sandbox.ExecRequest{
		Argv: []string{`head -c 268435456 /dev/zero`}, Stdout: &out, OutputLimit: 1 << 20, Timeout: 5 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	// Collected first: garbage a loaded machine's collector has not
	// reached yet is not memory the exec path holds.
	runtime.GC()
	runtime.ReadMemStats(&after)
	if out.Len() != 1<<20 || !res.StdoutTruncated || res.StdoutBytes != 256<<20 {
		t.Errorf("kept %d bytes, truncated %v, total %d", out.Len(), res.StdoutTruncated, res.StdoutBytes)
	}
	if grew := int64(after.HeapAlloc) - int64(before.HeapAlloc); grew > 32<<20 {
		t.Errorf("heap grew by %d MiB for 256 MiB of output", grew>>20)
	}
}

// TestReconcile adopts the runtime of a known office and removes one no
// office accounts for.
func TestReconcile(t *testing.T) {
	f := newFixture(t)
	known := f.office(t, "known")
	unknown := f.office(t, "unknown")
	run(t, f.rt, known, `true`, nil)
	run(t, f.rt, unknown, `true`, nil)
	rep, err := f.runtime(t).Reconcile(context.Background(), func(k string) bool { return k == known.OfficeKey })
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Adopted) != 1 || rep.Adopted[0] != known.OfficeKey || len(rep.Removed) != 1 || rep.Removed[0] != unknown.OfficeKey {
		t.Errorf("reconcile report %+v", rep)
	}
	if _, err := f.cli.ContainerInspect(context.Background(), image.ContainerName(unknown.OfficeKey), client.ContainerInspectOptions{}); !engine.IsNotFound(err) {
		t.Errorf("unaccounted container still exists (%v)", err)
	}
	if _, err := f.cli.NetworkInspect(context.Background(), image.NetworkName(unknown.OfficeKey), client.NetworkInspectOptions{}); !engine.IsNotFound(err) {
		t.Errorf("unaccounted network still exists (%v)", err)
	}
	if out, _ := run(t, f.rt, known, `echo kept`, nil); out != "kept\n" {
		t.Errorf("known runtime after reconcile: %q", out)
	}
}

// TestNetwork_SubnetTaken: when another network holds the subnet an
// office's network would take first, the next one of the pool is taken.
// Docker and Podman word that refusal differently.
func TestNetwork_SubnetTaken(t *testing.T) {
	f := newFixture(t)
	pool := netip.MustParsePrefix("10.214.255.240/28") // two /29s, outside the default pool
	rt, err := image.New(image.Config{Engine: f.eng, Image: f.img, StateDir: f.state, Workspace: f.ws, RunDir: f.run, Agent: f.agent, NetworkPool: pool})
	if err != nil {
		t.Fatal(err)
	}
	spec := f.office(t, "subnet-taken")
	first := image.FirstSubnet(pool, spec.OfficeKey)
	ctx := context.Background()
	// Labelled with the state dir, so the fixture's sweep removes it.
	if _, err := f.cli.NetworkCreate(ctx, testenv.Name(t), client.NetworkCreateOptions{
		Driver: "bridge",
		IPAM:   &network.IPAM{Config: []network.IPAMConfig{{Subnet: first, Gateway: first.Addr().Next()}}},
		Labels: map[string]string{engine.LabelStateDir: f.state},
	}); err != nil {
		t.Fatal(err)
	}
	if out, _ := run(t, rt, spec, `echo up`, nil); out != "up\n" {
		t.Fatalf("got %q", out)
	}
	n, err := f.cli.NetworkInspect(ctx, image.NetworkName(spec.OfficeKey), client.NetworkInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg := n.Network.IPAM.Config; len(cfg) != 1 || cfg[0].Subnet == first || !pool.Contains(cfg[0].Subnet.Addr()) {
		t.Errorf("office network IPAM %+v, want the other /29 of %s than %s", cfg, pool, first)
	}
}

// TestKill9 kills a hutch process mid-command: the agent sees its caller
// go and kills the command's whole group, so nothing is orphaned.
func TestKill9(t *testing.T) {
	f := newFixture(t)
	spec := f.office(t, "kill9")
	run(t, f.rt, spec, `true`, nil)
	cmd := exec.Command(testenv.HutchBinary(t), "exec", "--sandbox", "image:"+f.img, "--conversation", "web/"+spec.ConversationID, "--",
		`sleep 300 & echo $! > /tmp/grandchild; echo $$ > /tmp/leader; sleep 300`)
	cmd.Env = append(os.Environ(), "HUTCH_STATE_DIR="+f.state, "HUTCH_WORKSPACE="+f.ws, "HUTCH_RUN_DIR="+f.run, "HUTCH_AGENT_BINARY="+testenv.HutchBinary(t))
	var stderr testenv.LockedBuffer // read while hutch may still write it
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var pids string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		pids, _ = run(t, f.rt, spec, `cat /tmp/leader /tmp/grandchild 2>/dev/null; true`, nil)
		if strings.Count(pids, "\n") == 2 {
			break
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			t.Fatalf("the command never started; hutch said: %s", stderr.String())
		}
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	check := `for p in ` + strings.ReplaceAll(strings.TrimSpace(pids), "\n", " ") + `; do
		s=$(cat /proc/$p/stat 2>/dev/null) || continue
		case "$s" in *") Z "*) ;; *) echo "alive $p";; esac
	done`
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		out, _ := run(t, f.rt, spec, check, nil)
		if out == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("orphans of a killed hutch still run: %s", out)
		}
	}
}

// TestDockerdRestart restarts the engine between two commands: the next
// command works. It disturbs every other test using the engine, so it
// runs only when asked (.ci/run runs it alone, after the others).
func TestDockerdRestart(t *testing.T) {
	if os.Getenv("HUTCH_TEST_RESTART_DOCKERD") != "1" {
		t.Skip("restarts dockerd; set HUTCH_TEST_RESTART_DOCKERD=1 (.ci/run does, in a run of its own)")
	}
	f := newFixture(t)
	spec := f.office(t, "restart")
	run(t, f.rt, spec, `echo before > /usr/local/bin/kept`, nil)
	data, err := os.ReadFile("/var/run/docker.pid")
	if err != nil {
		t.Fatalf("find dockerd: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(60 * time.Second); syscall.Kill(pid, 0) == nil; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("dockerd did not stop")
		}
	}
	root, err := testenv.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(filepath.Join(root, "hack", "docker-up")).CombinedOutput(); err != nil {
		t.Fatalf("restart dockerd: %v\n%s", err, out)
	}
	if out, _ := run(t, f.rt, spec, `cat /usr/local/bin/kept`, nil); out != "before\n" {
		t.Errorf("after a dockerd restart got %q", out)
	}
}

// TestForeignNetworkRefused: a network of the office's name that another
// hutch (state dir) made is a clear conflict, not an ambiguous start.
func TestForeignNetworkRefused(t *testing.T) {
	f := newFixture(t)
	spec := f.office(t, testenv.Name(t))
	other := filepath.Join(t.TempDir(), "other-state")
	testenv.CleanupContainers(t, f.cli, engine.LabelStateDir+"="+other)
	if _, err := f.cli.NetworkCreate(context.Background(), image.NetworkName(spec.OfficeKey), client.NetworkCreateOptions{
		Driver: "bridge", Labels: map[string]string{engine.LabelManaged: "true", engine.LabelStateDir: other}}); err != nil {
		t.Fatal(err)
	}
	_, err := f.rt.Exec(context.Background(), spec, sandbox.ExecRequest{Argv: []string{"true"}})
	if err == nil || !strings.Contains(err.Error(), "exists that this hutch did not create") {
		t.Errorf("Exec with a foreign network of the same name: %v", err)
	}
}

// TestNetworkReattached: a container left off its network (a hutch that
// died between starting it and attaching it) is attached again by the
// next command.
func TestNetworkReattached(t *testing.T) {
	f := newFixture(t)
	if f.eng.Flavor == engine.FlavorPodman {
		t.Skip("on Podman containers are created on their network directly, so none is ever left off it")
	}
	spec := f.office(t, testenv.Name(t))
	run(t, f.rt, spec, `true`, nil)
	name := image.NetworkName(spec.OfficeKey)
	if _, err := f.cli.NetworkDisconnect(context.Background(), name, client.NetworkDisconnectOptions{Container: image.ContainerName(spec.OfficeKey), Force: true}); err != nil {
		t.Fatal(err)
	}
	// A new process (runtime) sees it first.
	run(t, f.runtime(t), spec, `true`, nil)
	if ins := f.inspect(t, spec); ins.Container.NetworkSettings.Networks[name] == nil {
		t.Errorf("container not on %s after the next command; networks %v", name, ins.Container.NetworkSettings.Networks)
	}
}

// TestUsage reads a running container's resource use from the engine, as
// the admin portal does, while a command spins: its CPU use is held to the
// limit, and the figures are the container's.
func TestUsage(t *testing.T) {
	f := newFixture(t)
	spec := f.office(t, "usage")
	spec.Limits = sandbox.Limits{CPUs: 0.5, MemoryBytes: 64 << 20, Pids: 64}
	run(t, f.rt, spec, `true`, nil)
	ctx := context.Background()
	wait := sandboxtest.Spin(t, f.rt, spec, 4*time.Second)
	time.Sleep(500 * time.Millisecond)
	// Held to half a CPU; allow for a slow start and a busy machine, not
	// for nonsense.
	cpu, b := sandboxtest.CPUShare(t, f.rt, spec.OfficeKey, 1500*time.Millisecond)
	if cpu < 0.05 || cpu > 0.6 {
		t.Errorf("CPU use %.3f, the later reading %+v; want up to 0.5", cpu, b)
	}
	id := f.inspect(t, spec).Container.ID
	// Podman's stats leave the process limit out.
	pidsLimitOK := b.PidsLimit == 64 || f.eng.Flavor == engine.FlavorPodman && b.PidsLimit == 0
	if b.Instance != id || b.Memory == 0 || b.MemoryLimit != 64<<20 || b.Pids < 2 || !pidsLimitOK {
		t.Errorf("usage %+v, want container %s's, 64 MiB and 64 pids as limits", b, id)
	}
	wait()
	if err := f.rt.Stop(ctx, spec.OfficeKey); err != nil {
		t.Fatal(err)
	}
	if _, err := f.rt.Usage(ctx, spec.OfficeKey); !errdefs.IsNotFound(err) || !strings.Contains(err.Error(), "not running") {
		t.Errorf("usage of a stopped container: %v, want NotFound", err)
	}
	if _, err := f.rt.Usage(ctx, "v1-web-nothing-0123456789abcdef"); !errdefs.IsNotFound(err) {
		t.Errorf("usage of an office without a container: %v, want NotFound", err)
	}
}

// TestLimits_CorruptRuntimeState: a runtime.json (the boost and temporary
// limits of a running container) that cannot be parsed is an error
// naming the file, as every state file's is; it is never read as "no
// boost" and overwritten. Stopping the runtime ends its boost and with
// it the file, and the next command works.
func TestLimits_CorruptRuntimeState(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	spec := f.office(t, testenv.Name(t))
	run(t, f.rt, spec, `true`, nil)
	path := filepath.Join(f.state, "conversations", spec.OfficeKey, "runtime.json")
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	corrupt := []byte(`{"containerId": "` + f.inspect(t, spec).Container.ID + `", "boost": {"cpus": 2`)
	if err := os.WriteFile(path, corrupt, 0o600); err != nil {
		t.Fatal(err)
	}
	want := "Malformed runtime state in " + path + ": unexpected end of JSON input; stop the runtime (hutch sandbox stop) to end its boost and temporary limits, or remove the file"
	check := func(what string, err error) {
		t.Helper()
		if !errdefs.IsFailedPrecondition(err) || err.Error() != want {
			t.Errorf("%s with a corrupt runtime.json: %v, want ErrFailedPrecondition %q", what, err, want)
		}
	}
	_, err := f.rt.Status(ctx, spec.OfficeKey)
	check("Status", err)
	if f.eng.CanUpdateLimits() {
		_, err = f.rt.Boost(ctx, spec.OfficeKey, sandbox.Limits{CPUs: 1})
		check("Boost", err)
		_, err = f.rt.SetLimits(ctx, spec.OfficeKey, sandbox.Limits{Pids: 100})
		check("SetLimits", err)
		_, err = f.rt.Exec(ctx, spec, sandbox.ExecRequest{Argv: []string{"true"}})
		check("Exec", err)
	}
	if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, corrupt) {
		t.Errorf("runtime.json after the refusals: %q, %v; want it untouched", got, err)
	}
	if err := f.rt.Stop(ctx, spec.OfficeKey); err != nil {
		t.Fatal(err)
	}
	if out, _ := run(t, f.rt, spec, `echo again`, nil); out != "again\n" {
		t.Errorf("after a stop got %q", out)
	}
	if st, err := f.rt.Status(ctx, spec.OfficeKey); err != nil || st.Boosted {
		t.Errorf("status after a stop: %+v, %v; want no boost", st, err)
	}
}

// TestNetworkRemovedWhileStopped: an idle stop leaves a container with no
// endpoint on its network, so a network prune removes the network. The
// next command makes the office network anew and starts the same
// container on it, its writable layer kept.
func TestNetworkRemovedWhileStopped(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	spec := f.office(t, testenv.Name(t))
	run(t, f.rt, spec, `echo kept > /usr/local/bin/marker`, nil)
	id := f.inspect(t, spec).Container.ID
	if err := f.rt.Stop(ctx, spec.OfficeKey); err != nil {
		t.Fatal(err)
	}
	name := image.NetworkName(spec.OfficeKey)
	// docker network prune, confined to this test's installation: other
	// tests share the engine.
	res, err := f.cli.NetworkPrune(ctx, client.NetworkPruneOptions{Filters: make(client.Filters).Add("label", engine.LabelStateDir+"="+f.state)})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(res.Report.NetworksDeleted, name) {
		if f.eng.Flavor == engine.FlavorPodman {
			t.Skip("Podman does not prune a network that a stopped container uses, so the fault cannot arise there")
		}
		t.Fatalf("the prune removed %v, not %s", res.Report.NetworksDeleted, name)
	}
	if out, _ := run(t, f.rt, spec, `cat /usr/local/bin/marker`, nil); out != "kept\n" {
		t.Errorf("after the network was removed got %q, want the writable layer's marker", out)
	}
	ins := f.inspect(t, spec)
	if ins.Container.ID != id {
		t.Errorf("container re-created (%s, was %s); want the same one started", ins.Container.ID, id)
	}
	n, err := f.cli.NetworkInspect(ctx, name, client.NetworkInspectOptions{})
	if err != nil {
		t.Fatalf("office network not made anew: %v", err)
	}
	if n.Network.Labels[engine.LabelStateDir] != f.state || n.Network.Labels[engine.LabelOffice] != spec.OfficeKey {
		t.Errorf("office network made anew with labels %v", n.Network.Labels)
	}
	if cfg := n.Network.IPAM.Config; len(cfg) != 1 || !image.DefaultNetworkPool.Contains(cfg[0].Subnet.Addr()) {
		t.Errorf("office network made anew with IPAM %+v, want a subnet of %s", cfg, image.DefaultNetworkPool)
	}
	if ep := ins.Container.NetworkSettings.Networks[name]; ep == nil || ep.NetworkID != n.Network.ID {
		t.Errorf("container on networks %v, want %s (%s)", ins.Container.NetworkSettings.Networks, name, n.Network.ID)
	}
	// A second hutch process sees a container it never met, on its network.
	if out, _ := run(t, f.runtime(t), spec, `echo again`, nil); out != "again\n" {
		t.Errorf("from another process got %q", out)
	}
}

// TestTimeout_PausedContainer: a runtime that stops answering (here
// paused) cannot hold a command past its timeout: hutch answers the
// timeout a grace after it, saying it could not confirm the kill. The
// bound is a hang bound, not a measure of speed: before, the answer
// came only when the connection's health check gave up, 45 s later.
func TestTimeout_PausedContainer(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	spec := f.office(t, testenv.Name(t))
	run(t, f.rt, spec, `true`, nil)
	name := image.ContainerName(spec.OfficeKey)
	if _, err := f.cli.ContainerPause(ctx, name, client.ContainerPauseOptions{}); err != nil {
		t.Fatal(err)
	}
	unpause := func() {
		if _, err := f.cli.ContainerUnpause(ctx, name, client.ContainerUnpauseOptions{}); err != nil && !strings.Contains(err.Error(), "not paused") {
			t.Errorf("unpause: %v", err)
		}
	}
	t.Cleanup(unpause) // the fixture's cleanup removes it only once unpaused
	start := time.Now()
	res, err := f.rt.Exec(ctx, spec, sandbox.ExecRequest{Argv: []string{`sleep 60`}, Timeout: 2 * time.Second, Stdout: io.Discard, Stderr: io.Discard})
	took := time.Since(start)
	if err != nil {
		t.Fatalf("Exec in a paused container: %v (after %v)", err, took)
	}
	if took > 15*time.Second {
		t.Errorf("a 2 s timeout in a paused container returned after %v", took)
	}
	if want := "Command timed out after 2 seconds; the sandbox stopped answering, so hutch could not confirm the command was killed"; !res.TimedOut || !res.KillUnconfirmed || res.Message() != want {
		t.Errorf("result %+v, message %q; want %q", res, res.Message(), want)
	}
	// Unpaused, the runtime serves again.
	unpause()
	if out, _ := run(t, f.rt, spec, `echo alive`, nil); out != "alive\n" {
		t.Errorf("after unpausing got %q", out)
	}
}

// TestWarm_CheckedRunSharedAcrossProcesses: a run of the container that
// one hutch process checked (the first command's start does) is warm
// for the next process too (a CLI call): its first command asks the
// engine only what the warm path asks
// (the image and the container), not the lock path's second inspect and
// snapshot lookup. A restart is a new run, checked again.
func TestWarm_CheckedRunSharedAcrossProcesses(t *testing.T) {
	f := newFixture(t)
	spec := f.office(t, "shared-check")
	run(t, f.rt, spec, "true", nil) // the start checked the run

	var mu sync.Mutex
	var paths []string
	cli, err := client.New(client.FromEnv, client.WithHTTPResponseHook(func(resp *http.Response) {
		mu.Lock()
		defer mu.Unlock()
		paths = append(paths, resp.Request.Method+" "+resp.Request.URL.Path)
	}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	eng := *f.eng
	eng.Client = cli
	second := func() *image.Runtime {
		rt, err := image.New(image.Config{Engine: &eng, Image: f.img, StateDir: f.state, Workspace: f.ws, RunDir: f.run, Agent: f.agent})
		if err != nil {
			t.Fatal(err)
		}
		return rt
	}
	calls := func() []string {
		mu.Lock()
		defer mu.Unlock()
		var out []string
		for _, p := range paths {
			if !strings.HasSuffix(p, "/_ping") {
				out = append(out, p)
			}
		}
		paths = nil
		return out
	}

	if out, _ := run(t, second(), spec, "echo warm", nil); out != "warm\n" {
		t.Fatalf("second process got %q", out)
	}
	// The two are asked at once, in no set order.
	if got := calls(); len(got) != 2 || !slices.ContainsFunc(got, func(p string) bool { return strings.Contains(p, "/images/") }) ||
		!slices.ContainsFunc(got, func(p string) bool { return strings.Contains(p, "/containers/") }) {
		t.Errorf("a second process's first command on a checked run asked the engine %q; want the image and the container only", got)
	}

	// The record names a run that has ended: the next process starts and
	// checks a new one, and the process after it finds that one checked.
	if err := f.rt.Stop(context.Background(), spec.OfficeKey); err != nil {
		t.Fatal(err)
	}
	calls()
	if out, _ := run(t, second(), spec, "echo restarted", nil); out != "restarted\n" {
		t.Fatalf("after a stop, a new process got %q", out)
	}
	if got := calls(); len(got) <= 2 || !slices.ContainsFunc(got, func(p string) bool { return strings.HasSuffix(p, "/start") }) {
		t.Errorf("after a stop, a new process asked only %q: it took the ended run for a checked one", got)
	}
	run(t, second(), spec, "true", nil)
	if got := calls(); len(got) != 2 {
		t.Errorf("the process after the restart asked %q; want the warm path's two", got)
	}
}
