package microvm_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/internal/agent"
	"github.com/hutchsandbox/hutch/internal/agentbin"
	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/office"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/sandbox/microvm"
	"github.com/hutchsandbox/hutch/internal/sandbox/sandboxtest"
	"github.com/hutchsandbox/hutch/internal/testenv"
)

// fixture is one hutch installation with the microVM mode: its own state
// dir, run dir and workspace, and the guest assets every test shares.
//
// The tests that boot VMs run in parallel (as many at once as go test's
// -parallel, the number of CPUs by default): a VM under software
// emulation keeps one host CPU busy while it boots, and one at a time
// left the other CPU idle for most of the package's five minutes, which
// ran on alone at the end of CI's go test. Each test has its own
// fixture, so they share nothing but the assets, which no test changes
// (TestTamperedAsset tampers with a copy).
type fixture struct {
	state, run, ws, assets string
	agent                  agentbin.Binary
	rt                     *microvm.Runtime
	// changes are what rt told its Changed hook.
	changesMu sync.Mutex
	changes   []sandbox.Change
}

// changed returns the changes rt told so far.
func (f *fixture) changed() []sandbox.Change {
	f.changesMu.Lock()
	defer f.changesMu.Unlock()
	return slices.Clone(f.changes)
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	assetDir := testenv.MicroVMAssets(t)
	f := &fixture{assets: assetDir}
	var err error
	if f.agent, err = agentbin.Locate(testenv.HutchBinary(t)); err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	f.state, f.ws = filepath.Join(root, "state"), filepath.Join(root, "ws")
	// Unix socket paths are short: the run dir lives directly in /tmp.
	run, err := os.MkdirTemp("", "hvm")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = agent.RemoveSocketDir(run) }) // sealed socket dirs included
	f.run = run
	f.rt = f.runtime(t, func(c *microvm.Config) {
		c.Changed = func(_ context.Context, ch sandbox.Change) {
			f.changesMu.Lock()
			defer f.changesMu.Unlock()
			f.changes = append(f.changes, ch)
		}
	})
	return f
}

// runtime makes a Runtime on the fixture's dirs and closes it at the end;
// each of with changes its config first.
func (f *fixture) runtime(t *testing.T, with ...func(*microvm.Config)) *microvm.Runtime {
	t.Helper()
	cfg := microvm.Config{
		StateDir:     f.state,
		Workspace:    f.ws,
		RunDir:       f.run,
		AssetDir:     f.assets,
		Agent:        f.agent,
		SyncInterval: 500 * time.Millisecond,
		Log:          slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	for _, w := range with {
		w(&cfg)
	}
	rt, err := microvm.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Close() })
	return rt
}

