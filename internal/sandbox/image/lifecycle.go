package image

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/moby/moby/client"

	"github.com/hutchsandbox/hutch/internal/agent"
	"github.com/hutchsandbox/hutch/internal/atomicfile"
	"github.com/hutchsandbox/hutch/internal/engine"
	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/sandbox/managed"
)

// runtimeState is what lasts only as long as one life of a container: a
// boost or temporary limits. It is tied to the container id and its start
// time, so a restart (by hutch, idle stop, or the engine) ends it even if
// hutch was not running to see the stop.
type runtimeState struct {
	ContainerID string          `json:"containerId"`
	StartedAt   string          `json:"startedAt"`
	Boost       *sandbox.Limits `json:"boost,omitempty"`
	Temp        *sandbox.Limits `json:"temp,omitempty"`
}

func runtimeStatePath(stateDir, key string) string {
	return filepath.Join(stateDir, "conversations", key, "runtime.json")
}

// loadRuntimeState returns the boost and temporary limits of the life of
// the container st describes; none when it is not running (its next
// start clears the file), there is no file or the file is of an earlier
// life. A file that cannot be read or parsed fails closed, naming it, as
// every state file does: read as "no boost", it would silently drop a
// boost, and the next boost would overwrite it.
func loadRuntimeState(stateDir, key string, st containerState) (runtimeState, error) {
	if !st.running {
		return runtimeState{}, nil
	}
	path := runtimeStatePath(stateDir, key)
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return runtimeState{}, nil
	}
	var rs runtimeState
	if err == nil {
		err = json.Unmarshal(data, &rs)
	}
	if err != nil {
		return runtimeState{}, errdefs.New(errdefs.ErrFailedPrecondition, fmt.Sprintf(
			"Malformed runtime state in %s: %v; stop the runtime (hutch sandbox stop) to end its boost and temporary limits, or remove the file", path, err))
	}
	if rs.ContainerID != st.id || rs.StartedAt != st.startedAt {
		return runtimeState{}, nil
	}
	return rs, nil
}

func saveRuntimeState(stateDir, key string, rs runtimeState) error {
	p := runtimeStatePath(stateDir, key)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return err
	}
	data, err := json.MarshalIndent(rs, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(p, append(data, '\n'), 0o600)
}

func clearRuntimeState(stateDir, key string) {
	_ = os.Remove(runtimeStatePath(stateDir, key))
}

