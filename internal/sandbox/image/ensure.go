package image

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"

	"github.com/hutchsandbox/hutch/internal/agent"
	"github.com/hutchsandbox/hutch/internal/beneath"
	"github.com/hutchsandbox/hutch/internal/engine"
	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/imagebuild"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/sandbox/managed"
)

// containerState is what inspect tells about an office's container.
type containerState struct {
	exists      bool
	id          string
	name        string // without the leading slash
	running     bool
	paused      bool
	exitCode    int
	fingerprint string
	imageID     string // the base image label
	startedAt   string
	limits      sandbox.Limits
	labels      map[string]string
	image       string
	imageRef    string // the image id the container runs (a snapshot after a re-create)
	// networks maps the names of the networks the container is on to
	// the ids they had when it joined them.
	networks map[string]string
	// member and network are set for a container handed out from the
	// warm pool: its name there and its network (see pool.go).
	member, network string
}

// officeNetwork is the name of the network the office key's container
// belongs on.
func (st containerState) officeNetwork(key string) string {
	if st.network != "" {
		return st.network
	}
	return NetworkName(key)
}

// onNetwork reports whether the container is on the network of that name.
func (st containerState) onNetwork(name string) bool {
	_, on := st.networks[name]
	return on
}

func (r *Runtime) inspect(ctx context.Context, nameOrID string) (containerState, error) {
	res, err := r.api.ContainerInspect(ctx, nameOrID, client.ContainerInspectOptions{})
	if engine.IsNotFound(err) {
		return containerState{}, nil
	}
	if err != nil {
		return containerState{}, engine.Classify(err, "inspect container "+nameOrID)
	}
	c := res.Container
	st := containerState{exists: true, id: c.ID, name: strings.TrimPrefix(c.Name, "/"), imageRef: c.Image}
	if c.State != nil {
		st.running = c.State.Running
		st.paused = c.State.Paused
		st.exitCode = c.State.ExitCode
		st.startedAt = c.State.StartedAt
	}
	if c.Config != nil {
		st.labels = c.Config.Labels
		st.fingerprint = c.Config.Labels[engine.LabelFingerprint]
		st.imageID = c.Config.Labels[engine.LabelImageID]
		st.image = c.Config.Image
	}
	if ns := c.NetworkSettings; ns != nil {
		st.networks = map[string]string{}
		for name, ep := range ns.Networks {
			id := ""
			if ep != nil {
				id = ep.NetworkID
			}
			st.networks[name] = id
		}
	}
	if hc := c.HostConfig; hc != nil {
		st.limits.CPUs = float64(hc.NanoCPUs) / 1e9
		st.limits.MemoryBytes = hc.Memory
		if hc.PidsLimit != nil {
			st.limits.Pids = *hc.PidsLimit
		}
	}
	r.overlayBinding(&st)
	return st, nil
}

// mine refuses a container another installation (another state dir)
// made: two installations on one engine name an office's container
// alike, and one must never re-create, commit, relabel or mount into the
// other's. Errors are of class errdefs.ErrConflict.
func (r *Runtime) mine(st containerState) error {
	if !st.exists || st.labels[engine.LabelStateDir] == r.cfg.StateDir {
		return nil
	}
	return errdefs.New(errdefs.ErrConflict, fmt.Sprintf(
		"Container %s belongs to another hutch installation (state dir %q), which serves the same conversation on this engine; hutch leaves it alone. Serve this conversation from that installation, or remove the container there first.",
		st.name, st.labels[engine.LabelStateDir]))
}

// desired computes what the office's container must be built from.
func (r *Runtime) desired(ctx context.Context, spec sandbox.Spec) (desired, error) {
	id, err := r.imageID(ctx)
	if err != nil {
		return desired{}, err
	}
	d := desired{
		ImageRef:  r.cfg.Image,
		ImageID:   id,
		Mounts:    spec.Mounts,
		Network:   NetworkName(spec.OfficeKey),
		Agent:     r.cfg.Agent.SHA256,
		Hardening: hardeningVersion,
	}
	if relays(spec) {
		if d.Network, err = r.egressNetwork(spec); err != nil {
			return desired{}, err
		}
	}
	if !r.cfg.Engine.CanUpdateLimits() {
		l := spec.Limits.Over(managed.DefaultLimits)
		d.Limits = &l
	}
	for _, v := range spec.VaultFiles {
		dg, err := managed.DigestTree(v.HostPath)
		if err != nil {
			return desired{}, err
		}
		d.Vault = append(d.Vault, vaultDigest{RuntimePath: v.RuntimePath, Digest: dg})
	}
	return d, nil
}

func (r *Runtime) event(e string) {
	if r.cfg.Event != nil {
		r.cfg.Event(e)
	}
}

// Check verifies the engine answers and the configured image is present
// (or can be pulled).
func (r *Runtime) Check(ctx context.Context) error {
	_, err := r.imageID(ctx)
	return err
}

