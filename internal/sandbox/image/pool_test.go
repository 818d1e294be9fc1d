package image_test

import (
	"bytes"
	"context"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/hutchsandbox/hutch/internal/engine"
	"github.com/hutchsandbox/hutch/internal/mountinfo"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/sandbox/image"
	"github.com/hutchsandbox/hutch/internal/sandbox/sandboxtest"
	"github.com/hutchsandbox/hutch/internal/testenv"
)

// members lists the warm pool's containers of the fixture's installation
// that are still in the pool (not handed out), by id.
func (f *fixture) members(t *testing.T) map[string]string {
	t.Helper()
	res, err := f.cli.ContainerList(context.Background(), client.ContainerListOptions{All: true, Filters: make(client.Filters).
		Add("label", image.LabelPoolMember).Add("label", engine.LabelStateDir+"="+f.state)})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, c := range res.Items {
		if name := strings.TrimPrefix(c.Names[0], "/"); strings.HasPrefix(name, "hutch-pool-") {
			out[c.ID] = string(c.State)
		}
	}
	return out
}

// onlyMember returns the id of the one ready member.
func (f *fixture) onlyMember(t *testing.T) string {
	t.Helper()
	m := f.members(t)
	if len(m) != 1 {
		t.Fatalf("the pool holds %v; want one member", m)
	}
	for id, state := range m {
		if state != "running" && state != "paused" {
			t.Fatalf("the ready member is %s; want it running or paused", state)
		}
		return id
	}
	return ""
}

// leftovers lists what a member named name left on the host and the
// engine: its directory, mounts beneath the run dir's pool, its network.
func (f *fixture) leftovers(t *testing.T, name string) []string {
	t.Helper()
	var out []string
	if _, err := os.Lstat(filepath.Join(f.run, "pool", name)); err == nil {
		out = append(out, "directory")
	}
	mounts, err := mountinfo.Self()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range mounts {
		if strings.HasPrefix(m.Target, filepath.Join(f.run, "pool", name)+"/") {
			out = append(out, "mount "+m.Target)
		}
	}
	if _, err := f.cli.NetworkInspect(context.Background(), "hutch-net-"+name, client.NetworkInspectOptions{}); err == nil {
		out = append(out, "network")
	}
	return out
}

// TestPool_HandOut: a new conversation's first command is served by the
// ready member, renamed to the office's container, which then answers as
// any office's runtime does (status, listing, warm commands). Inside,
// /workspace holds the office and nothing else, and is read-only beside
// it. The pool is refilled with a fresh member.
func TestPool_HandOut(t *testing.T) {
	f := newPooledFixture(t)
	ctx := context.Background()
	spec := f.office(t, testenv.Name(t))
	spec.Limits = sandbox.Limits{Pids: 512} // the office's own, not the pool's default
	id := f.onlyMember(t)

	out, _ := run(t, f.rt, spec, "pwd; ls /workspace; echo from-inside > note; touch /workspace/planted 2>&1; echo $?", nil)
	want := spec.OfficeRuntimePath + "\n" + spec.OfficeKey + "\n"
	if !strings.HasPrefix(out, want) || !strings.Contains(out, "Read-only file system") || !strings.HasSuffix(out, "1\n") {
		t.Errorf("inside the handed-out runtime: %q; want cwd and listing %q, then a read-only refusal beside the office", out, want)
	}
	if data, err := os.ReadFile(filepath.Join(spec.OfficeDir, "note")); err != nil || string(data) != "from-inside\n" {
		t.Errorf("the office on the host holds %q (%v)", data, err)
	}
	ins := f.inspect(t, spec)
	if ins.Container.ID != id {
		t.Fatalf("the office's container is %s; want the pool's member %s (the command started one cold)", ins.Container.ID, id)
	}
	if len(f.members(t)) != 0 {
		t.Errorf("the pool still lists the handed-out member: %v", f.members(t))
	}
	// The office's runtime was made, from the pool: the event log says so.
	if got, want := f.changed(), (sandbox.Change{Event: "created", OfficeKey: spec.OfficeKey, From: sandbox.FromWarmPool}); !slices.Contains(got, want) {
		t.Errorf("changes told: %+v; want %+v", got, want)
	}
	// Made as an office's container is, with the office's limits.
	hc := ins.Container.HostConfig
	if len(hc.CapDrop) != 1 || hc.CapDrop[0] != "ALL" || !slices.Contains(hc.SecurityOpt, "no-new-privileges") {
		t.Errorf("not hardened: CapDrop %v SecurityOpt %v", hc.CapDrop, hc.SecurityOpt)
	}
	if hc.PidsLimit == nil || *hc.PidsLimit != 512 || hc.Memory != 1<<30 || hc.NanoCPUs != 5e8 {
		t.Errorf("limits after the hand-out: pids %v memory %d nanocpus %d; want the office's 512 pids over the defaults", hc.PidsLimit, hc.Memory, hc.NanoCPUs)
	}
	if out, _ := run(t, f.rt, spec, `grep CapBnd /proc/self/status`, nil); !strings.Contains(out, "00000000000004fb") {
		t.Errorf("bounding set inside: %q", out)
	}
	st, err := f.rt.Status(ctx, spec.OfficeKey)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != sandbox.StateRunning || st.Platform != "web" || st.ConversationID != spec.ConversationID || st.Fingerprint == "" || st.ID != id {
		t.Errorf("status of the handed-out runtime: %+v", st)
	}
	list, err := f.rt.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].OfficeKey != spec.OfficeKey {
		t.Errorf("List: %+v; want the office's runtime alone (no member)", list)
	}
	// Warm, from this process and from another: the same container.
	if out, _ := run(t, f.runtime(t), spec, "cat note", nil); out != "from-inside\n" {
		t.Errorf("a second process's command: %q", out)
	}
	if f.inspect(t, spec).Container.ID != id {
		t.Error("a warm command re-created the handed-out runtime")
	}
	if err := f.rt.FillPool(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if next := f.onlyMember(t); next == id {
		t.Error("the refill put the handed-out container back")
	}
}

