package image

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"maps"
	"math/big"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"

	"github.com/hutchsandbox/hutch/internal/agent"
	"github.com/hutchsandbox/hutch/internal/atomicfile"
	"github.com/hutchsandbox/hutch/internal/beneath"
	"github.com/hutchsandbox/hutch/internal/engine"
	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/latemount"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/sandbox/managed"
)

// The warm pool keeps runtimes started before any conversation asks for
// one, so that a new conversation's first command skips the container
// start and the network create, most of a cold start. A member is made
// as an office's container is (the image, the hardening, the agent as
// init, the default limits, a bridge network of its own) but holds
// nothing of any conversation: its /workspace is a small tmpfs of
// hutch's (a latemount.Point) that receives the office and the door's
// mounts when the member is handed out. Members idle in the pool for a
// while are paused (poolPauseAfter).
//
// A hand-out runs under the office's lock, in whichever hutch process
// serves the first command: it claims a member (a binding record made
// with O_EXCL, so no two processes take one), attaches the mounts from
// sources opened beneath the workspace, seals /workspace read-only,
// renames the container to the office's name (unpausing it meanwhile
// when it was paused), checks through its agent that every target is
// the source it opened, applies the office's limits and completes the
// binding. Nothing ran
// in a member before; nothing returns to the pool after.
//
// Docker cannot change a container's labels, so the binding record
// (in the state dir, which no runtime mounts) says what an office
// container's labels say; inspect and the listings read it over the
// member's labels. It holds for the run it was made in only: a member's
// late mounts die with its mount namespace, so a handed-out runtime that
// stopped is re-created on its next command as a container of the
// office's own, keeping its writable layer, as any drift is.
//
// The pool serves Docker engines on this host, to a root hutch (it
// mounts), for conversations whose mounts all sit directly in
// /workspace and that have no vault files (their targets lie anywhere in
// the runtime's tree); everything else starts cold, as before.

const (
	// labelPool is the pool key a member was made for (poolKey).
	labelPool = "hutch.pool"
	// labelPoolMember is the member's name, kept by the container
	// after its hand-out renamed it.
	labelPoolMember = "hutch.pool.member"
	// poolPrefix begins every member's name while it is in the pool.
	poolPrefix = "hutch-pool-"
	// poolStale is how long a claim may stay incomplete, or a member
	// not ready, before the filler takes it for the leftover of a crashed
	// hutch: a hand-out takes well under a second, a start a few.
	poolStale = 2 * time.Minute
)

// poolPauseAfter is how long a ready member runs before the filler
// pauses it. An idle agent costs no CPU and the same memory paused or
// not, but a paused member runs nothing at all; unpausing costs about
// 35 ms of a hand-out, so a pool refilled under traffic hands out running
// members and one that sat idle hands out paused ones. Tests shorten it.
var poolPauseAfter = time.Minute

// poolState is what the Runtimes of one process share about the pool.
type poolState struct {
	mu     sync.Mutex
	inUse  map[string]bool // image references commands were served from
	kick   chan struct{}   // a member was taken, or an image came into use
	warned map[string]bool // images whose fill failure was logged
}

func newPoolState() *poolState {
	return &poolState{inUse: map[string]bool{}, kick: make(chan struct{}, 1), warned: map[string]bool{}}
}

