package image_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/hutchsandbox/hutch/internal/engine"
	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/sandbox/image"
	"github.com/hutchsandbox/hutch/internal/sandbox/sandboxtest"
	"github.com/hutchsandbox/hutch/internal/testenv"
)

// hostSocket is where an office's agent socket sits on the host: a path
// anyone who knows the run dir and the office key can compute.
func (f *fixture) hostSocket(officeKey string) string {
	if res, err := f.cli.ContainerInspect(context.Background(), image.ContainerName(officeKey), client.ContainerInspectOptions{}); err == nil {
		if m := res.Container.Config.Labels[image.LabelPoolMember]; m != "" {
			return filepath.Join(image.MemberSocketDir(f.run, m), "agent.sock")
		}
	}
	sum := sha256.Sum256([]byte(officeKey))
	return filepath.Join(f.run, "rt", hex.EncodeToString(sum[:8]), "agent.sock")
}

// TestAttack_ChannelRedirect: a command replaces its runtime's agent
// socket with a symlink to another office's socket. The next hutch
// process that dials (every fresh hutch exec does; the daemon does after
// its connection drops) must refuse the agent that answers, naming the
// runtime, and send it nothing: the victim's office stays untouched and
// no command or env of the attacker's conversation reaches it.
func TestAttack_ChannelRedirect(t *testing.T) { attackChannelRedirect(t, newFixture(t)) }

func attackChannelRedirect(t *testing.T, f *fixture) {
	victim := f.office(t, "victim")
	attacker := f.office(t, "attacker")
	run(t, f.rt, victim, "true", nil)
	run(t, f.rt, attacker, "true", nil)
	// First line: the socket dir is sealed once the agent listens, so
	// the runtime can neither plant the link nor fill the host's run dir.
	for _, cmd := range []string{
		"ln -s " + f.hostSocket(victim.OfficeKey) + " /hutch/run/evil && mv -f /hutch/run/evil /hutch/run/agent.sock",
		"rm -f /hutch/run/agent.sock",
		"head -c 1048576 /dev/zero > /hutch/run/fill",
	} {
		res, err := f.rt.Exec(context.Background(), attacker, sandbox.ExecRequest{Argv: []string{cmd}, Stdout: io.Discard, Stderr: io.Discard, Timeout: time.Minute})
		if err != nil || res.ExitCode == 0 {
			t.Errorf("%q in the socket dir: exit %d, %v; want it refused", cmd, res.ExitCode, err)
		}
	}
	// Second line: where the seal is missing (hutch not root, a file
	// system without the flag), the link gets planted; played here from
	// the host.
	sockDir := filepath.Dir(f.hostSocket(attacker.OfficeKey))
	if out, err := exec.Command("chattr", "-i", sockDir).CombinedOutput(); err != nil {
		t.Fatalf("chattr -i %s: %v %s", sockDir, err, out)
	}
	if err := os.Symlink(f.hostSocket(victim.OfficeKey), sockDir+"/evil"); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(sockDir+"/evil", f.hostSocket(attacker.OfficeKey)); err != nil {
		t.Fatal(err)
	}

	rt := f.runtime(t) // a fresh process: it dials the socket path again
	var out, errb bytes.Buffer
	_, err := rt.Exec(context.Background(), attacker, sandbox.ExecRequest{
		Argv:   []string{"for d in /workspace/*/; do echo planted > \"$d\"planted; done; echo ran"},
		Dir:    "/",
		Env:    map[string]string{"CONVERSATION_SECRET": "s3cret"},
		Stdout: &out, Stderr: &errb, Timeout: time.Minute,
	})
	if err == nil {
		t.Errorf("the redirected channel was used: stdout %q, stderr %q", out.String(), errb.String())
	} else if !strings.Contains(err.Error(), image.ContainerName(attacker.OfficeKey)) || !strings.Contains(err.Error(), "not its agent") {
		t.Errorf("error %q: want it to name %s and say its channel answers with another agent", err, image.ContainerName(attacker.OfficeKey))
	}
	if _, err := os.Stat(filepath.Join(victim.OfficeDir, "planted")); err == nil {
		t.Errorf("the attacker's command wrote into the victim's office")
	}
	// The victim is served as before, by a fresh process too.
	if got, _ := run(t, f.runtime(t), victim, "echo ok", nil); got != "ok\n" {
		t.Errorf("victim after the attack: %q", got)
	}
}