// imageID resolves the configured image to the id present in the engine.
// A missing image is pulled only if a registry answers; this machine kind
// often has none, so the error says how to provide the image locally.
func (r *Runtime) imageID(ctx context.Context) (string, error) {
	if r.cfg.Image == "" {
		return "", errdefs.New(errdefs.ErrInvalid, "image mode needs an image: --sandbox image:<image>")
	}
	res, err := r.api.ImageInspect(ctx, r.cfg.Image)
	if err == nil {
		return res.ID, nil
	}
	if !engine.IsNotFound(err) {
		return "", engine.Classify(err, "inspect image "+r.cfg.Image)
	}
	pctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	pull, perr := r.api.ImagePull(pctx, r.cfg.Image, client.ImagePullOptions{})
	if perr == nil {
		perr = pull.Wait(pctx)
		_ = pull.Close()
	}
	if perr == nil {
		if res, err := r.api.ImageInspect(ctx, r.cfg.Image); err == nil {
			return res.ID, nil
		}
	}
	if imagebuild.IsCurated(r.cfg.Image) {
		return "", errdefs.New(errdefs.ErrFailedPrecondition, fmt.Sprintf(
			"Image '%s' is hutch's curated sandbox image and is not built yet: build it with `hutch image build --tag %s` (a few minutes, once).",
			r.cfg.Image, r.cfg.Image))
	}
	return "", errdefs.New(errdefs.ErrFailedPrecondition, fmt.Sprintf(
		"Image '%s' is not present in the container engine, and pulling it failed (%s). Build or load it locally first (docker build, docker load or docker import).",
		r.cfg.Image, firstLine(perr)))
}

func firstLine(err error) string {
	if err == nil {
		return "no error"
	}
	s := err.Error()
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}

// ensureLocked brings the office's container to the desired state and
// returns its agent client. s.mu is held.
func (r *Runtime) ensureLocked(ctx context.Context, s *session, spec sandbox.Spec) (*agent.Client, error) {
	// What the office needs (the image's id) and what its container is
	// are an engine round trip each, and independent: asked at once, a
	// warm command waits for one.
	type wanted struct {
		d   desired
		err error
	}
	wc := make(chan wanted, 1)
	go func() {
		d, err := r.desired(ctx, spec)
		wc <- wanted{d, err}
	}()
	name := ContainerName(spec.OfficeKey)
	st, err := r.inspect(ctx, name)
	w := <-wc
	if w.err != nil {
		return nil, w.err
	}
	if err != nil {
		return nil, err
	}
	d, fp := w.d, w.d.fingerprint()
	if err := r.mine(st); err != nil {
		return nil, err
	}
	s.useChannel(st.member)
	// The warm path: a running container this process, or another of
	// this installation, has checked, built from what the office needs
	// and on its network. Only its limits may need a live update; nothing
	// is provisioned, so no lock is taken.
	if s.verified == "" {
		s.verified = r.readVerified(spec.OfficeKey)
	}
	if st.running && st.fingerprint == fp && s.verified == st.id+"@"+st.startedAt &&
		(st.onNetwork(st.officeNetwork(spec.OfficeKey)) || r.cfg.Engine.Flavor == engine.FlavorPodman || spec.Network.Proxied()) {
		if err := r.applyLimits(ctx, spec, st); err != nil {
			return nil, err
		}
		return r.clientLocked(s)
	}
	// Other hutch processes of this installation provision the same
	// office under the same file lock, so two first commands arriving in
	// two processes also create one container. What was seen before the
	// lock may be stale: look again.
	unlock, err := lockFile(filepath.Join(r.cfg.RunDir, "locks", "office-"+shortHash(spec.OfficeKey)+".lock"))
	if err != nil {
		return nil, err
	}
	defer unlock()
	if st, err = r.inspect(ctx, name); err != nil {
		return nil, err
	}
	if err := r.mine(st); err != nil {
		return nil, err
	}
	s.useChannel(st.member)
	switch {
	case !st.exists:
		snap, err := r.snapshotExists(ctx, spec.OfficeKey)
		if err != nil {
			return nil, err
		}
		if !snap {
			pooled, err := r.fromPool(ctx, s, spec, d, fp)
			if err != nil {
				return nil, err
			}
			if pooled {
				break
			}
		}
		from := r.cfg.Image
		if snap {
			// A re-create was interrupted after the old container went:
			// finish it from the snapshot so the writable layer survives.
			from = SnapshotRef(spec.OfficeKey)
			r.log.Info("resuming an interrupted re-create from its snapshot", "office_key", spec.OfficeKey)
		}
		because := ""
		if snap {
			because = "an interrupted re-create was finished"
		}
		if err := r.createAndStart(ctx, s, spec, d, fp, from, because); err != nil {
			return nil, err
		}
		if snap {
			r.dropSnapshot(ctx, spec.OfficeKey)
		}
	case st.fingerprint != fp:
		// A layer over the disk ceiling is not committed into a snapshot.
		if err := r.checkDisk(ctx, spec, st); err != nil {
			return nil, err
		}
		if err := s.WaitIdle(ctx); err != nil {
			return nil, err
		}
		if err := r.recreate(ctx, s, spec, d, fp, st); err != nil {
			return nil, err
		}
	default:
		// The first time this process sees this run of the container it
		// also clears a snapshot tag a crashed re-create left, and waits
		// for the agent (another process may have just started it).
		// Later commands skip both: a warm command costs two engine GETs.
		seen := st.running && s.verified == st.id+"@"+st.startedAt
		if !seen {
			snap, err := r.snapshotExists(ctx, spec.OfficeKey)
			if err != nil {
				return nil, err
			}
			if snap {
				r.dropSnapshot(ctx, spec.OfficeKey)
			}
		}
		joined, on := st.networks[st.officeNetwork(spec.OfficeKey)]
		switch {
		case spec.Network.Proxied():
			// On no network, by its fingerprint: nothing to attach.
		case !on && r.cfg.Engine.Flavor != engine.FlavorPodman:
			// A hutch died between starting the container and attaching
			// it to its network: finish the job.
			netID, err := r.ensureNetwork(ctx, spec)
			if err != nil {
				return nil, err
			}
			if err := r.attachNetwork(ctx, st.id, netID, spec.OfficeKey); err != nil {
				return nil, err
			}
		case on && !st.running:
			if err := r.rejoinNetwork(ctx, spec, st.id, joined); err != nil {
				return nil, err
			}
		}
		if !st.running {
			if err := r.checkDisk(ctx, spec, st); err != nil {
				return nil, err
			}
			if err := r.start(ctx, s, spec, st.id); err != nil {
				return nil, err
			}
			if st, err = r.inspect(ctx, st.id); err != nil {
				return nil, err
			}
		} else if !seen {
			if st.paused {
				// Someone paused it (hutch never does): its agent is up but
				// frozen, and waiting for it would only wait out
				// waitAgent's 30 s. The command goes to it unverified; the
				// agent client bounds it by its timeout. A later command,
				// unpaused, verifies the run.
				return r.clientLocked(s)
			}
			if err := r.waitAgent(ctx, s, st.id); err != nil {
				return nil, err
			}
		}
		s.verified = st.id + "@" + st.startedAt
		r.writeVerified(spec.OfficeKey, s.verified)
		// Limits changed in settings (or a boost ended) apply live.
		if err := r.applyLimits(ctx, spec, st); err != nil {
			return nil, err
		}
	}
	return r.clientLocked(s)
}