// used records that a command was served from image ref and wakes the
// filler.
func (p *poolState) used(ref string) {
	p.mu.Lock()
	p.inUse[ref] = true
	p.mu.Unlock()
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// binding is what a handed-out member's labels would say if Docker
// could change them.
type binding struct {
	Member       string `json:"member"`
	Office       string `json:"office"`
	Platform     string `json:"platform"`
	Conversation string `json:"conversation"`
	// Fingerprint is "" until the hand-out completed.
	Fingerprint string `json:"fingerprint"`
	BuiltFrom   string `json:"builtFrom"`
	// StartedAt is the run of the container the office was bound into.
	StartedAt string `json:"startedAt"`
}

// member is one pool container.
type member struct {
	id, name string
	paused   bool
}

func memberPurpose(name string) string { return "image-pool\x00" + name }

// memberDir holds a member's socket dir ("run"), channel key ("key") and
// late mount point ("ws"); only run, key and ws are mounted.
func memberDir(runDir, name string) string { return filepath.Join(runDir, "pool", name) }

func memberSocketDir(runDir, name string) string {
	return filepath.Join(memberDir(runDir, name), "run")
}

func memberPoint(runDir, name string) latemount.Point {
	return latemount.Point{Dir: filepath.Join(memberDir(runDir, name), "ws")}
}

func memberNetwork(name string) string { return "hutch-net-" + name }

// readyFile marks a member whose agent answered: a running member without
// it is still starting.
func readyFile(runDir, name string) string { return filepath.Join(memberDir(runDir, name), "ready") }

// readySince is when the member became ready; ok is false while it is
// not.
func readySince(runDir, name string) (t time.Time, ok bool) {
	fi, err := os.Lstat(readyFile(runDir, name))
	if err != nil || !fi.Mode().IsRegular() {
		return time.Time{}, false
	}
	return fi.ModTime(), true
}

func bindingFile(stateDir, containerID string) string {
	return filepath.Join(stateDir, "pool", containerID)
}

// PoolUnusable says why this engine and process cannot keep a warm pool;
// "" when they can.
func (r *Runtime) PoolUnusable() string {
	switch {
	case r.cfg.Engine.Flavor == engine.FlavorPodman:
		return "the warm pool needs Docker (this engine is Podman)"
	case r.cfg.Engine.Host != "" && !strings.HasPrefix(r.cfg.Engine.Host, "unix://"):
		return "the warm pool needs the engine on this host (it runs on " + r.cfg.Engine.Host + ")"
	case os.Geteuid() != 0:
		return "the warm pool needs hutch to run as root (a hand-out mounts the office into the runtime)"
	}
	return ""
}

// poolKey names what a member must have been made from to serve this
// image now: the image's id, the agent, the hardening, the subnet pool.
func (r *Runtime) poolKey(imageID string) string {
	sum := sha256.Sum256([]byte(strings.Join([]string{"pool-v1", imageID, r.cfg.Agent.SHA256, strconv.Itoa(hardeningVersion), r.cfg.NetworkPool.String()}, "\x00")))
	return hex.EncodeToString(sum[:8])
}

// poolFits reports whether spec can be served by a member: every mount
// directly in /workspace (the Point takes one path component), the
// office among them, and no vault files.
func poolFits(spec sandbox.Spec) bool {
	// A member has a network of its own and no egress relay: a runtime
	// that relays starts cold.
	if relays(spec) || len(spec.VaultFiles) > 0 || len(spec.Mounts) == 0 || path.Dir(spec.OfficeRuntimePath) != poolRoot {
		return false
	}
	for _, m := range spec.Mounts {
		if path.Clean(m.RuntimePath) != m.RuntimePath || path.Dir(m.RuntimePath) != poolRoot {
			return false
		}
	}
	return true
}

// poolRoot is where a member's Point is mounted.
const poolRoot = "/workspace"

// fromPool hands a ready member of the pool to spec's office and reports
// whether it did. s.mu and the office's file lock are held. The mount
// sources are opened first: one that cannot be is the error a cold start
// would give too, and no member is spent on it. A failed hand-out is
// logged and its member removed: the caller then starts a container
// cold, which checks everything again on its own.
func (r *Runtime) fromPool(ctx context.Context, s *session, spec sandbox.Spec, d desired, fp string) (bool, error) {
	r.pool.used(r.cfg.Image)
	if !poolFits(spec) || r.PoolUnusable() != "" {
		return false, nil
	}
	pins, err := r.pinMounts(spec)
	if err != nil {
		return false, err
	}
	defer beneath.CloseAll(pins)
	m, ok := r.claim(ctx, r.poolKey(d.ImageID), spec)
	if !ok {
		return false, nil
	}
	if err := r.handOut(ctx, s, spec, d, fp, m, pins); err != nil {
		r.log.Warn("a warm pool runtime could not be handed out; starting one cold", "office_key", spec.OfficeKey, "member", m.name, "error", err)
		s.useChannel("")
		r.dropMember(context.WithoutCancel(ctx), m.id, m.name)
		return false, ctx.Err()
	}
	return true, nil
}

// claim takes a ready member of the pool key, if there is one, by making
// its binding record; a record already there is another process's claim.
func (r *Runtime) claim(ctx context.Context, key string, spec sandbox.Spec) (member, bool) {
	res, err := r.api.ContainerList(ctx, client.ContainerListOptions{Filters: r.memberFilter().
		Add("label", labelPool+"="+key).
		Add("status", "paused", "running")})
	if err != nil {
		r.log.Debug("list the warm pool", "error", err)
		return member{}, false
	}
	items := res.Items
	// Start at a random member: two processes handing out at once
	// rarely try the same one.
	if n := len(items); n > 1 {
		if i, err := rand.Int(rand.Reader, big.NewInt(int64(n))); err == nil {
			k := int(i.Int64())
			items = append(items[k:], items[:k]...)
		}
	}
	for _, c := range items {
		name, ok := inPool(c)
		if !ok {
			continue
		}
		if _, ready := readySince(r.cfg.RunDir, name); !ready {
			continue // still starting
		}
		b := binding{Member: name, Office: spec.OfficeKey, Platform: spec.Platform, Conversation: spec.ConversationID}
		if err := createBinding(r.cfg.StateDir, c.ID, b); err != nil {
			if !errors.Is(err, fs.ErrExist) {
				r.log.Warn("claim a warm pool runtime", "member", name, "error", err)
			}
			continue
		}
		return member{id: c.ID, name: name, paused: c.State == container.StatePaused}, true
	}
	return member{}, false
}

// memberFilter selects the warm pool's containers of this installation,
// handed out or not; more terms narrow it.
func (r *Runtime) memberFilter() client.Filters {
	return make(client.Filters).
		Add("label", labelPoolMember).
		Add("label", engine.LabelStateDir+"="+r.cfg.StateDir)
}

// inPool returns a listed container's member name when it is still in
// the pool: named as a member (a hand-out renames it to the office's).
func inPool(c container.Summary) (string, bool) {
	name := containerName(c.Names)
	return name, strings.HasPrefix(name, poolPrefix) && c.Labels[labelPoolMember] == name
}

func containerName(names []string) string {
	if len(names) == 0 {
		return ""
	}
	return strings.TrimPrefix(names[0], "/")
}

// handOut binds member m to spec's office (see the top of this file).
func (r *Runtime) handOut(ctx context.Context, s *session, spec sandbox.Spec, d desired, fp string, m member, pins []*beneath.File) error {
	if h := testHookBeforeStart.Load(); h != nil {
		(*h)(spec)
	}
	pt := memberPoint(r.cfg.RunDir, m.name)
	for i, mt := range spec.Mounts {
		src, err := pins[i].Dup()
		if err != nil {
			return err
		}
		err = pt.Attach(src, path.Base(mt.RuntimePath), mt.ReadOnly)
		_ = src.Close()
		if err != nil {
			return err
		}
	}
	if err := pt.Seal(); err != nil {
		return err
	}
	// An unpause is most of a hand-out's time; what the engine can do
	// meanwhile is done meanwhile.
	unpaused := make(chan error, 1)
	if m.paused {
		go func() {
			_, err := r.api.ContainerUnpause(ctx, m.id, client.ContainerUnpauseOptions{})
			unpaused <- err
		}()
	} else {
		unpaused <- nil
	}
	st, err := r.inspect(ctx, m.id)
	if err == nil {
		// Under the office's lock no other process makes its container;
		// a crash from here leaves one named as the office's whose
		// binding has no fingerprint, which the next command re-creates.
		if _, rerr := r.api.ContainerRename(ctx, m.id, client.ContainerRenameOptions{NewName: ContainerName(spec.OfficeKey)}); rerr != nil {
			err = engine.Classify(rerr, "rename "+m.name+" to "+ContainerName(spec.OfficeKey))
		}
	}
	if uerr := <-unpaused; uerr != nil && err == nil {
		err = engine.Classify(uerr, "unpause "+m.name)
	}
	if err == nil && st.paused && !m.paused {
		// Paused by a filler between the listing and the claim.
		if _, uerr := r.api.ContainerUnpause(ctx, m.id, client.ContainerUnpauseOptions{}); uerr != nil {
			err = engine.Classify(uerr, "unpause "+m.name)
		}
	}
	if err != nil {
		return err
	}
	if !st.running {
		return errdefs.New(errdefs.ErrUnavailable, "warm pool runtime "+m.name+" is not running")
	}
	s.useChannel(m.name)
	if err := r.verifyMounts(ctx, s, m.id, spec, pins); err != nil {
		return err
	}
	if err := r.applyLimits(ctx, spec, st); err != nil {
		return err
	}
	b := binding{Member: m.name, Office: spec.OfficeKey, Platform: spec.Platform, Conversation: spec.ConversationID,
		Fingerprint: fp, BuiltFrom: d.parts(), StartedAt: st.startedAt}
	if err := writeBinding(r.cfg.StateDir, m.id, b); err != nil {
		return err
	}
	clearRuntimeState(r.cfg.StateDir, spec.OfficeKey)
	s.verified = m.id + "@" + st.startedAt
	r.writeVerified(spec.OfficeKey, s.verified)
	r.log.Info("handed out a warm pool runtime", "office_key", spec.OfficeKey, "member", m.name, "id", shortID(m.id))
	r.event("pooled")
	if r.cfg.Changed != nil {
		r.cfg.Changed(ctx, sandbox.Change{Event: "created", OfficeKey: spec.OfficeKey, From: sandbox.FromWarmPool})
	}
	return nil
}

// createBinding makes containerID's binding record, failing with
// fs.ErrExist when one is there: the claim.
func createBinding(stateDir, containerID string, b binding) error {
	p := bindingFile(stateDir, containerID)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return err
	}
	data, err := json.Marshal(b)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600) //nolint:gosec // G304: hutch's own state dir
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func writeBinding(stateDir, containerID string, b binding) error {
	data, err := json.Marshal(b)
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(bindingFile(stateDir, containerID), data, 0o600)
}