func prepareSocketDir(dir string) error {
	// Only ever called while no agent runs in it: what a past run of the
	// container left there (a link planted in place of the socket
	// included) goes. Removal does not follow links.
	if err := agent.RemoveSocketDir(dir); err != nil {
		return fmt.Errorf("runtime socket dir: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("runtime socket dir: %w", err)
	}
	return nil
}

// prepareChannel makes what an office's container mounts for its agent's
// channel: the socket dir and the channel key file (a run dir on tmpfs
// loses both when the host restarts, while the container stays).
func (r *Runtime) prepareChannel(officeKey string) error {
	if err := prepareSocketDir(socketDir(r.cfg.RunDir, officeKey)); err != nil {
		return err
	}
	key, err := r.channelKey(officeKey)
	if err != nil {
		return err
	}
	return agent.WriteChannelKey(keyFile(r.cfg.RunDir, officeKey), key)
}

// readVerified is the run of the office's container that a process of
// this installation last checked, or "" (see verifiedFile).
func (r *Runtime) readVerified(officeKey string) string {
	data, err := os.ReadFile(verifiedFile(r.cfg.RunDir, officeKey)) //nolint:gosec // G304: hutch's own run dir, out of every runtime's reach
	if err != nil {
		return ""
	}
	return string(data)
}

// writeVerified records run as checked. A record that cannot be written
// costs the next process the check, nothing more.
func (r *Runtime) writeVerified(officeKey, run string) {
	if r.readVerified(officeKey) == run {
		return
	}
	if err := atomicfile.WriteFile(verifiedFile(r.cfg.RunDir, officeKey), []byte(run), 0o600); err != nil {
		r.log.Debug("record the checked run", "office_key", officeKey, "error", err)
	}
}

// sealChannel makes the socket dir immutable once the agent listens (see
// agent.SealSocketDir); where hutch cannot, the channel proof stands
// alone and the runtime can still write that directory.
func (r *Runtime) sealChannel(s *session) {
	dir := socketDir(r.cfg.RunDir, s.Key)
	if s.member != "" {
		dir = memberSocketDir(r.cfg.RunDir, s.member)
	}
	if err := agent.SealSocketDir(dir); err != nil {
		r.log.Debug("socket dir left writable from inside", "office_key", s.Key, "error", err)
	}
}

// channelKey is the key an office's agent proves it holds.
func (r *Runtime) channelKey(officeKey string) ([]byte, error) {
	return agent.ChannelKey(r.cfg.StateDir, officePurpose(officeKey))
}

// officePurpose names an office's channel key among those of the state
// dir's secret (a pool member's is memberPurpose).
func officePurpose(officeKey string) string { return "image\x00" + officeKey }

// effective is the limits an office's running container must have: the
// base limits, raised by a boost, overridden by temporary limits.
func (r *Runtime) effective(spec sandbox.Spec, st containerState) (sandbox.Limits, error) {
	base := spec.Limits.Over(managed.DefaultLimits)
	rs, err := loadRuntimeState(r.cfg.StateDir, spec.OfficeKey, st)
	if err != nil {
		return sandbox.Limits{}, err
	}
	eff := base
	if rs.Boost != nil {
		eff = rs.Boost.Over(eff)
	}
	if rs.Temp != nil {
		eff = rs.Temp.Over(eff)
	}
	return eff, nil
}

// applyLimits updates a container's limits live when they differ from
// what they must be; no re-create.
func (r *Runtime) applyLimits(ctx context.Context, spec sandbox.Spec, st containerState) error {
	if !r.cfg.Engine.CanUpdateLimits() {
		return nil // the limits are in the fingerprint: a change re-created the container
	}
	eff, err := r.effective(spec, st)
	if err != nil {
		return err
	}
	if sameLimits(eff, st.limits) {
		return nil
	}
	return r.update(ctx, st.id, ContainerName(spec.OfficeKey), eff)
}

func sameLimits(a, b sandbox.Limits) bool {
	return int64(a.CPUs*1e9) == int64(b.CPUs*1e9) && a.MemoryBytes == b.MemoryBytes && a.Pids == b.Pids
}

func (r *Runtime) update(ctx context.Context, id, name string, l sandbox.Limits) error {
	res := resources(l)
	if _, err := r.api.ContainerUpdate(ctx, id, client.ContainerUpdateOptions{Resources: &res}); err != nil {
		return engine.Classify(err, "update limits of "+name)
	}
	r.log.Info("updated limits", "container", name, "cpus", l.CPUs, "memory_bytes", l.MemoryBytes, "pids", l.Pids)
	return nil
}

// List returns every runtime this hutch (this state dir) manages.
func (r *Runtime) List(ctx context.Context) ([]sandbox.Status, error) {
	res, err := r.api.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: r.ownedFilter()})
	if err != nil {
		return nil, engine.Classify(err, "list containers")
	}
	var out []sandbox.Status
	for _, c := range res.Items {
		key := r.officeOf(c)
		if key == "" {
			continue
		}
		st, err := r.Status(ctx, key)
		if err != nil {
			if errdefs.IsNotFound(err) {
				continue // removed meanwhile
			}
			return nil, err
		}
		out = append(out, st)
	}
	return out, nil
}

func (r *Runtime) ownedFilter() client.Filters {
	return make(client.Filters).
		Add("label", engine.LabelManaged+"=true").
		Add("label", engine.LabelMode+"="+string(sandbox.KindImage)).
		Add("label", engine.LabelStateDir+"="+r.cfg.StateDir)
}

// Status describes one office's runtime.
func (r *Runtime) Status(ctx context.Context, key string) (sandbox.Status, error) {
	st, err := r.inspect(ctx, ContainerName(key))
	if err != nil {
		return sandbox.Status{}, err
	}
	out := sandbox.Status{OfficeKey: key, Name: ContainerName(key), State: sandbox.StateMissing}
	if s, ok := r.sessions.Lookup(key); ok {
		s.Lock()
		out.ActiveCommands, out.LastActivity = s.Active(), s.LastActivity()
		s.Unlock()
	}
	if !st.exists {
		return out, nil
	}
	if st.labels[engine.LabelStateDir] != r.cfg.StateDir || st.labels[engine.LabelManaged] != "true" {
		return sandbox.Status{}, errdefs.New(errdefs.ErrConflict, fmt.Sprintf("Container %s exists but is not managed by this hutch (state dir %s); hutch never touches it", ContainerName(key), r.cfg.StateDir))
	}
	out.ID = st.id
	out.State = sandbox.StateStopped
	if st.running {
		out.State = sandbox.StateRunning
		if t, err := time.Parse(time.RFC3339Nano, st.startedAt); err == nil {
			out.StartedAt = t
		}
	}
	out.Platform = st.labels[engine.LabelPlatform]
	out.ConversationID = st.labels[engine.LabelConversation]
	out.Image, out.ImageID = st.labels[engine.LabelImage], st.imageID
	out.Fingerprint = st.fingerprint
	out.Recreated, out.RecreatedBecause = sandbox.RecreatedFrom(st.labels)
	out.Limits = st.limits
	rs, err := loadRuntimeState(r.cfg.StateDir, key, st)
	if err != nil {
		return sandbox.Status{}, err
	}
	out.Boosted, out.TempLimits = rs.Boost != nil, rs.Temp != nil
	return out, nil
}