// createAndStart makes the office's network and container and waits for
// its agent. On Docker the container is created and started on no network
// while its own network is made, then moved onto it before any command
// runs: creating a bridge network costs about as much as starting a
// container, so doing both at once takes a fifth off a first command.
// Podman cannot move a container off "none", so there it goes in order.
//
// because, when not empty, says why the container replaces another: it
// is recorded on the new one (sandbox.MarkRecreated).
func (r *Runtime) createAndStart(ctx context.Context, s *session, spec sandbox.Spec, d desired, fp, from, because string) error {
	s.useChannel("")
	if err := r.prepareChannel(spec.OfficeKey); err != nil {
		return err
	}
	if spec.Network.Proxied() {
		// No network at all: the egress proxy is its only way out.
		return r.createAndStartOffline(ctx, s, spec, d, fp, from, because)
	}
	if err := r.isolateNetworks(ctx); err != nil {
		return err
	}
	if r.cfg.Engine.Flavor == engine.FlavorPodman {
		netID, err := r.ensureNetwork(ctx, spec)
		if err != nil {
			return err
		}
		id, err := r.create(ctx, spec, d, fp, from, because, netID)
		if err != nil {
			return err
		}
		if err := r.start(ctx, s, spec, id); err != nil {
			return err
		}
		r.recordChecked(ctx, s, id)
		return nil
	}
	type netResult struct {
		id  string
		err error
	}
	netc := make(chan netResult, 1)
	go func() {
		id, err := r.ensureNetwork(ctx, spec)
		netc <- netResult{id, err}
	}()
	id, err := r.create(ctx, spec, d, fp, from, because, "none")
	var pins []*beneath.File
	if err == nil {
		pins, err = r.pinMounts(spec)
	}
	defer beneath.CloseAll(pins)
	if h := testHookBeforeStart.Load(); err == nil && h != nil {
		(*h)(spec)
	}
	if err == nil {
		if _, serr := r.api.ContainerStart(ctx, id, client.ContainerStartOptions{}); serr != nil {
			err = engine.Classify(serr, "start container "+ContainerName(spec.OfficeKey))
		}
	}
	net := <-netc
	if err != nil {
		return err
	}
	if net.err != nil {
		return net.err
	}
	if err := r.attachNetwork(ctx, id, net.id, spec.OfficeKey); err != nil {
		return err
	}
	r.event("started")
	clearRuntimeState(r.cfg.StateDir, s.Key)
	if err := r.waitAgent(ctx, s, id); err != nil {
		return err
	}
	if err := r.verifyMounts(ctx, s, id, spec, pins); err != nil {
		return err
	}
	r.recordChecked(ctx, s, id)
	return nil
}