// readBinding returns containerID's binding record; ok is false when it
// has none. A record that cannot be read is a claim under way.
func readBinding(stateDir, containerID string) (b binding, ok bool) {
	data, err := os.ReadFile(bindingFile(stateDir, containerID)) //nolint:gosec // G304: hutch's own state dir
	if err != nil {
		return binding{}, !errors.Is(err, fs.ErrNotExist)
	}
	_ = json.Unmarshal(data, &b)
	return b, true
}

// bindingAge is how long ago containerID's binding record was last
// written.
func bindingAge(stateDir, containerID string) time.Duration {
	fi, err := os.Stat(bindingFile(stateDir, containerID))
	if err != nil {
		return 0
	}
	return time.Since(fi.ModTime())
}

// overlayBinding puts a handed-out member's binding over what inspect
// read from its labels. An unbound member keeps its labels (no office).
func (r *Runtime) overlayBinding(st *containerState) {
	name := st.labels[labelPoolMember]
	if name == "" {
		return
	}
	b, ok := readBinding(r.cfg.StateDir, st.id)
	if !ok || b.Office == "" || b.Member != name {
		return
	}
	labels := maps.Clone(st.labels)
	labels[engine.LabelOffice] = b.Office
	labels[engine.LabelPlatform] = b.Platform
	labels[engine.LabelConversation] = b.Conversation
	labels[labelBuiltFrom] = b.BuiltFrom
	st.labels = labels
	st.member = name
	st.network = memberNetwork(name)
	st.fingerprint = ""
	if st.running && b.Fingerprint != "" && b.StartedAt == st.startedAt {
		st.fingerprint = b.Fingerprint
	}
}