// TestPool_StoppedRuntimeIsRecreated: a handed-out runtime that stopped
// lost its late mounts with its mount namespace; its next command
// re-creates it as the office's own container, keeping its writable
// layer and saying why, and what the member left goes.
func TestPool_StoppedRuntimeIsRecreated(t *testing.T) {
	f := newPooledFixture(t)
	ctx := context.Background()
	spec := f.office(t, testenv.Name(t))
	id := f.onlyMember(t)
	run(t, f.rt, spec, "echo layer > /root/kept", nil)
	member := f.inspect(t, spec).Container.Config.Labels[image.LabelPoolMember]
	if err := f.rt.Stop(ctx, spec.OfficeKey); err != nil {
		t.Fatal(err)
	}
	out, _ := run(t, f.rt, spec, "cat /root/kept; ls /workspace", nil)
	if out != "layer\n"+spec.OfficeKey+"\n" {
		t.Errorf("after the restart: %q; want the layer's file and the office", out)
	}
	ins := f.inspect(t, spec)
	if ins.Container.ID == id {
		t.Fatal("the stopped member was started again: it has none of its mounts")
	}
	if why := ins.Container.Config.Labels[sandbox.LabelRecreatedBecause]; !strings.Contains(why, "warm pool") {
		t.Errorf("recreated because %q; want the warm pool named", why)
	}
	if ins.Container.Config.Labels[image.LabelPoolMember] != "" {
		t.Error("the office's own container still carries the member's label")
	}
	if left := f.leftovers(t, member); len(left) > 0 {
		t.Errorf("the member left %v", left)
	}
	if _, err := os.Stat(filepath.Join(f.state, "pool", id)); err == nil {
		t.Error("the member's binding record is left")
	}
}

// TestAttack_PoolLeaksNothingBetweenConversations: two conversations
// served from the pool one after the other each see their own office
// and nothing of the other's; each got a member of its own, and removing
// one's runtime takes its mounts off the host and keeps its office.
func TestAttack_PoolLeaksNothingBetweenConversations(t *testing.T) {
	f := newPooledFixture(t)
	ctx := context.Background()
	a := f.office(t, "pool-a")
	idA := f.onlyMember(t)
	run(t, f.rt, a, "echo a-secret > secret", nil)
	b := f.office(t, "pool-b")
	idB := f.onlyMember(t)
	if idA == idB {
		t.Fatal("the pool offered the same member twice")
	}
	out, _ := run(t, f.rt, b, "ls -a /workspace; cat /workspace/*/secret 2>&1; grep -c ' /workspace/' /proc/self/mountinfo", nil)
	if strings.Contains(out, "a-secret") || strings.Contains(out, a.OfficeKey) || !strings.HasSuffix(out, "\n1\n") {
		t.Errorf("the second conversation sees: %q; want its own office only, one mount", out)
	}
	if f.inspect(t, b).Container.ID != idB {
		t.Error("the second conversation was not served from the pool")
	}
	memberA := f.inspect(t, a).Container.Config.Labels[image.LabelPoolMember]
	if err := f.rt.Remove(ctx, a.OfficeKey); err != nil {
		t.Fatal(err)
	}
	if left := f.leftovers(t, memberA); len(left) > 0 {
		t.Errorf("removing the runtime left %v", left)
	}
	if data, err := os.ReadFile(filepath.Join(a.OfficeDir, "secret")); err != nil || string(data) != "a-secret\n" {
		t.Errorf("the office after its runtime's removal: %q (%v)", data, err)
	}
	if _, err := f.cli.ContainerInspect(ctx, idA, client.ContainerInspectOptions{}); !engine.IsNotFound(err) {
		t.Errorf("the removed runtime's container is still there: %v", err)
	}
}