// createAndStartOffline makes the container of a proxied office on no
// network ("none") and waits for its agent: no network is made for it.
func (r *Runtime) createAndStartOffline(ctx context.Context, s *session, spec sandbox.Spec, d desired, fp, from, because string) error {
	id, err := r.create(ctx, spec, d, fp, from, because, "none")
	if err != nil {
		return err
	}
	if r.cfg.Engine.Flavor == engine.FlavorPodman {
		if err := r.start(ctx, s, spec, id); err != nil {
			return err
		}
		r.recordChecked(ctx, s, id)
		r.dropOfficeNetwork(ctx, spec.OfficeKey)
		return nil
	}
	pins, err := r.pinMounts(spec)
	defer beneath.CloseAll(pins)
	if err != nil {
		return err
	}
	if h := testHookBeforeStart.Load(); h != nil {
		(*h)(spec)
	}
	if _, serr := r.api.ContainerStart(ctx, id, client.ContainerStartOptions{}); serr != nil {
		return engine.Classify(serr, "start container "+ContainerName(spec.OfficeKey))
	}
	r.event("started")
	clearRuntimeState(r.cfg.StateDir, s.Key)
	if err := r.waitAgent(ctx, s, id); err != nil {
		return err
	}
	if err := r.verifyMounts(ctx, s, id, spec, pins); err != nil {
		return err
	}
	r.recordChecked(ctx, s, id)
	r.dropOfficeNetwork(ctx, spec.OfficeKey)
	return nil
}

// dropOfficeNetwork removes the network a container of the office had
// before it went on none (its office ran open before): nothing uses it.
func (r *Runtime) dropOfficeNetwork(ctx context.Context, key string) {
	if err := r.removeNetwork(ctx, key); err != nil {
		r.log.Warn("the office network of a runtime now on none was not removed", "office_key", key, "error", err)
	}
}

// recordChecked records the run of container id, just made, started and
// checked (agent answering, mounts verified), so that the next process
// (a CLI call) takes the warm path. A start of an existing container
// records its run where ensure inspects it anyway.
func (r *Runtime) recordChecked(ctx context.Context, s *session, id string) {
	if st, err := r.inspect(ctx, id); err == nil && st.running {
		s.verified = st.id + "@" + st.startedAt
		r.writeVerified(s.Key, s.verified)
	}
}

// attachNetwork moves a container from "none" onto its office network.
// It is also how ensure repairs a container whose hutch died between
// starting it and attaching it.
func (r *Runtime) attachNetwork(ctx context.Context, containerID, netID, key string) error {
	if _, err := r.api.NetworkDisconnect(ctx, "none", client.NetworkDisconnectOptions{Container: containerID, Force: true}); err != nil && !engine.IsNotFound(err) && !strings.Contains(err.Error(), "not connected") {
		return engine.Classify(err, "detach container "+ContainerName(key)+" from no network")
	}
	if _, err := r.api.NetworkConnect(ctx, netID, client.NetworkConnectOptions{Container: containerID}); err != nil && !strings.Contains(err.Error(), "already exists") {
		return engine.Classify(err, "attach container "+ContainerName(key)+" to "+NetworkName(key))
	}
	return nil
}

// rejoinNetwork makes sure the network a stopped container joined (by
// id, as the engine starts it) still exists. A stopped container holds
// no endpoint on it, so the network can go under it: docker network
// prune removes every network without one, so an idle stop followed by
// a prune did it, and every later start failed with "network … not
// found" until the runtime, and its writable layer, was removed. Here
// the container forgets the removed network, and joins the office
// network made anew, as ensureNetwork makes every office network (a
// /29 of the pool, labelled, kept apart as any other).
func (r *Runtime) rejoinNetwork(ctx context.Context, spec sandbox.Spec, containerID, joined string) error {
	name := NetworkName(spec.OfficeKey)
	ref := joined
	if ref == "" {
		ref = name
	}
	_, err := r.api.NetworkInspect(ctx, ref, client.NetworkInspectOptions{})
	if err == nil {
		return nil
	}
	if !engine.IsNotFound(err) {
		return engine.Classify(err, "inspect network "+name)
	}
	r.log.Warn("the office network was removed while its container was stopped; making it anew", "office_key", spec.OfficeKey, "network", name)
	// By name, before a network of that name exists again: the engine
	// then drops the stale entry without looking the network up.
	if _, err := r.api.NetworkDisconnect(ctx, name, client.NetworkDisconnectOptions{Container: containerID, Force: true}); err != nil && !engine.IsNotFound(err) && !strings.Contains(err.Error(), "not connected") {
		return engine.Classify(err, "detach container "+ContainerName(spec.OfficeKey)+" from its removed network")
	}
	netID, err := r.ensureNetwork(ctx, spec)
	if err != nil {
		return err
	}
	return r.attachNetwork(ctx, containerID, netID, spec.OfficeKey)
}