// officeOf is the office a listed container serves: its label, or a
// handed-out member's binding.
func (r *Runtime) officeOf(c container.Summary) string {
	if k := c.Labels[engine.LabelOffice]; k != "" {
		return k
	}
	if name := c.Labels[labelPoolMember]; name != "" {
		if b, ok := readBinding(r.cfg.StateDir, c.ID); ok && b.Member == name {
			return b.Office
		}
	}
	return ""
}

// dropMember removes a member (id may be "" when it was never made) and
// everything it had: see dropMemberFiles.
func (r *Runtime) dropMember(ctx context.Context, id, name string) {
	if id != "" {
		if _, err := r.api.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true}); err != nil && !engine.IsNotFound(err) {
			r.log.Warn("remove a warm pool runtime", "member", name, "error", err)
			return
		}
	}
	r.dropMemberFiles(ctx, id, name)
}

// dropMemberFiles removes what a removed member leaves: its mounts on
// the host, its directory, its network and its binding record. Its
// directory goes only once nothing is mounted beneath it: removing
// through an office's mount would delete the office's files.
func (r *Runtime) dropMemberFiles(ctx context.Context, id, name string) {
	if err := memberPoint(r.cfg.RunDir, name).Detach(); err != nil {
		r.log.Warn("a warm pool runtime's mounts are left on the host", "member", name, "error", err)
	} else if err := agent.RemoveSocketDir(memberDir(r.cfg.RunDir, name)); err != nil {
		r.log.Warn("remove a warm pool runtime's directory", "member", name, "error", err)
	}
	if err := r.removeNamedNetwork(ctx, memberNetwork(name)); err != nil {
		r.log.Warn("remove a warm pool runtime's network", "member", name, "error", err)
	}
	if id != "" {
		_ = os.Remove(bindingFile(r.cfg.StateDir, id))
	}
}