// owned inspects an office's container and refuses one this hutch did not make.
func (r *Runtime) owned(ctx context.Context, key string) (containerState, error) {
	st, err := r.inspect(ctx, ContainerName(key))
	if err != nil {
		return st, err
	}
	if !st.exists {
		return st, errdefs.New(errdefs.ErrNotFound, fmt.Sprintf("No runtime for office %s", key))
	}
	if st.labels[engine.LabelStateDir] != r.cfg.StateDir || st.labels[engine.LabelManaged] != "true" {
		return st, errdefs.New(errdefs.ErrConflict, fmt.Sprintf("Container %s is not managed by this hutch; hutch never stops or removes it", ContainerName(key)))
	}
	return st, nil
}

// Stop stops an office's container once no command runs in it.
func (r *Runtime) Stop(ctx context.Context, key string) error {
	s := r.sessions.Get(key)
	s.Lock()
	defer s.Unlock()
	st, err := r.owned(ctx, key)
	if err != nil {
		return err
	}
	return r.stopLocked(ctx, s, st)
}

func (r *Runtime) stopLocked(ctx context.Context, s *session, st containerState) error {
	clearRuntimeState(r.cfg.StateDir, s.Key)
	if !st.running {
		return nil
	}
	timeout := 5
	if _, err := r.api.ContainerStop(ctx, st.id, client.ContainerStopOptions{Timeout: &timeout}); err != nil && !engine.IsNotFound(err) {
		return engine.Classify(err, "stop container "+ContainerName(s.Key))
	}
	r.log.Info("stopped container", "office_key", s.Key)
	return nil
}

// Remove deletes an office's container, snapshot and network. The office
// directory and the vault stay.
func (r *Runtime) Remove(ctx context.Context, key string) error {
	s := r.sessions.Get(key)
	s.Lock()
	defer s.Unlock()
	st, err := r.owned(ctx, key)
	if err != nil && !(errdefs.IsNotFound(err) && r.hasLeftovers(ctx, key)) {
		return err
	}
	if st.exists {
		if _, err := r.api.ContainerRemove(ctx, st.id, client.ContainerRemoveOptions{Force: true}); err != nil && !engine.IsNotFound(err) {
			return engine.Classify(err, "remove container "+ContainerName(key))
		}
		r.dropSnapshotImage(ctx, st.imageRef)
		if st.member != "" {
			r.dropMemberFiles(ctx, st.id, st.member)
		}
	}
	r.dropSnapshot(ctx, key)
	if err := r.removeNetwork(ctx, key); err != nil {
		return err
	}
	clearRuntimeState(r.cfg.StateDir, key)
	_ = agent.RemoveSocketDir(socketDir(r.cfg.RunDir, key))
	_ = os.Remove(keyFile(r.cfg.RunDir, key))
	_ = os.Remove(verifiedFile(r.cfg.RunDir, key))
	r.log.Info("removed runtime", "office_key", key)
	return nil
}

// hasLeftovers reports whether an office without a container still has a
// network or snapshot of this hutch, which Remove then cleans up.
func (r *Runtime) hasLeftovers(ctx context.Context, key string) bool {
	if ok, _ := r.snapshotExists(ctx, key); ok {
		return true
	}
	id, err := r.findNetwork(ctx, NetworkName(key))
	return err == nil && id != ""
}

func (r *Runtime) removeNetwork(ctx context.Context, key string) error {
	return r.removeNamedNetwork(ctx, NetworkName(key))
}

// removeNamedNetwork removes every network of the name this hutch owns:
// a race may have left a twin.
func (r *Runtime) removeNamedNetwork(ctx context.Context, name string) error {
	for {
		id, err := r.findNetwork(ctx, name)
		if err != nil || id == "" {
			return err
		}
		if _, err := r.api.NetworkRemove(ctx, id, client.NetworkRemoveOptions{}); err != nil && !engine.IsNotFound(err) {
			return engine.Classify(err, "remove network "+name)
		}
	}
}

// Boost raises an office's limits until its container stops.
func (r *Runtime) Boost(ctx context.Context, key string, boost sandbox.Limits) (sandbox.Status, error) {
	if boost == (sandbox.Limits{}) {
		boost = r.cfg.Boost
	}
	return r.setRuntimeLimits(ctx, key, func(rs *runtimeState) { rs.Boost = &boost })
}