// TestPool_OneMemberTwoProcesses: two hutch processes serve two new
// conversations at once with one member ready: one takes it, the other
// starts cold, both commands run, and no container serves both.
func TestPool_OneMemberTwoProcesses(t *testing.T) {
	f := newPooledFixture(t)
	specs := []sandbox.Spec{f.office(t, "race-a"), f.office(t, "race-b")}
	id := f.onlyMember(t)
	rts := []*image.Runtime{f.rt, f.runtime(t)}
	var wg sync.WaitGroup
	outs := make([]string, 2)
	for i := range specs {
		wg.Go(func() {
			var out bytes.Buffer
			res, err := rts[i].Exec(context.Background(), specs[i], sandbox.ExecRequest{Argv: []string{"ls /workspace"}, Stdout: &out, Stderr: io.Discard, Timeout: 2 * time.Minute})
			if err != nil || res.ExitCode != 0 {
				t.Errorf("first command of %s: exit %d, %v", specs[i].OfficeKey, res.ExitCode, err)
			}
			outs[i] = out.String()
		})
	}
	wg.Wait()
	pooled := 0
	for i, s := range specs {
		if outs[i] != s.OfficeKey+"\n" {
			t.Errorf("%s sees %q", s.OfficeKey, outs[i])
		}
		if f.inspect(t, s).Container.ID == id {
			pooled++
		}
	}
	if pooled != 1 {
		t.Errorf("%d conversations got the one member; want exactly one", pooled)
	}
}