// TestAttack_OtherInstallation: two hutch installations (two state dirs)
// on one engine serve the same conversation id, as every newcomer does
// with the daemon's own example, web/hello. The second must refuse the
// first's container, naming it, and never re-create it, commit its
// writable layer, relabel it or mount its own workspace into it; nor
// may it finish the first's interrupted re-create from its snapshot.
func TestAttack_OtherInstallation(t *testing.T) {
	first, second := newFixture(t), newFixture(t)
	ctx := context.Background()
	// The same id in both, as the daemon's example gives everyone; unique
	// to this test run, so that no other run's container is in the way.
	id := "hello-" + testenv.Name(t)
	mine := first.exactOffice(t, id)
	theirs := second.exactOffice(t, id)
	run(t, first.rt, mine, "echo kept > /root/layer-file", nil)
	before := first.inspect(t, mine)

	_, err := second.rt.Exec(ctx, theirs, sandbox.ExecRequest{Argv: []string{"cat /root/layer-file"}, Stdout: io.Discard, Stderr: io.Discard, Timeout: time.Minute})
	if !errors.Is(err, errdefs.ErrConflict) || !strings.Contains(err.Error(), image.ContainerName(mine.OfficeKey)) || !strings.Contains(err.Error(), "another hutch installation") {
		t.Errorf("the second installation's command: %v; want a conflict naming %s", err, image.ContainerName(mine.OfficeKey))
	}
	after := first.inspect(t, mine)
	if after.Container.ID != before.Container.ID || after.Container.Config.Labels[engine.LabelStateDir] != first.state {
		t.Errorf("the first installation's container was replaced or relabelled: id %s -> %s, state dir %q", before.Container.ID, after.Container.ID, after.Container.Config.Labels[engine.LabelStateDir])
	}
	for _, m := range after.Container.Mounts {
		if strings.HasPrefix(m.Source, second.ws) {
			t.Errorf("the second installation's workspace is mounted into the first's container: %s", m.Source)
		}
	}
	if got, _ := run(t, first.rt, mine, "cat /root/layer-file", nil); got != "kept\n" {
		t.Errorf("the first installation's writable layer: %q", got)
	}

	// The first installation is mid re-create: its container is gone and
	// its snapshot holds the writable layer. The second must not take it.
	commit := client.ContainerCommitOptions{Reference: image.SnapshotRef(mine.OfficeKey)}
	if first.eng.Flavor == engine.FlavorPodman {
		commit.Config = &container.Config{} // Podman 4 decodes a body it then ignores
	}
	if _, err := first.cli.ContainerCommit(ctx, after.Container.ID, commit); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = first.cli.ImageRemove(context.Background(), image.SnapshotRef(mine.OfficeKey), client.ImageRemoveOptions{Force: true})
	})
	if _, err := first.cli.ContainerRemove(ctx, after.Container.ID, client.ContainerRemoveOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	_, err = second.rt.Exec(ctx, theirs, sandbox.ExecRequest{Argv: []string{"cat /root/layer-file"}, Stdout: &out, Stderr: io.Discard, Timeout: time.Minute})
	if !errors.Is(err, errdefs.ErrConflict) || !strings.Contains(err.Error(), image.SnapshotRef(mine.OfficeKey)) {
		t.Errorf("the second installation with the first's snapshot about: %v (stdout %q); want a conflict naming the snapshot", err, out.String())
	}
}

// fullDoor is the spec of a conversation whose door projects the whole
// workspace, read-write.
func (f *fixture) fullDoor(t *testing.T, id string) sandbox.Spec {
	t.Helper()
	s := f.office(t, id)
	s.Mounts = []sandbox.Mount{{HostPath: f.ws, RuntimePath: "/workspace"}}
	return s
}

// TestAttack_MountSourceLinked: a conversation with the full door moves
// another office away and puts a link to hutch's state dir in its place.
// The victim's next start must refuse the link, and nothing of the state
// dir may be mounted anywhere.
func TestAttack_MountSourceLinked(t *testing.T) { attackMountSourceLinked(t, newFixture(t)) }