// SetLimits sets temporary limits until the office's container stops.
func (r *Runtime) SetLimits(ctx context.Context, key string, l sandbox.Limits) (sandbox.Status, error) {
	return r.setRuntimeLimits(ctx, key, func(rs *runtimeState) {
		if rs.Temp != nil {
			merged := l.Over(*rs.Temp)
			l = merged
		}
		rs.Temp = &l
	})
}

func (r *Runtime) setRuntimeLimits(ctx context.Context, key string, change func(*runtimeState)) (sandbox.Status, error) {
	if !r.cfg.Engine.CanUpdateLimits() {
		return sandbox.Status{}, errdefs.New(errdefs.ErrNotSupported, fmt.Sprintf(
			"The container engine (Podman %s) cannot change a running container's limits: its Docker-compatible API has no container update before Podman 5.1. Boosts and temporary limits need Docker or Podman 5.1 or later; limits in settings still apply, by re-creating the container.",
			r.cfg.Engine.ServerVersion))
	}
	s := r.sessions.Get(key)
	s.Lock()
	st, err := r.owned(ctx, key)
	if err != nil {
		s.Unlock()
		return sandbox.Status{}, err
	}
	if !st.running {
		s.Unlock()
		return sandbox.Status{}, sandbox.NotRunning(key)
	}
	rs, err := loadRuntimeState(r.cfg.StateDir, key, st)
	if err != nil {
		s.Unlock()
		return sandbox.Status{}, err
	}
	rs.ContainerID, rs.StartedAt = st.id, st.startedAt
	change(&rs)
	// Unset fields keep the container's current values.
	eff := st.limits
	if rs.Boost != nil {
		eff = rs.Boost.Over(eff)
	}
	if rs.Temp != nil {
		eff = rs.Temp.Over(eff)
	}
	err = r.update(ctx, st.id, ContainerName(key), eff)
	if err == nil {
		err = saveRuntimeState(r.cfg.StateDir, key, rs)
	}
	s.Unlock()
	if err != nil {
		return sandbox.Status{}, err
	}
	return r.Status(ctx, key)
}

// StopIdle stops every runtime this process has seen that has no command
// running and none started within idle. A command in flight always
// counts as activity.
func (r *Runtime) StopIdle(ctx context.Context, idle time.Duration) ([]string, error) {
	sessions := r.sessions.All()
	var stopped []string
	var errs []error
	for _, s := range sessions {
		s.Lock()
		if !s.IdleFor(idle) {
			s.Unlock()
			continue
		}
		st, err := r.inspect(ctx, ContainerName(s.Key))
		if err == nil && st.exists && st.running {
			if err = r.stopLocked(ctx, s, st); err == nil {
				stopped = append(stopped, s.Key)
			}
		}
		if err != nil {
			errs = append(errs, err)
		}
		s.Unlock()
	}
	return stopped, errors.Join(errs...)
}

// Reconcile runs at start: it adopts the containers of known offices
// (their idle clocks start now) and removes containers, networks and
// snapshots this hutch labelled whose office it can no longer account
// for. Commands orphaned by a crashed hutch died with its connection:
// the agent kills a command whose caller went away.
func (r *Runtime) Reconcile(ctx context.Context, known func(officeKey string) bool) (sandbox.ReconcileReport, error) {
	var rep sandbox.ReconcileReport
	res, err := r.api.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: r.ownedFilter()})
	if err != nil {
		return rep, engine.Classify(err, "list containers")
	}
	now := time.Now()
	for _, c := range res.Items {
		key := r.officeOf(c)
		if key == "" {
			continue
		}
		if known(key) {
			s := r.sessions.Get(key)
			s.Lock()
			s.Adopt(now)
			s.Unlock()
			rep.Adopted = append(rep.Adopted, key)
			continue
		}
		if err := r.Remove(ctx, key); err != nil {
			return rep, err
		}
		rep.Removed = append(rep.Removed, key)
	}
	nets, err := r.listOwnedNetworks(ctx)
	if err != nil {
		return rep, err
	}
	for _, key := range nets {
		if !known(key) {
			if err := r.removeNetwork(ctx, key); err != nil {
				return rep, err
			}
		}
	}
	return rep, nil
}

func (r *Runtime) listOwnedNetworks(ctx context.Context) ([]string, error) {
	res, err := r.api.NetworkList(ctx, client.NetworkListOptions{Filters: r.ownedFilter()})
	if err != nil {
		return nil, engine.Classify(err, "list networks")
	}
	var keys []string
	for _, n := range res.Items {
		if k := n.Labels[engine.LabelOffice]; k != "" {
			keys = append(keys, k)
		}
	}
	return keys, nil
}