// TestPool_StaleMembersReplaced: members made for something else (here
// another subnet pool; equally another image id, agent or hardening) are
// removed by the next fill and replaced, never handed out.
func TestPool_StaleMembersReplaced(t *testing.T) {
	f := newPooledFixture(t)
	f.noHandOut = true
	ctx := context.Background()
	if err := f.rt.FillPool(ctx, 1); err != nil {
		t.Fatal(err)
	}
	old := f.onlyMember(t)
	other := f.runtimeWith(t, func(c *image.Config) { c.NetworkPool = netip.MustParsePrefix("10.214.0.0/16") })
	if err := other.FillPool(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if now := f.onlyMember(t); now == old {
		t.Error("the member made for another pool key was kept")
	}
	if err := f.rt.FillPool(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if m := f.members(t); len(m) != 0 {
		t.Errorf("a fill to size 0 left %v", m)
	}
}

// TestPooled_Conformance and the tests below run the isolation suite
// against runtimes handed out from the pool.
func TestPooled_Conformance(t *testing.T) {
	f := newPooledFixture(t)
	sandboxtest.Run(t, sandboxtest.Harness{New: func(t *testing.T) (sandbox.Runtime, sandbox.Spec) {
		return f.rt, f.office(t, testenv.Name(t))
	}})
}

func TestPooled_Files(t *testing.T) {
	f := newPooledFixture(t)
	spec := f.office(t, testenv.Name(t))
	sandboxtest.RunFiles(t, sandboxtest.Harness{New: func(t *testing.T) (sandbox.Runtime, sandbox.Spec) {
		return f.rt, spec
	}})
}

func TestPooled_AttackChannelRedirect(t *testing.T) {
	attackChannelRedirect(t, newPooledFixture(t))
}

// TestPooled_AttackMountSourceLinked: the attacker's full door does not
// fit a member, and the victim's linked office is refused before a
// member is claimed: the pool keeps it.
func TestPooled_AttackMountSourceLinked(t *testing.T) {
	f := newPooledFixture(t)
	f.noHandOut = true
	attackMountSourceLinked(t, f)
	if len(f.members(t)) != 1 {
		t.Errorf("the pool holds %v after the refusal; want its member kept", f.members(t))
	}
}

func TestPooled_AttackCrossOfficeNetwork(t *testing.T) {
	attackCrossOfficeNetwork(t, newPooledFixture(t))
}

func TestPooled_AttackFillTheDisk(t *testing.T) {
	attackFillTheDisk(t, newPooledFixture(t))
}

// TestPooled_AttackMountSourceSwappedInTheRace: the office is swapped for
// a link to hutch's state dir after hutch opened it and before the
// hand-out attaches it. A hand-out mounts what it opened, never a path:
// the command runs in the office hutch checked, and the state dir is
// nowhere in the runtime.
func TestPooled_AttackMountSourceSwappedInTheRace(t *testing.T) {
	f := newPooledFixture(t)
	victim := f.office(t, "victim-race")
	id := f.onlyMember(t)
	if err := os.WriteFile(filepath.Join(f.state, "vault-secret"), []byte("s3cret"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(victim.OfficeDir, "mine"), []byte("checked\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	defer f.swapForStateDirLink(t, victim)()
	var out bytes.Buffer
	_, err := f.rt.Exec(context.Background(), victim, sandbox.ExecRequest{Argv: []string{"cat vault-secret mine 2>&1; grep -r s3cret /workspace 2>/dev/null"}, Stdout: &out, Stderr: io.Discard, Timeout: time.Minute})
	if err != nil {
		t.Fatalf("the command after the swap: %v", err)
	}
	if strings.Contains(out.String(), "s3cret") {
		t.Errorf("hutch's state dir was mounted into the runtime: %q", out.String())
	}
	if !strings.Contains(out.String(), "checked\n") {
		t.Errorf("the command saw %q; want the office hutch opened", out.String())
	}
	if f.inspect(t, victim).Container.ID != id {
		t.Error("the command was not served from the pool")
	}
}

// TestPool_SweepAfterOutsideRemoval: containers removed behind hutch's
// back (docker rm -f, a pruned engine), a ready member and a handed-out
// one, leave their mounts, directories, networks and binding records;
// the sweep a daemon runs at start removes them all, and the handed-out
// office's files stay.
func TestPool_SweepAfterOutsideRemoval(t *testing.T) {
	f := newPooledFixture(t)
	ctx := context.Background()
	spec := f.office(t, testenv.Name(t))
	run(t, f.rt, spec, "echo kept > note", nil)
	bound := f.inspect(t, spec).Container
	if err := f.rt.FillPool(ctx, 1); err != nil {
		t.Fatal(err)
	}
	ready := f.onlyMember(t)
	names := []string{bound.Config.Labels[image.LabelPoolMember]}
	for _, id := range []string{bound.ID, ready} {
		res, err := f.cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if id == ready {
			names = append(names, res.Container.Config.Labels[image.LabelPoolMember])
		}
		if _, err := f.cli.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true}); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range names {
		if len(f.leftovers(t, name)) == 0 {
			t.Fatalf("member %s left nothing behind: the sweep would prove nothing", name)
		}
	}
	if err := f.runtime(t).SweepPool(ctx); err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		if left := f.leftovers(t, name); len(left) > 0 {
			t.Errorf("after the sweep member %s still has %v", name, left)
		}
	}
	if _, err := os.Stat(filepath.Join(f.state, "pool", bound.ID)); err == nil {
		t.Error("the removed runtime's binding record is left")
	}
	if data, err := os.ReadFile(filepath.Join(spec.OfficeDir, "note")); err != nil || string(data) != "kept\n" {
		t.Errorf("the office after the sweep: %q (%v)", data, err)
	}
}

// TestPool_IdleMemberPausedThenHandedOut: a member idle in the pool is
// paused by the next fill, and a hand-out unpauses it.
func TestPool_IdleMemberPausedThenHandedOut(t *testing.T) {
	f := newPooledFixture(t)
	defer image.PauseAfter(0)()
	spec := f.office(t, testenv.Name(t))
	if err := f.rt.FillPool(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	id := f.onlyMember(t)
	if state := f.members(t)[id]; state != "paused" {
		t.Fatalf("the idle member is %s after a fill; want it paused", state)
	}
	if out, _ := run(t, f.rt, spec, "ls /workspace", nil); out != spec.OfficeKey+"\n" {
		t.Errorf("first command: %q", out)
	}
	if ins := f.inspect(t, spec); ins.Container.ID != id || ins.Container.State.Paused {
		t.Errorf("the office's container is %s (paused %t); want the member %s, unpaused", ins.Container.ID, ins.Container.State.Paused, id)
	}
}