func (r *Runtime) start(ctx context.Context, s *session, spec sandbox.Spec, id string) error {
	s.useChannel("")
	if err := r.prepareChannel(s.Key); err != nil {
		return err
	}
	// The host's rules are gone after a reboot; the networks are not.
	if err := r.isolateNetworks(ctx); err != nil {
		return err
	}
	pins, err := r.pinMounts(spec)
	if err != nil {
		return err
	}
	defer beneath.CloseAll(pins)
	if h := testHookBeforeStart.Load(); h != nil {
		(*h)(spec)
	}
	if _, err := r.api.ContainerStart(ctx, id, client.ContainerStartOptions{}); err != nil {
		return engine.Classify(err, "start container "+ContainerName(s.Key))
	}
	r.event("started")
	// Temporary limits and boosts end when a runtime stops; a start is a
	// new life.
	clearRuntimeState(r.cfg.StateDir, s.Key)
	if err := r.waitAgent(ctx, s, id); err != nil {
		return err
	}
	return r.verifyMounts(ctx, s, id, spec, pins)
}

// testHookBeforeStart, set by tests only, runs between the pinning of a
// start's mount sources and the start: where a racing runtime would swap
// one.
var testHookBeforeStart atomic.Pointer[func(sandbox.Spec)]

// create makes the container. A racing creator (another hutch process)
// is not an error: its container is used.
func (r *Runtime) create(ctx context.Context, spec sandbox.Spec, d desired, fp, from, because, netID string) (string, error) {
	name := ContainerName(spec.OfficeKey)
	limits := spec.Limits.Over(managed.DefaultLimits)
	labels := map[string]string{
		engine.LabelManaged:      "true",
		engine.LabelMode:         string(sandbox.KindImage),
		engine.LabelOffice:       spec.OfficeKey,
		engine.LabelPlatform:     spec.Platform,
		engine.LabelConversation: spec.ConversationID,
		engine.LabelFingerprint:  fp,
		engine.LabelImageID:      d.ImageID,
		engine.LabelImage:        r.cfg.Image,
		engine.LabelStateDir:     r.cfg.StateDir,
		labelBuiltFrom:           d.parts(),
		// Set empty over what a snapshot of a warm pool's runtime
		// carries: this container is the office's own.
		labelPool:       "",
		labelPoolMember: "",
	}
	if because != "" {
		// Always both: a container made from a snapshot inherits the
		// labels of the one it replaces.
		sandbox.MarkRecreated(labels, time.Now(), because)
	}
	mounts := r.channelMounts(socketDir(r.cfg.RunDir, spec.OfficeKey), keyFile(r.cfg.RunDir, spec.OfficeKey))
	for _, m := range spec.Mounts {
		mounts = append(mounts, mount.Mount{Type: mount.TypeBind, Source: m.HostPath, Target: m.RuntimePath, ReadOnly: m.ReadOnly})
	}
	for _, v := range spec.VaultFiles {
		mounts = append(mounts, mount.Mount{Type: mount.TypeBind, Source: v.HostPath, Target: v.RuntimePath, ReadOnly: true})
	}
	var agentArgs []string
	if relays(spec) {
		m, args, err := r.egressMount(spec)
		if err != nil {
			return "", err
		}
		mounts, agentArgs = append(mounts, m), args
	}
	cfg, hc := r.containerConfig(from, spec.OfficeRuntimePath, labels, mounts, netID, limits)
	cfg.Entrypoint = append(cfg.Entrypoint, agentArgs...)
	res, err := r.api.ContainerCreate(ctx, client.ContainerCreateOptions{Name: name, Config: cfg, HostConfig: hc})
	if err != nil {
		if engine.IsConflict(err) {
			if st, ierr := r.inspect(ctx, name); ierr == nil && st.exists {
				return st.id, nil
			}
		}
		return "", engine.Classify(err, "create container "+name)
	}
	r.log.Info("created container", "office_key", spec.OfficeKey, "container", name, "id", shortID(res.ID), "from", from)
	r.event("created")
	r.changed(ctx, spec.OfficeKey, because)
	return res.ID, nil
}

// changed tells the Changed hook that key's runtime was made: re-created
// when because says why.
func (r *Runtime) changed(ctx context.Context, key, because string) {
	if r.cfg.Changed != nil {
		r.cfg.Changed(ctx, sandbox.Made(key, because))
	}
}

// channelMounts are the mounts of the agent and its channel: the socket
// dir and the key file on the host (an office's, or a pool member's).
func (r *Runtime) channelMounts(sockDir, keyFile string) []mount.Mount {
	return []mount.Mount{
		{Type: mount.TypeBind, Source: r.agentBin, Target: agentPath, ReadOnly: true},
		{Type: mount.TypeBind, Source: sockDir, Target: runPath},
		{Type: mount.TypeBind, Source: keyFile, Target: keyPath, ReadOnly: true},
	}
}