// FillPool brings the pool of this runtime's image to size ready
// members: it removes members made from something else (another image
// id, agent or hardening), claims a crashed hutch left half done and
// members that never became ready, then makes what is missing, one at a
// time. One filler per installation runs at once (a file lock).
func (r *Runtime) FillPool(ctx context.Context, size int) error {
	if why := r.PoolUnusable(); why != "" {
		return errdefs.New(errdefs.ErrNotSupported, why)
	}
	imageID, err := r.imageID(ctx)
	if err != nil {
		return err
	}
	unlock, err := lockFile(filepath.Join(r.cfg.RunDir, "locks", "pool.lock"))
	if err != nil {
		return err
	}
	defer unlock()
	key := r.poolKey(imageID)
	res, err := r.api.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: r.memberFilter().
		Add("label", engine.LabelImage+"="+r.cfg.Image)})
	if err != nil {
		return engine.Classify(err, "list the warm pool")
	}
	ready := 0
	for _, c := range res.Items {
		name, ok := inPool(c)
		if !ok {
			continue // handed out: an office's now
		}
		// Members are made under the lock this fill holds, so one that
		// is not ready is what a crashed filler left.
		_, claimed := readBinding(r.cfg.StateDir, c.ID)
		_, isReady := readySince(r.cfg.RunDir, name)
		usable := c.State == container.StatePaused || c.State == container.StateRunning && isReady
		switch {
		case claimed && bindingAge(r.cfg.StateDir, c.ID) < poolStale:
			continue // a hand-out under way
		case !claimed && c.Labels[labelPool] == key && usable && ready < size:
			ready++
			if c.State == container.StateRunning {
				r.pauseIdle(ctx, c.ID, name, poolPauseAfter)
			}
			continue
		}
		r.log.Info("removing a warm pool runtime", "member", name, "state", string(c.State), "claimed", claimed)
		if claimed {
			r.dropMember(ctx, c.ID, name) // a crashed hand-out's
		} else {
			r.removeUnclaimed(ctx, c.ID, name)
		}
	}
	for ; ready < size; ready++ {
		if err := r.addMember(ctx, imageID, key); err != nil {
			return err
		}
	}
	return nil
}