func attackMountSourceLinked(t *testing.T, f *fixture) {
	attacker := f.fullDoor(t, "attacker-full")
	victim := f.office(t, "victim-iso")
	if err := os.WriteFile(filepath.Join(f.state, "vault-secret"), []byte("s3cret"), 0o600); err != nil {
		t.Fatal(err)
	}
	run(t, f.rt, attacker, "mv /workspace/"+victim.OfficeKey+" /workspace/moved && ln -s "+f.state+" /workspace/"+victim.OfficeKey, nil)

	var out bytes.Buffer
	_, err := f.rt.Exec(context.Background(), victim, sandbox.ExecRequest{Argv: []string{"cat " + victim.OfficeRuntimePath + "/vault-secret"}, Stdout: &out, Stderr: io.Discard, Timeout: time.Minute})
	if !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), "is a symbolic link") {
		t.Errorf("victim's start through a linked office: %v (stdout %q); want the link refusal", err, out.String())
	}
	if strings.Contains(out.String(), "s3cret") {
		t.Errorf("hutch's state dir was mounted into the victim's runtime")
	}
	if _, err := f.cli.ContainerInspect(context.Background(), image.ContainerName(victim.OfficeKey), client.ContainerInspectOptions{}); err == nil {
		res := f.inspect(t, victim)
		if res.Container.State != nil && res.Container.State.Running {
			t.Errorf("the victim's container runs with a linked mount source")
		}
	}
}

// TestAttack_MountSourceSwappedInTheRace: the swap lands after hutch
// checked the office and before the engine mounts it (played here by a
// hook at exactly that point). The container must be removed before any
// command runs in it.
func TestAttack_MountSourceSwappedInTheRace(t *testing.T) {
	f := newFixture(t)
	victim := f.office(t, "victim-race")
	if err := os.WriteFile(filepath.Join(f.state, "vault-secret"), []byte("s3cret"), 0o600); err != nil {
		t.Fatal(err)
	}
	defer f.swapForStateDirLink(t, victim)()
	var out bytes.Buffer
	_, err := f.rt.Exec(context.Background(), victim, sandbox.ExecRequest{Argv: []string{"cat " + victim.OfficeRuntimePath + "/vault-secret"}, Stdout: &out, Stderr: io.Discard, Timeout: time.Minute})
	if !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), "was removed before anything ran in it") {
		t.Errorf("a start whose source was swapped in the race: %v (stdout %q); want the container removed", err, out.String())
	}
	if strings.Contains(out.String(), "s3cret") {
		t.Errorf("the command ran with hutch's state dir mounted")
	}
	if _, err := f.cli.ContainerInspect(context.Background(), image.ContainerName(victim.OfficeKey), client.ContainerInspectOptions{}); !engine.IsNotFound(err) {
		t.Errorf("the container with the swapped mount is still there: %v", err)
	}
}

// swapForStateDirLink plays the race on victim's next start (or
// hand-out): once hutch opened its office and before the engine (or the
// hand-out) mounts it, the office is moved away and a link to hutch's
// state dir put in its place. It returns the restore of the hook.
func (f *fixture) swapForStateDirLink(t *testing.T, victim sandbox.Spec) (restore func()) {
	t.Helper()
	return image.BeforeStart(func(s sandbox.Spec) {
		if s.OfficeKey != victim.OfficeKey {
			return
		}
		if err := os.Rename(victim.OfficeDir, victim.OfficeDir+"-moved"); err != nil {
			t.Error(err)
		}
		if err := os.Symlink(f.state, victim.OfficeDir); err != nil {
			t.Error(err)
		}
	})
}

// TestAttack_CrossOfficeNetwork: a conversation's runtime tries to reach
// another's by its address (a server listening there). Each office has a
// network of its own; Docker keeps bridge networks apart, and on Podman
// (which routes between them) hutch's host rule drops that traffic: the
// connection must fail, while the victim reaches itself.
func TestAttack_CrossOfficeNetwork(t *testing.T) { attackCrossOfficeNetwork(t, newFixture(t)) }

func attackCrossOfficeNetwork(t *testing.T, f *fixture) {
	victim := f.office(t, "victim-net")
	attacker := f.office(t, "attacker-net")
	if f.eng.Flavor == engine.FlavorPodman {
		// netavark adds rules of its own as networks are made; one that
		// accepts the pool's traffic ahead of hutch's must not win: the
		// next start puts hutch's first again.
		run(t, f.rt, attacker, "true", nil)
		decoy := []string{"FORWARD", "-s", "10.213.0.0/16", "-d", "10.213.0.0/16", "-m", "comment", "--comment", "hutch test: accept ahead", "-j", "ACCEPT"}
		if out, err := exec.Command("iptables", append([]string{"-w", "-I"}, decoy...)...).CombinedOutput(); err != nil {
			t.Fatalf("iptables: %v %s", err, out)
		}
		t.Cleanup(func() { _ = exec.Command("iptables", append([]string{"-w", "-D"}, decoy...)...).Run() })
	}
	sandboxtest.CrossReach(t, f.rt, victim, attacker, func() string {
		res, err := f.cli.ContainerInspect(context.Background(), image.ContainerName(victim.OfficeKey), client.ContainerInspectOptions{})
		if err != nil {
			return "" // not made yet
		}
		if ns := res.Container.NetworkSettings; ns != nil {
			// The office's network, or the warm pool member's it came with.
			for _, n := range ns.Networks {
				if n != nil && n.IPAddress.IsValid() {
					return n.IPAddress.String()
				}
			}
		}
		return ""
	}, "")
}