// containerConfig is how every hutch container of this mode is made,
// for an office or for the warm pool: the agent as init, every
// capability but the kept few dropped, no new privileges, no restart.
func (r *Runtime) containerConfig(from, workDir string, labels map[string]string, mounts []mount.Mount, netID string, limits sandbox.Limits) (*container.Config, *container.HostConfig) {
	stopTimeout := 5
	hc := &container.HostConfig{
		Mounts:        mounts,
		NetworkMode:   container.NetworkMode(netID),
		CapDrop:       []string{"ALL"},
		CapAdd:        managed.KeptCapabilities,
		SecurityOpt:   []string{"no-new-privileges"},
		RestartPolicy: container.RestartPolicy{Name: container.RestartPolicyDisabled},
		Resources:     resources(limits),
	}
	if r.cfg.Engine.Flavor == engine.FlavorPodman {
		// Podman's default rlimits exceed what a process without
		// CAP_SYS_RESOURCE may set on some hosts; ask for what it can.
		hc.Resources.Ulimits = []*container.Ulimit{{Name: "nofile", Soft: 20000, Hard: 20000}, {Name: "nproc", Soft: 32768, Hard: 32768}}
	} else {
		hc.ExtraHosts = []string{r.cfg.Engine.HostGateway() + ":host-gateway"}
	}
	cfg := &container.Config{
		Image:       from,
		Entrypoint:  []string{agentPath, "agent", "--init", "--listen", runPath + "/" + socketName, "--key-file", keyPath},
		Cmd:         []string{},
		WorkingDir:  workDir,
		Labels:      labels,
		StopTimeout: &stopTimeout,
	}
	return cfg, hc
}

func resources(l sandbox.Limits) container.Resources {
	pids := l.Pids
	return container.Resources{
		NanoCPUs:   int64(l.CPUs * 1e9),
		Memory:     l.MemoryBytes,
		MemorySwap: l.MemoryBytes, // swap equal to memory: no swap
		PidsLimit:  &pids,
	}
}

// recreate replaces a drifted container. When only mounts, credentials,
// network or agent changed, the writable layer is kept: commit it to a
// snapshot image, remove the container, create the new one from the
// snapshot, drop the snapshot's tag. A crash between steps is resumed by
// the next ensure (the snapshot outlives the old container). A new base
// image cannot keep the layer: the container starts fresh from it.
func (r *Runtime) recreate(ctx context.Context, s *session, spec sandbox.Spec, d desired, fp string, st containerState) error {
	name := ContainerName(spec.OfficeKey)
	from := r.cfg.Image
	keep := st.imageID == d.ImageID
	if keep {
		opts := client.ContainerCommitOptions{
			Reference: SnapshotRef(spec.OfficeKey),
			Comment:   "hutch: writable layer of " + name + " kept across a re-create",
			Changes:   []string{"LABEL " + engine.LabelSnapshotOf + "=" + name},
		}
		if r.cfg.Engine.Flavor == engine.FlavorPodman {
			// Podman 4's /commit decodes a JSON body and fails with
			// "Decode(): EOF" on none; it does not use what it decodes.
			// Docker reads no body as "the container's own config", so it
			// is sent none.
			opts.Config = &container.Config{}
		}
		_, err := r.api.ContainerCommit(ctx, st.id, opts)
		if err != nil {
			return engine.Classify(err, "snapshot container "+name)
		}
		from = SnapshotRef(spec.OfficeKey)
	} else {
		r.log.Warn("the image changed; the container starts fresh from it and its writable layer is not kept",
			"office_key", spec.OfficeKey, "old_image_id", st.imageID, "new_image_id", d.ImageID)
	}
	because := recreateReason(st, d)
	r.log.Info("re-creating container", "office_key", spec.OfficeKey, "container", name, "because", because)
	r.event("recreated")
	if _, err := r.api.ContainerRemove(ctx, st.id, client.ContainerRemoveOptions{Force: true}); err != nil && !engine.IsNotFound(err) {
		return engine.Classify(err, "remove drifted container "+name)
	}
	if st.member != "" {
		r.dropMemberFiles(ctx, st.id, st.member)
	}
	if err := r.createAndStart(ctx, s, spec, d, fp, from, because); err != nil {
		return err
	}
	if keep {
		r.dropSnapshot(ctx, spec.OfficeKey)
	}
	// The old container may itself have run from an earlier snapshot,
	// now untagged; once nothing uses it, its layers can go.
	r.dropSnapshotImage(ctx, st.imageRef)
	return nil
}

// labelBuiltFrom holds a short digest of each part of what a container
// was built from ("agent=…,credentials=…"), so a re-create can say which
// parts changed; the fingerprint alone cannot.
const labelBuiltFrom = "hutch.built-from"

// builtFromParts names the parts of desired as labelBuiltFrom and
// re-create reasons name them.
var builtFromParts = []string{"image", "mounts", "credentials", "network", "agent", "hardening", "limits"}