// office makes an isolated office for a conversation and its spec.
func (f *fixture) office(t *testing.T, conv string) sandbox.Spec {
	t.Helper()
	key := string(office.Address{Platform: "web", ConversationID: conv}.Key())
	dir := filepath.Join(f.ws, key)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return sandbox.Spec{
		OfficeKey: key, Platform: "web", ConversationID: conv,
		OfficeDir: dir, OfficeRuntimePath: "/workspace/" + key,
		Mounts: []sandbox.Mount{{HostPath: dir, RuntimePath: "/workspace/" + key}},
		Limits: sandbox.Limits{CPUs: 1, MemoryBytes: 256 << 20, Pids: 256},
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func run(t *testing.T, rt sandbox.Runtime, spec sandbox.Spec, cmd string) (string, sandbox.ExecResult) {
	t.Helper()
	var out, errb bytes.Buffer
	res, err := rt.Exec(t.Context(), spec, sandbox.ExecRequest{Argv: []string{cmd}, Stdout: &out, Stderr: &errb, Timeout: time.Minute})
	if err != nil {
		t.Fatalf("Exec(%q): %v", cmd, err)
	}
	if errb.Len() > 0 {
		t.Logf("stderr of %q: %s", cmd, errb.String())
	}
	return out.String(), res
}

// TestConformance runs the exec contract in one VM: its subtests run in
// parallel and each VM takes a host core under software emulation.
func TestConformance(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	spec := f.office(t, "conformance")
	var once sync.Once
	sandboxtest.Run(t, sandboxtest.Harness{New: func(t *testing.T) (sandbox.Runtime, sandbox.Spec) {
		once.Do(func() {
			if _, res := run(t, f.rt, spec, "true"); res.ExitCode != 0 {
				t.Fatalf("first command: %+v", res)
			}
		})
		return f.rt, spec
	}})
}

// TestFiles runs the files suite against one VM (its checks share the
// conversation, as TestConformance's do); the mounts check, last, re-creates
// it with mounts of its own.
func TestFiles(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	spec := f.office(t, "files")
	sandboxtest.RunFiles(t, sandboxtest.Harness{New: func(t *testing.T) (sandbox.Runtime, sandbox.Spec) {
		return f.rt, spec
	}})
}

// TestBootAndOffice boots a VM and checks what it sees: its office,
// shared with the host both ways, and nothing else of the workspace.
func TestBootAndOffice(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	spec := f.office(t, "office")
	other := f.office(t, "other")
	if err := os.WriteFile(filepath.Join(other.OfficeDir, "secret.txt"), []byte("not yours"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(spec.OfficeDir, "hello.txt"), []byte("from host"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, res := run(t, f.rt, spec, "cat hello.txt && echo from guest > guest.txt && pwd && ls /workspace")
	if res.ExitCode != 0 {
		t.Fatalf("exit %d: %s", res.ExitCode, out)
	}
	want := "from host" + spec.OfficeRuntimePath + "\n" + spec.OfficeKey + "\n"
	if out != want {
		t.Errorf("output = %q, want %q", out, want)
	}
	data, err := os.ReadFile(filepath.Join(spec.OfficeDir, "guest.txt"))
	if err != nil || string(data) != "from guest\n" {
		t.Errorf("guest write on the host: %q, %v", data, err)
	}
	if out, res := run(t, f.rt, spec, "cat /workspace/"+other.OfficeKey+"/secret.txt"); res.ExitCode == 0 {
		t.Errorf("another office's file was readable: %q", out)
	}
	st, err := f.rt.Status(context.Background(), spec.OfficeKey)
	if err != nil || st.State != sandbox.StateRunning {
		t.Fatalf("status = %+v, %v", st, err)
	}
}

// sharedSupport gives spec the shared-support projection: MEMORY.md
// (read-only when private), skills and events.
func (f *fixture) sharedSupport(t *testing.T, spec sandbox.Spec, private bool) sandbox.Spec {
	t.Helper()
	mem := filepath.Join(f.ws, "MEMORY.md")
	if _, err := os.Stat(mem); err != nil {
		if err := os.WriteFile(mem, []byte("# memory\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{"skills", "events"} {
		if err := os.MkdirAll(filepath.Join(f.ws, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	spec.Mounts = append(spec.Mounts,
		sandbox.Mount{HostPath: mem, RuntimePath: "/workspace/MEMORY.md", ReadOnly: private},
		sandbox.Mount{HostPath: filepath.Join(f.ws, "skills"), RuntimePath: "/workspace/skills", ReadOnly: private},
		sandbox.Mount{HostPath: filepath.Join(f.ws, "events"), RuntimePath: "/workspace/events"},
	)
	return spec
}

// TestIsolation: an isolated office sees nothing else of the host; a
// private shared-support office cannot write MEMORY.md, even as root
// trying to remount it; a public one syncs its edits back to the host.
func TestIsolation(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	if err := os.MkdirAll(f.ws, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.ws, "top.txt"), []byte("workspace root"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Run("isolated", func(t *testing.T) {
		spec := f.office(t, "isolated")
		out, res := run(t, f.rt, spec, "ls -a /workspace; cat /workspace/top.txt; echo x > /workspace/planted && echo planted")
		if strings.Contains(out, "top.txt") || strings.Contains(out, "workspace root") {
			t.Errorf("the workspace root is visible from an isolated office:\n%s", out)
		}
		if _, err := os.Stat(filepath.Join(f.ws, "planted")); err == nil {
			t.Errorf("a guest write outside its office reached the host workspace (exit %d)", res.ExitCode)
		}
		// What the host has outside the workspace is not in the guest either.
		host := filepath.Join(f.state, "host-only.txt")
		if err := os.WriteFile(host, []byte("host"), 0o600); err != nil {
			t.Fatal(err)
		}
		if out, res := run(t, f.rt, spec, "cat "+host); res.ExitCode == 0 {
			t.Errorf("a host file outside the projection was readable: %q", out)
		}
	})
	t.Run("private_memory_read_only", func(t *testing.T) {
		spec := f.sharedSupport(t, f.office(t, "private"), true)
		out, res := run(t, f.rt, spec, "cat /workspace/MEMORY.md; echo changed >> /workspace/MEMORY.md || echo refused; mount -o remount,rw /workspace/MEMORY.md || echo remount refused; echo changed >> /workspace/MEMORY.md || echo still refused; touch /workspace/skills/x || echo skills refused")
		for _, want := range []string{"# memory", "refused", "remount refused", "still refused", "skills refused"} {
			if !strings.Contains(out, want) {
				t.Errorf("output lacks %q (exit %d):\n%s", want, res.ExitCode, out)
			}
		}
		if data, _ := os.ReadFile(filepath.Join(f.ws, "MEMORY.md")); string(data) != "# memory\n" {
			t.Errorf("host MEMORY.md = %q", data)
		}
	})
	t.Run("public_memory_synced", func(t *testing.T) {
		spec := f.sharedSupport(t, f.office(t, "public"), false)
		if _, res := run(t, f.rt, spec, "echo 'guest note' >> /workspace/MEMORY.md && touch /workspace/events/e1"); res.ExitCode != 0 {
			t.Fatalf("guest write: %+v", res)
		}
		if _, err := os.Stat(filepath.Join(f.ws, "events", "e1")); err != nil {
			t.Errorf("events/ is not shared: %v", err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			data, _ := os.ReadFile(filepath.Join(f.ws, "MEMORY.md"))
			if strings.Contains(string(data), "guest note") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the guest's MEMORY.md edit did not reach the host within 10 s: %q", data)
			}
			time.Sleep(100 * time.Millisecond)
		}
		// And the other way: a host edit reaches the guest.
		if err := os.WriteFile(filepath.Join(f.ws, "MEMORY.md"), []byte("# memory\nguest note\nhost note\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		deadline = time.Now().Add(10 * time.Second)
		for {
			out, _ := run(t, f.rt, spec, "cat /workspace/MEMORY.md")
			if strings.Contains(out, "host note") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the host's MEMORY.md edit did not reach the guest within 10 s: %q", out)
			}
			time.Sleep(200 * time.Millisecond)
		}
	})
}

// TestVault: a vault file is 0600 inside, cannot be changed from inside
// and never reaches back; rotating it on the host re-creates the VM on
// the next command, which then sees the new content.
func TestVault(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	spec := f.office(t, "vault")
	vdir := filepath.Join(f.state, "vaults", spec.OfficeKey)
	if err := os.MkdirAll(vdir, 0o700); err != nil {
		t.Fatal(err)
	}
	netrc := filepath.Join(vdir, ".netrc")
	if err := os.WriteFile(netrc, []byte("machine a login b password first"), 0o600); err != nil {
		t.Fatal(err)
	}
	spec.VaultFiles = []sandbox.Mount{{HostPath: netrc, RuntimePath: "/root/.netrc", ReadOnly: true}}
	out, _ := run(t, f.rt, spec, "stat -c %a /root/.netrc; cat /root/.netrc; echo; echo hacked > /root/.netrc || echo refused")
	if !strings.HasPrefix(out, "600\nmachine a login b password first\n") || !strings.Contains(out, "refused") {
		t.Errorf("vault file inside:\n%s", out)
	}
	if data, _ := os.ReadFile(netrc); string(data) != "machine a login b password first" {
		t.Errorf("host vault file = %q", data)
	}
	before, err := f.rt.Status(context.Background(), spec.OfficeKey)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(netrc, []byte("machine a login b password second"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, _ = run(t, f.rt, spec, "cat /root/.netrc")
	if out != "machine a login b password second" {
		t.Errorf("after rotation the guest sees %q", out)
	}
	after, err := f.rt.Status(context.Background(), spec.OfficeKey)
	if err != nil {
		t.Fatal(err)
	}
	if after.ID == before.ID || after.Fingerprint == before.Fingerprint {
		t.Errorf("rotation did not re-create the VM: before %s/%s, after %s/%s", before.ID, before.Fingerprint, after.ID, after.Fingerprint)
	}
}

// TestLifecycle: a VM killed behind hutch's back is replaced by the next
// command, its root disk (and what was written to it) kept; stop and
// remove; a tampered asset refused.
func TestLifecycle(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	spec := f.office(t, "lifecycle")
	ctx := context.Background()
	if _, res := run(t, f.rt, spec, "echo kept > /root/on-disk && sync"); res.ExitCode != 0 {
		t.Fatalf("write: %+v", res)
	}
	st, err := f.rt.Status(ctx, spec.OfficeKey)
	if err != nil || st.State != sandbox.StateRunning {
		t.Fatalf("status: %+v, %v", st, err)
	}
	pid, _ := strconv.Atoi(st.ID)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for alive(pid) {
		time.Sleep(10 * time.Millisecond)
	}
	out, res := run(t, f.rt, spec, "cat /root/on-disk")
	if out != "kept\n" || res.ExitCode != 0 {
		t.Errorf("after QEMU was killed: %q, %+v", out, res)
	}
	st2, _ := f.rt.Status(ctx, spec.OfficeKey)
	if st2.ID == st.ID {
		t.Errorf("the VM was not replaced: pid %s", st2.ID)
	}
	// One event a boot: made, then re-made saying why.
	if got, want := f.changed(), []sandbox.Change{
		{Event: "created", OfficeKey: spec.OfficeKey},
		{Event: "recreated", OfficeKey: spec.OfficeKey, Because: "the microVM exited on its own"},
	}; !slices.Equal(got, want) {
		t.Errorf("changes told: %+v, want %+v", got, want)
	}
	if err := f.rt.Stop(ctx, spec.OfficeKey); err != nil {
		t.Fatal(err)
	}
	if alive(pid2(st2)) {
		t.Errorf("QEMU %s still runs after Stop", st2.ID)
	}
	if st, _ := f.rt.Status(ctx, spec.OfficeKey); st.State != sandbox.StateStopped {
		t.Errorf("after Stop: %s", st.State)
	}
	// After a restart (another Runtime on the same dirs, with no session
	// of the office) the stopped VM is still whose it was, with the limits
	// it boots with: what its last boot recorded in the state dir.
	list, err := f.runtime(t).List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := sandbox.Status{OfficeKey: spec.OfficeKey, Platform: "web", ConversationID: "lifecycle", Name: microvm.Name(spec.OfficeKey),
		State: sandbox.StateStopped, Image: "gondolin:default", Limits: spec.Limits}
	if len(list) != 1 || list[0] != want {
		t.Errorf("List after a restart = %+v, want [%+v]", list, want)
	}
	// A stopped VM boots again with its disk.
	if out, _ := run(t, f.rt, spec, "cat /root/on-disk"); out != "kept\n" {
		t.Errorf("after a stop: %q", out)
	}
	// Idle stop: a VM that ran nothing for the idle time powers off; one
	// that ran something since does not.
	if stopped, err := f.rt.StopIdle(ctx, time.Hour); err != nil || len(stopped) != 0 {
		t.Errorf("StopIdle(1h) right after a command stopped %v, %v", stopped, err)
	}
	st3, _ := f.rt.Status(ctx, spec.OfficeKey)
	if stopped, err := f.rt.StopIdle(ctx, 0); err != nil || len(stopped) != 1 || stopped[0] != spec.OfficeKey {
		t.Errorf("StopIdle(0) stopped %v, %v", stopped, err)
	}
	if alive(pid2(st3)) {
		t.Errorf("QEMU %s still runs after an idle stop", st3.ID)
	}
	if err := f.rt.Remove(ctx, spec.OfficeKey); err != nil {
		t.Fatal(err)
	}
	if st, _ := f.rt.Status(ctx, spec.OfficeKey); st.State != sandbox.StateMissing {
		t.Errorf("after Remove: %s", st.State)
	}
	if out, _ := run(t, f.rt, spec, "cat /root/on-disk 2>&1 || echo gone"); !strings.Contains(out, "gone") {
		t.Errorf("after Remove the disk survived: %q", out)
	}
}

func pid2(st sandbox.Status) int { n, _ := strconv.Atoi(st.ID); return n }

func alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// A zombie is dead for this purpose.
	i := bytes.LastIndexByte(data, ')')
	return i < 0 || len(data) < i+3 || data[i+2] != 'Z'
}

// TestTamperedAsset: an asset changed after the build is refused before
// anything boots, naming the file and the mismatch.
func TestTamperedAsset(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	dir := filepath.Join(t.TempDir(), "assets")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(f.assets)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		src, dst := filepath.Join(f.assets, e.Name()), filepath.Join(dir, e.Name())
		if e.Name() == "rootfs.ext4" {
			// Large and untouched: a link will do.
			if err := os.Link(src, dst); err != nil {
				t.Fatal(err)
			}
			continue
		}
		data, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f.assets = dir
	rt := f.runtime(t)
	spec := f.office(t, "tampered")
	if _, res := run(t, rt, spec, "true"); res.ExitCode != 0 {
		t.Fatalf("before tampering: %+v", res)
	}
	if err := rt.Stop(context.Background(), spec.OfficeKey); err != nil {
		t.Fatal(err)
	}
	kernel := filepath.Join(dir, "vmlinuz")
	fh, err := os.OpenFile(kernel, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fh.WriteAt([]byte("tampered"), 4096); err != nil {
		t.Fatal(err)
	}
	_ = fh.Close()
	_, err = rt.Exec(t.Context(), spec, sandbox.ExecRequest{Argv: []string{"true"}})
	if err == nil || !strings.Contains(err.Error(), kernel) || !strings.Contains(err.Error(), "sha256") {
		t.Fatalf("boot with a tampered kernel: %v; want a refusal naming %s and its digest", err, kernel)
	}
	t.Logf("refusal: %v", err)
	if st, _ := rt.Status(context.Background(), spec.OfficeKey); st.State == sandbox.StateRunning {
		t.Error("a VM runs after the refusal")
	}
}

// hostIP is an address of this host other than loopback, where a test
// server listening on every address can be reached.
func hostIP(t *testing.T) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil && !ipn.IP.IsLoopback() {
			return ipn.IP.String()
		}
	}
	t.Skip("no non-loopback IPv4 address on this host")
	return ""
}

// TestNetwork: without an allowlist a VM has no network card at all;
// with one, commands reach exactly the listed hosts through hutch's
// proxy, and nothing directly.
func TestNetwork(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	l, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = fmt.Fprint(w, "hello from the host")
	})}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	other, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = (&http.Server{Handler: http.NotFoundHandler()}).Serve(other) }()
	t.Cleanup(func() { _ = other.Close() })
	ip := hostIP(t)
	allowed := net.JoinHostPort(ip, strconv.Itoa(l.Addr().(*net.TCPAddr).Port))
	denied := net.JoinHostPort(ip, strconv.Itoa(other.Addr().(*net.TCPAddr).Port))

	none := f.office(t, "no-network")
	if out, _ := run(t, f.rt, none, "ls /sys/class/net"); out != "lo\n" {
		t.Errorf("a VM without an allowlist has network cards: %q", out)
	}

	spec := f.office(t, "network")
	spec.NetworkAllow = []string{allowed}
	out, res := run(t, f.rt, spec, "wget -q -O - http://"+allowed+"/hello")
	if out != "hello from the host" || res.ExitCode != 0 {
		t.Errorf("allowed host through the proxy: exit %d, %q", res.ExitCode, out)
	}
	out, _ = run(t, f.rt, spec, "wget -q -O - http://"+denied+"/ 2>&1; echo exit=$?")
	if !strings.Contains(out, "403") && !strings.Contains(out, "Forbidden") {
		t.Errorf("a host not on the allowlist: %q; want the proxy's 403", out)
	}
	out, _ = run(t, f.rt, spec, "unset http_proxy HTTP_PROXY; wget -q -O - http://"+allowed+"/hello 2>&1; echo exit=$?")
	if strings.Contains(out, "hello from the host") {
		t.Errorf("the guest reached the host directly, around the proxy: %q", out)
	}
}

// TestLimits: the pids ceiling stops a fork storm, a command that runs
// out of memory is reported as an OOM kill and the VM survives it, a
// boost replaces the VM with bigger limits and ends with it.
func TestLimits(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	spec := f.office(t, "limits")
	spec.Limits = sandbox.Limits{CPUs: 0.5, MemoryBytes: 256 << 20, Pids: 64}
	ctx := context.Background()
	// The sleeps' output goes elsewhere, or tail would wait for them; they
	// end with the command (its leader's exit ends its background).
	out, res := run(t, f.rt, spec, "nproc; i=0; while [ $i -lt 100 ]; do sleep 30 >/dev/null 2>&1 & i=$((i+1)); done 2>&1 | tail -1; echo done")
	if !strings.HasPrefix(out, "1\n") || !strings.Contains(out, "done") {
		t.Errorf("0.5 CPU: %q (exit %d); want one vCPU", out, res.ExitCode)
	}
	if !strings.Contains(strings.ToLower(out), "fork") && !strings.Contains(strings.ToLower(out), "resource") {
		t.Errorf("100 background processes under a ceiling of 64 all started: %q", out)
	}
	// 256 MiB VM: commands get 160 MiB; a 200 MiB buffer is killed.
	_, res = run(t, f.rt, spec, "dd if=/dev/zero of=/dev/null bs=200M count=1")
	if !res.OOMKilled || res.Message() != "Command was killed: the sandbox ran out of memory" {
		t.Errorf("a command over the memory limit: %+v; want OOMKilled", res)
	}
	if out, res := run(t, f.rt, spec, "echo alive"); out != "alive\n" {
		t.Errorf("after the OOM kill: %q, %+v", out, res)
	}
	// The use of the commands' cgroup, read from the agent: their limits,
	// and CPU time that moves with a command.
	a, err := f.rt.Usage(ctx, spec.OfficeKey)
	if err != nil {
		t.Fatal(err)
	}
	run(t, f.rt, spec, "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done")
	b, err := f.rt.Usage(ctx, spec.OfficeKey)
	if err != nil {
		t.Fatal(err)
	}
	if b.Instance == "" || b.Instance != a.Instance || b.CPU <= a.CPU || b.Clock <= a.Clock || b.Memory == 0 || b.MemoryLimit != 160<<20 || b.PidsLimit != 64 {
		t.Errorf("usage around a command: %+v, then %+v; want CPU time moved, 160 MiB and 64 processes as limits", a, b)
	}
	before, _ := f.rt.Status(ctx, spec.OfficeKey)
	st, err := f.rt.Boost(ctx, spec.OfficeKey, sandbox.Limits{CPUs: 2, MemoryBytes: 512 << 20})
	if err != nil {
		t.Fatal(err)
	}
	wantCPUs := float64(min(2, goruntime.NumCPU()))
	if !st.Boosted || st.Limits.CPUs != wantCPUs || st.Limits.MemoryBytes != 512<<20 || st.ID == before.ID {
		t.Errorf("after Boost: %+v (before: pid %s)", st, before.ID)
	}
	if out, _ := run(t, f.rt, spec, "nproc"); out != strconv.Itoa(int(wantCPUs))+"\n" {
		t.Errorf("boosted nproc = %q", out)
	}
	if err := f.rt.Stop(ctx, spec.OfficeKey); err != nil {
		t.Fatal(err)
	}
	if _, err := f.rt.Usage(ctx, spec.OfficeKey); !errdefs.IsNotFound(err) {
		t.Errorf("usage of a stopped VM: %v, want NotFound", err)
	}
	run(t, f.rt, spec, "true")
	if st, _ := f.rt.Status(ctx, spec.OfficeKey); st.Boosted || st.Limits.CPUs != 1 {
		t.Errorf("the boost outlived a stop: %+v", st)
	}
}