// addMember makes and starts one member, ready once its agent answers.
func (r *Runtime) addMember(ctx context.Context, imageID, poolKey string) (err error) {
	var rnd [6]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return err
	}
	name := poolPrefix + hex.EncodeToString(rnd[:])
	id := ""
	defer func() {
		if err != nil {
			r.dropMember(context.WithoutCancel(ctx), id, name)
		}
	}()
	pt := memberPoint(r.cfg.RunDir, name)
	if err := pt.Prepare(); err != nil {
		return err
	}
	run := memberSocketDir(r.cfg.RunDir, name)
	if err := prepareSocketDir(run); err != nil {
		return err
	}
	ck, err := agent.ChannelKey(r.cfg.StateDir, memberPurpose(name))
	if err != nil {
		return err
	}
	key := filepath.Join(memberDir(r.cfg.RunDir, name), "key")
	if err := agent.WriteChannelKey(key, ck); err != nil {
		return err
	}
	labels := map[string]string{
		engine.LabelManaged:  "true",
		engine.LabelMode:     string(sandbox.KindImage),
		engine.LabelStateDir: r.cfg.StateDir,
		labelPool:            poolKey,
		labelPoolMember:      name,
	}
	netID, err := r.makeNetwork(ctx, memberNetwork(name), name, labels)
	if err != nil {
		return err
	}
	labels[engine.LabelImage] = r.cfg.Image
	labels[engine.LabelImageID] = imageID
	mounts := append(r.channelMounts(run, key),
		mount.Mount{Type: mount.TypeBind, Source: pt.Dir, Target: poolRoot, BindOptions: &mount.BindOptions{Propagation: mount.PropagationRSlave}})
	cfg, hc := r.containerConfig(r.cfg.Image, poolRoot, labels, mounts, netID, managed.DefaultLimits)
	created, err := r.api.ContainerCreate(ctx, client.ContainerCreateOptions{Name: name, Config: cfg, HostConfig: hc})
	if err != nil {
		return engine.Classify(err, "create warm pool runtime "+name)
	}
	id = created.ID
	if _, err := r.api.ContainerStart(ctx, id, client.ContainerStartOptions{}); err != nil {
		return engine.Classify(err, "start warm pool runtime "+name)
	}
	cl, err := r.dialAgent(run, memberPurpose(name), name, r.log.With("member", name))
	if err != nil {
		return err
	}
	err = r.waitFor(ctx, cl, id, name)
	_ = cl.Close()
	if err != nil {
		return err
	}
	if err := agent.SealSocketDir(run); err != nil {
		r.log.Debug("socket dir left writable from inside", "member", name, "error", err)
	}
	if err := os.WriteFile(readyFile(r.cfg.RunDir, name), nil, 0o600); err != nil {
		return err
	}
	r.log.Info("added a warm pool runtime", "image", r.cfg.Image, "member", name, "id", shortID(id))
	return nil
}

// PauseReady pauses every ready member of this installation now, as a
// fill does once they idled for a minute (the bench times hand-outs of
// paused members with it).
func (r *Runtime) PauseReady(ctx context.Context) error {
	res, err := r.api.ContainerList(ctx, client.ContainerListOptions{Filters: r.memberFilter().Add("status", "running")})
	if err != nil {
		return engine.Classify(err, "list the warm pool")
	}
	for _, c := range res.Items {
		if name, ok := inPool(c); ok {
			r.pauseIdle(ctx, c.ID, name, 0)
		}
	}
	return nil
}

// pauseIdle pauses a member ready for longer than after. It
// claims the member meanwhile, so no hand-out takes one whose pause is
// under way (a hand-out unpauses only a member it saw paused).
func (r *Runtime) pauseIdle(ctx context.Context, id, name string, after time.Duration) {
	since, ready := readySince(r.cfg.RunDir, name)
	if !ready || time.Since(since) < after {
		return
	}
	if err := createBinding(r.cfg.StateDir, id, binding{Member: name}); err != nil {
		return // being handed out
	}
	defer func() { _ = os.Remove(bindingFile(r.cfg.StateDir, id)) }()
	if _, err := r.api.ContainerPause(ctx, id, client.ContainerPauseOptions{}); err != nil {
		r.log.Debug("pause a warm pool runtime", "member", name, "error", err)
	}
}