// parts is d's labelBuiltFrom value.
func (d desired) parts() string {
	mounts := slices.Clone(d.Mounts)
	slices.SortFunc(mounts, func(a, b sandbox.Mount) int { return strings.Compare(a.RuntimePath, b.RuntimePath) })
	values := map[string]any{
		"image":       [2]string{d.ImageRef, d.ImageID},
		"mounts":      mounts,
		"credentials": d.Vault,
		"network":     d.Network,
		"agent":       d.Agent,
		"hardening":   d.Hardening,
		"limits":      d.Limits,
	}
	out := make([]string, 0, len(builtFromParts))
	for _, name := range builtFromParts {
		data, _ := json.Marshal(values[name])
		sum := sha256.Sum256(data)
		out = append(out, name+"="+hex.EncodeToString(sum[:4]))
	}
	return strings.Join(out, ",")
}

// recreateReason says why the container st no longer fits d: which parts
// of what it was built from changed, as far as its labels tell (a
// container made before labelBuiltFrom existed tells only its image).
func recreateReason(st containerState, d desired) string {
	if st.member != "" && st.fingerprint == "" {
		return "it came from the warm pool and stopped; a pooled runtime's mounts end with its run"
	}
	old := map[string]string{}
	for _, kv := range strings.Split(st.labels[labelBuiltFrom], ",") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			old[k] = v
		}
	}
	var changed []string
	if len(old) > 0 {
		for _, kv := range strings.Split(d.parts(), ",") {
			k, v, _ := strings.Cut(kv, "=")
			if old[k] != v {
				changed = append(changed, k)
			}
		}
	} else if st.imageID != d.ImageID {
		changed = []string{"image"}
	}
	if len(changed) == 0 {
		return "what it was built from changed"
	}
	return "what it was built from changed (" + strings.Join(changed, ", ") + ")"
}

// dropSnapshotImage removes an untagged snapshot image by id once no
// container or newer snapshot builds on it; the engine refuses while one
// does, which is fine: the last user's removal takes it.
func (r *Runtime) dropSnapshotImage(ctx context.Context, id string) {
	if id == "" {
		return
	}
	img, err := r.api.ImageInspect(ctx, id)
	if err != nil || img.Config == nil || img.Config.Labels[engine.LabelSnapshotOf] == "" {
		return
	}
	if _, err := r.api.ImageRemove(ctx, id, client.ImageRemoveOptions{PruneChildren: true}); err != nil && !engine.IsNotFound(err) && !engine.IsConflict(err) {
		r.log.Debug("snapshot image kept", "image", shortID(id), "error", err)
	}
}

func (r *Runtime) snapshotExists(ctx context.Context, key string) (bool, error) {
	res, err := r.api.ImageInspect(ctx, SnapshotRef(key))
	if err == nil {
		// A snapshot carries the labels of the container it was taken
		// from: another installation's is that installation's writable
		// layer, never ours to resume.
		var labels map[string]string
		if res.Config != nil {
			labels = res.Config.Labels
		}
		if owner := labels[engine.LabelStateDir]; owner != r.cfg.StateDir {
			return false, errdefs.New(errdefs.ErrConflict, fmt.Sprintf(
				"The snapshot %s belongs to another hutch installation (state dir %q), which is re-creating its container for the same conversation on this engine; hutch leaves it alone. Serve this conversation from that installation, or give this one an engine of its own.",
				SnapshotRef(key), owner))
		}
		return true, nil
	}
	if engine.IsNotFound(err) {
		return false, nil
	}
	return false, engine.Classify(err, "inspect snapshot "+SnapshotRef(key))
}

// dropSnapshot removes the snapshot's tag. The new container still uses
// its layers, so the engine keeps them as long as the container lives.
func (r *Runtime) dropSnapshot(ctx context.Context, key string) {
	var err error
	if r.cfg.Engine.Flavor == engine.FlavorPodman {
		// Podman's forced image removal would remove the new container
		// too; see engine.PodmanUntag.
		err = r.cfg.Engine.PodmanUntag(ctx, SnapshotRef(key))
	} else {
		_, err = r.api.ImageRemove(ctx, SnapshotRef(key), client.ImageRemoveOptions{Force: true})
	}
	if err != nil && !engine.IsNotFound(err) {
		r.log.Warn("could not remove snapshot tag", "office_key", key, "error", err)
	}
}

// ensureNetwork makes sure the office's bridge network exists (on a /29
// of the pool) and returns its id. Docker 20.10 accepts two networks of
// one name, so two processes racing to create it can both succeed (on
// different subnets); every creator then lists the networks of that name
// this hutch owns and keeps the oldest id, removing its own if it lost.
// Containers are attached by id, so a stray twin is never ambiguous.
func (r *Runtime) ensureNetwork(ctx context.Context, spec sandbox.Spec) (string, error) {
	return r.makeNetwork(ctx, NetworkName(spec.OfficeKey), spec.OfficeKey, map[string]string{
		engine.LabelManaged:  "true",
		engine.LabelMode:     string(sandbox.KindImage),
		engine.LabelOffice:   spec.OfficeKey,
		engine.LabelStateDir: r.cfg.StateDir,
	})
}