// TestAttack_FillTheDisk: a command writes past the disk ceiling, part of
// it into its writable layer and part hidden in the snapshot a re-create
// carries into the image the new container runs. The daemon's check
// stops that runtime (and not a neighbour under the ceiling), its next
// start is refused with a text that says how to get it back, and a
// removal gives the conversation a fresh runtime with its office kept.
func TestAttack_FillTheDisk(t *testing.T) { attackFillTheDisk(t, newFixture(t)) }

func attackFillTheDisk(t *testing.T, f *fixture) {
	ctx := context.Background()
	const ceiling = 64 << 20
	attacker := f.office(t, "attacker-disk")
	attacker.DiskCeiling = ceiling
	neighbour := f.office(t, "neighbour-disk")
	neighbour.DiskCeiling = ceiling
	run(t, f.rt, neighbour, "mkdir -p /data && head -c 4194304 /dev/urandom > /data/small", nil)
	run(t, f.rt, attacker, "echo kept > note && mkdir -p /data && head -c 41943040 /dev/urandom > /data/a", nil)
	// A door change re-creates the container: the 40 MiB written so far
	// are committed into a snapshot, and the new writable layer is empty.
	extra := filepath.Join(f.ws, "extra-"+attacker.OfficeKey)
	if err := os.MkdirAll(extra, 0o700); err != nil {
		t.Fatal(err)
	}
	attacker.Mounts = append(attacker.Mounts, sandbox.Mount{HostPath: extra, RuntimePath: "/extra", ReadOnly: true})
	out, _ := run(t, f.rt, attacker, "head -c 41943040 /dev/urandom > /data/b && ls /data", nil)
	if out != "a\nb\n" {
		t.Fatalf("after the re-create /data holds %q; want the carried a and the new b", out)
	}
	if ls := f.inspect(t, attacker).Container.Config.Labels; ls[sandbox.LabelRecreatedAt] == "" {
		t.Fatal("the door change did not re-create the container: the test would not hide anything in a snapshot")
	}

	stopped, err := f.rt.EnforceDisk(ctx, ceiling)
	if err != nil {
		t.Fatal(err)
	}
	if len(stopped) != 1 || stopped[0] != attacker.OfficeKey {
		t.Errorf("EnforceDisk stopped %v; want only the attacker's %s", stopped, attacker.OfficeKey)
	}
	if st := f.inspect(t, attacker).Container.State; st.Running {
		t.Error("the attacker's container still runs after EnforceDisk")
	}
	if st := f.inspect(t, neighbour).Container.State; !st.Running {
		t.Error("the neighbour under the ceiling was stopped")
	}

	var outb bytes.Buffer
	_, err = f.rt.Exec(ctx, attacker, sandbox.ExecRequest{Argv: []string{"echo ran"}, Stdout: &outb, Stderr: io.Discard, Timeout: time.Minute})
	want := "The runtime of web/" + attacker.ConversationID + " holds "
	if !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), want) ||
		!strings.Contains(err.Error(), "above this installation's disk ceiling of 64MiB") ||
		!strings.HasSuffix(err.Error(), "hutch sandbox rm web/"+attacker.ConversationID+"; or the operator raises the ceiling: hutch sandbox settings sandbox.ceiling.disk <value>") {
		t.Errorf("the next command of a runtime over its ceiling: %v (stdout %q); want the disk refusal", err, outb.String())
	}
	if outb.Len() > 0 {
		t.Errorf("a command ran in a runtime over its ceiling: %q", outb.String())
	}
	if out, _ := run(t, f.rt, neighbour, "cat /data/small | wc -c", nil); strings.TrimSpace(out) != "4194304" {
		t.Errorf("the neighbour's layer: %q", out)
	}

	if err := f.rt.Remove(ctx, attacker.OfficeKey); err != nil {
		t.Fatal(err)
	}
	if out, _ := run(t, f.rt, attacker, "cat note; ls /data 2>/dev/null; true", nil); out != "kept\n" {
		t.Errorf("after removal: %q; want the office's note and no /data", out)
	}
}