// KeepPool keeps size() ready members for every image commands were
// served from (and for this runtime's image, when it has one) until ctx
// ends: after each hand-out, and every interval. A size of 0 keeps none
// (existing members go at the next fill).
func (r *Runtime) KeepPool(ctx context.Context, size func() int, interval time.Duration) {
	if r.cfg.Image != "" {
		r.pool.used(r.cfg.Image)
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		r.pool.mu.Lock()
		images := make([]string, 0, len(r.pool.inUse))
		for ref := range r.pool.inUse {
			images = append(images, ref)
		}
		r.pool.mu.Unlock()
		n := size()
		for _, ref := range images {
			err := r.WithImage(ref).FillPool(ctx, n)
			r.pool.mu.Lock()
			first := !r.pool.warned[ref]
			r.pool.warned[ref] = err != nil
			r.pool.mu.Unlock()
			if err != nil && first && ctx.Err() == nil {
				r.log.Warn("the warm pool is not kept", "image", ref, "error", err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-r.pool.kick:
		case <-t.C:
		}
	}
}

// DrainPool removes every member still in the pool, of every image: a
// hand-out under way in another process keeps its member.
func (r *Runtime) DrainPool(ctx context.Context) error {
	res, err := r.api.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: r.memberFilter()})
	if err != nil {
		return engine.Classify(err, "list the warm pool")
	}
	for _, c := range res.Items {
		if name, ok := inPool(c); ok {
			r.removeUnclaimed(ctx, c.ID, name)
		}
	}
	return nil
}

// removeUnclaimed removes a member no hand-out has claimed, claiming it
// first so that none starts on it meanwhile.
func (r *Runtime) removeUnclaimed(ctx context.Context, id, name string) {
	if err := createBinding(r.cfg.StateDir, id, binding{Member: name}); err != nil {
		return // claimed by a hand-out under way, or unwritable: kept
	}
	r.dropMember(ctx, id, name)
}

// SweepPool removes what members that are gone left behind (a crashed
// hutch's, or one whose engine lost them, or removed by someone else):
// mounts and directories in the run dir, networks, binding records. It
// holds the filler's lock, so no member is being made meanwhile.
func (r *Runtime) SweepPool(ctx context.Context) error {
	unlock, err := lockFile(filepath.Join(r.cfg.RunDir, "locks", "pool.lock"))
	if err != nil {
		return err
	}
	defer unlock()
	res, err := r.api.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: r.memberFilter()})
	if err != nil {
		return engine.Classify(err, "list the warm pool")
	}
	live := map[string]bool{}
	ids := map[string]bool{}
	for _, c := range res.Items {
		live[c.Labels[labelPoolMember]] = true
		ids[c.ID] = true
	}
	entries, _ := os.ReadDir(filepath.Join(r.cfg.RunDir, "pool"))
	for _, e := range entries {
		if !live[e.Name()] && strings.HasPrefix(e.Name(), poolPrefix) {
			r.dropMemberFiles(ctx, "", e.Name())
		}
	}
	bindings, _ := os.ReadDir(filepath.Join(r.cfg.StateDir, "pool"))
	for _, e := range bindings {
		if !ids[e.Name()] {
			if _, err := r.api.ContainerInspect(ctx, e.Name(), client.ContainerInspectOptions{}); engine.IsNotFound(err) {
				_ = os.Remove(filepath.Join(r.cfg.StateDir, "pool", e.Name()))
			}
		}
	}
	nets, err := r.api.NetworkList(ctx, client.NetworkListOptions{Filters: r.memberFilter()})
	if err != nil {
		return engine.Classify(err, "list the warm pool's networks")
	}
	for _, n := range nets.Items {
		if !live[n.Labels[labelPoolMember]] {
			if err := r.removeNamedNetwork(ctx, n.Name); err != nil {
				r.log.Debug("remove a warm pool network", "network", n.Name, "error", err)
			}
		}
	}
	return nil
}