// makeNetwork makes sure the bridge network name exists, on a /29 of the
// pool first tried at key's index, labelled labels, and returns its id.
func (r *Runtime) makeNetwork(ctx context.Context, name, key string, labels map[string]string) (string, error) {
	if id, err := r.findNetwork(ctx, name); err != nil || id != "" {
		return id, err
	}
	// Hutch processes of one installation take a file lock first, so
	// they never race to create twins (a container start by name fails
	// while two exist); the twin cleanup below covers anything else.
	unlock, err := lockFile(filepath.Join(r.cfg.RunDir, "locks", "net-"+shortHash(key)+".lock"))
	if err != nil {
		return "", err
	}
	defer unlock()
	if id, err := r.findNetwork(ctx, name); err != nil || id != "" {
		return id, err
	}
	start := subnetIndex(key)
	var lastErr error
	for i := uint32(0); i < 64; i++ {
		sub, err := subnet(r.cfg.NetworkPool, start+i)
		if err != nil {
			return "", errdefs.New(errdefs.ErrInvalid, err.Error())
		}
		res, err := r.api.NetworkCreate(ctx, name, client.NetworkCreateOptions{
			Driver: "bridge",
			IPAM:   &network.IPAM{Config: []network.IPAMConfig{{Subnet: sub, Gateway: sub.Addr().Next()}}},
			Labels: labels,
		})
		if err == nil {
			winner, ferr := r.findNetwork(ctx, name)
			if ferr != nil {
				return "", ferr
			}
			if winner != "" && winner != res.ID {
				if _, rerr := r.api.NetworkRemove(ctx, res.ID, client.NetworkRemoveOptions{}); rerr != nil && !engine.IsNotFound(rerr) {
					r.log.Warn("could not remove a duplicate network", "network", name, "id", shortID(res.ID), "error", rerr)
				}
				return winner, nil
			}
			return res.ID, nil
		}
		lastErr = err
		if id, ferr := r.findNetwork(ctx, name); ferr == nil && id != "" {
			return id, nil // a racing hutch made it
		}
		if !subnetTaken(err) && !engine.IsConflict(err) {
			return "", engine.Classify(err, "create network "+name)
		}
	}
	return "", engine.Classify(lastErr, "create network "+name+": no free subnet in "+r.cfg.NetworkPool.String())
}

// lockFile takes an exclusive flock on path (created 0600), released by
// the returned func. The kernel drops it if the process dies.
func lockFile(path string) (func(), error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("lock dir: %w", err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return func() { _ = unix.Flock(int(f.Fd()), unix.LOCK_UN); _ = f.Close() }, nil
}

func shortHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:8])
}

// findNetwork returns the id of the oldest network of that exact name
// this hutch owns ("" when none), by the smallest id among equals.
func (r *Runtime) findNetwork(ctx context.Context, name string) (string, error) {
	res, err := r.api.NetworkList(ctx, client.NetworkListOptions{Filters: make(client.Filters).Add("name", name)})
	if err != nil {
		return "", engine.Classify(err, "list networks "+name)
	}
	var best network.Summary
	for _, n := range res.Items {
		if n.Name != name {
			continue // the name filter matches substrings
		}
		if n.Labels[engine.LabelStateDir] != r.cfg.StateDir {
			// The engine resolves a container's network by name when it
			// starts, so a twin made by someone else would break ours.
			return "", errdefs.New(errdefs.ErrConflict, fmt.Sprintf(
				"A network named %s exists that this hutch did not create (its state dir is %q, this one's is %q); remove it (docker network rm %s) or use another state dir",
				name, n.Labels[engine.LabelStateDir], r.cfg.StateDir, name))
		}
		if best.ID == "" || n.Created.Before(best.Created) || (n.Created.Equal(best.Created) && n.ID < best.ID) {
			best = n
		}
	}
	return best.ID, nil
}

// subnetTaken reports whether a network create failed because its subnet
// is in use: Docker says the pool "overlaps"; Podman 4 says the subnet "is
// already used on the host or by another config" (status 500).
func subnetTaken(err error) bool {
	msg := strings.ToLower(err.Error())
	return strings.Contains(msg, "overlap") || strings.Contains(msg, "is already used on the host")
}

// logsTail returns the last lines a container printed, for errors.
func (r *Runtime) logsTail(ctx context.Context, id string) string {
	rc, err := r.api.ContainerLogs(ctx, id, client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true, Tail: "10"})
	if err != nil {
		return ""
	}
	defer func() { _ = rc.Close() }()
	var out bytes.Buffer
	if _, err := stdcopy.StdCopy(&out, &out, rc); err != nil && !errors.Is(err, context.Canceled) && out.Len() == 0 {
		return ""
	}
	if out.Len() == 0 {
		return ""
	}
	return ": " + trimNL(out.String())
}
