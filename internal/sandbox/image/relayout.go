package image

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/hutchsandbox/hutch/internal/engine"
	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/projection"
)

// LabelRelayout marks a snapshot image taken to move a container from the
// raw-id layout to the office layout. Its value is what re-creating the
// container needs (see relayoutPlan), so that a hutch that died between
// removing the old container and creating the new one can finish the job
// from the image alone. The value is base64url-encoded JSON: Docker and
// Podman parse a commit's LABEL change with different quoting rules, and
// base64url needs none.
const LabelRelayout = "hutch.relayout"

// relayoutVersion is the version of the plan LabelRelayout carries. A plan
// of another version is left alone.
const relayoutVersion = 1

// LayoutMove says where one conversation's paths moved.
type LayoutMove struct {
	RawID, Platform, OfficeKey string
	// HostPaths maps legacy host paths to their office paths (exact path
	// or path prefix on a component boundary).
	HostPaths map[string]string
	// GuestPaths maps legacy in-container paths (e.g. /workspace/<rawId>)
	// to office ones (/workspace/<officeKey>).
	GuestPaths map[string]string
}

// LegacyLayoutMove is the move of one conversation from the raw-id layout
// (<ws>/<rawID>, <stateDir>/vaults/<legacyVaultKey>,
// <stateDir>/conversations/<rawID>, seen inside as
// /workspace/<rawID>) to its office (the same places named by officeKey).
// An empty legacyVaultKey means the conversation had no vault.
func LegacyLayoutMove(ws, stateDir, rawID, legacyVaultKey, platform, officeKey string) LayoutMove {
	mv := LayoutMove{
		RawID:     rawID,
		Platform:  platform,
		OfficeKey: officeKey,
		HostPaths: map[string]string{
			filepath.Join(ws, rawID):                        filepath.Join(ws, officeKey),
			filepath.Join(stateDir, "conversations", rawID): filepath.Join(stateDir, "conversations", officeKey),
		},
		GuestPaths: map[string]string{
			path.Join(projection.RuntimeRoot, rawID): path.Join(projection.RuntimeRoot, officeKey),
		},
	}
	if legacyVaultKey != "" {
		mv.HostPaths[filepath.Join(stateDir, "vaults", legacyVaultKey)] = filepath.Join(stateDir, "vaults", officeKey)
	}
	return mv
}

// RelayoutReport says what Relayout did.
type RelayoutReport struct {
	// Migrated are the containers (by their new names) re-created on
	// office paths.
	Migrated []string
	// Resumed are the containers (by their new names) whose interrupted
	// re-create was finished.
	Resumed []string
	// Cleaned are the snapshot tags removed that an interrupted re-create
	// no longer needed.
	Cleaned []string
	// Failed maps a container (by its old name) to why it was not moved.
	// It is left in place; when it was already removed, its writable
	// layer stays in its snapshot image and the next call retries.
	Failed map[string]string
}

func (r *RelayoutReport) fail(name string, err error) {
	if r.Failed == nil {
		r.Failed = map[string]string{}
	}
	r.Failed[name] = err.Error()
}

// relayoutPlan is what LabelRelayout carries: everything needed to create
// the new container once the old one is gone.
type relayoutPlan struct {
	V         int    `json:"v"`
	StateDir  string `json:"stateDir"`
	OfficeKey string `json:"officeKey"`
	// Name is the new container's name.
	Name string `json:"name"`
	// OldName and OldID are the container being replaced.
	OldName string `json:"oldName"`
	OldID   string `json:"oldId"`
	// Running says the old container ran, so the new one is started.
	Running bool `json:"running"`
	// Config and HostConfig create the new container (Config.Image is
	// the snapshot).
	Config     *container.Config     `json:"config"`
	HostConfig *container.HostConfig `json:"hostConfig"`
	// Networks are connected after create, besides HostConfig.NetworkMode.
	Networks []string `json:"networks,omitempty"`
}

func encodePlan(p relayoutPlan) (string, error) {
	data, err := json.Marshal(p)
	if err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(data), nil
}

// decodePlan reads a LabelRelayout value. Anything else is not a plan:
// notably the empty value every migrated container carries (see
// carryLabels), which a runtime re-create's snapshot inherits.
func decodePlan(v string) (relayoutPlan, bool) {
	data, err := base64.RawURLEncoding.DecodeString(v)
	if err != nil || len(data) == 0 {
		return relayoutPlan{}, false
	}
	var p relayoutPlan
	if json.Unmarshal(data, &p) != nil || p.V != relayoutVersion || p.Name == "" || p.OfficeKey == "" || p.Config == nil || p.HostConfig == nil {
		return relayoutPlan{}, false
	}
	return p, true
}

// Relayout moves the managed containers of this hutch (stateDir) that
// bind-mount raw-id layout paths onto the office paths moves name, keeping
// each container's writable layer through a snapshot image. It runs before
// the image runtime serves (hutch's boot migration), so no command is in
// flight and no runtime provisions the same offices.
//
// It first finishes what an interrupted earlier call left (snapshots
// carrying LabelRelayout), then moves every container whose mounts or
// working dir translate. A container already on office paths, or of
// another state dir, is not touched, so a second call does nothing. The
// errors of one container are reported in Failed and do not stop the
// others; an engine that does not answer is an error.
func Relayout(ctx context.Context, eng *engine.Engine, stateDir string, moves []LayoutMove, log *slog.Logger) (RelayoutReport, error) {
	var rep RelayoutReport
	if eng == nil || eng.Client == nil {
		return rep, errors.New("relayout: no engine")
	}
	if !filepath.IsAbs(stateDir) {
		return rep, errdefs.New(errdefs.ErrInvalid, "relayout: state dir must be an absolute path")
	}
	for _, mv := range moves {
		if mv.OfficeKey == "" || strings.ContainsRune(mv.OfficeKey, '/') {
			return rep, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("relayout: the move of conversation %q has no valid office key", mv.RawID))
		}
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	rl := &relayouter{eng: eng, api: eng.Client, stateDir: stateDir, log: log.With("step", "relayout")}
	done, err := rl.resume(ctx, &rep)
	if err != nil {
		return rep, err
	}
	res, err := rl.api.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: make(client.Filters).
		Add("label", engine.LabelManaged+"=true").
		Add("label", engine.LabelStateDir+"="+stateDir)})
	if err != nil {
		return rep, engine.Classify(err, "list containers")
	}
	items := res.Items
	sort.Slice(items, func(i, j int) bool { return items[i].ID < items[j].ID })
	for _, c := range items {
		if done[c.ID] || c.Labels[engine.LabelStateDir] != stateDir {
			continue
		}
		name, newName, err := rl.migrate(ctx, c.ID, moves)
		switch {
		case err != nil && fatal(ctx, err):
			return rep, err
		case err != nil:
			rep.fail(name, err)
			rl.log.Warn("container not moved to its office paths", "container", name, "error", err)
		case newName != "":
			rep.Migrated = append(rep.Migrated, newName)
		}
	}
	return rep, nil
}

// fatal reports whether an error ends the whole run: the engine stopped
// answering or the caller gave up, so every other container would fail
// the same way.
func fatal(ctx context.Context, err error) bool {
	return ctx.Err() != nil || errdefs.IsUnavailable(err)
}

type relayouter struct {
	eng      *engine.Engine
	api      *client.Client
	stateDir string
	log      *slog.Logger
}

// resume finishes the moves an interrupted call left behind, found by
// their snapshots. It returns the old containers it accounted for, which
// the caller must not move again.
func (rl *relayouter) resume(ctx context.Context, rep *RelayoutReport) (map[string]bool, error) {
	done := map[string]bool{}
	res, err := rl.api.ImageList(ctx, client.ImageListOptions{Filters: make(client.Filters).Add("label", LabelRelayout)})
	if err != nil {
		return done, engine.Classify(err, "list relayout snapshots")
	}
	type pending struct {
		plan relayoutPlan
		id   string
	}
	var todo []pending
	for _, img := range res.Items {
		p, ok := decodePlan(img.Labels[LabelRelayout])
		if !ok || p.StateDir != rl.stateDir || !hasTag(img.RepoTags) {
			continue
		}
		// Only a snapshot still under its tag is pending: once the tag
		// is dropped the image lives on untagged under the new container
		// (and is listed), but its job is done. The tag may also have
		// moved on to a runtime re-create's snapshot.
		tagged, err := rl.snapshotID(ctx, p.OfficeKey)
		if err != nil {
			return done, err
		}
		if tagged == "" || trimDigest(tagged) != trimDigest(img.ID) {
			continue
		}
		todo = append(todo, pending{p, img.ID})
	}
	sort.Slice(todo, func(i, j int) bool { return todo[i].plan.Name < todo[j].plan.Name })
	for _, t := range todo {
		p := t.plan
		done[p.OldID] = true
		ref := SnapshotRef(p.OfficeKey)
		outcome, err := rl.resumeOne(ctx, p, t.id)
		switch {
		case err != nil && fatal(ctx, err):
			return done, err
		case err != nil:
			rep.fail(p.OldName, err)
			rl.log.Warn("could not finish an interrupted move to office paths", "container", p.OldName, "new_container", p.Name, "snapshot", ref, "error", err)
		case outcome == resumedCreate:
			rep.Resumed = append(rep.Resumed, p.Name)
		case outcome == resumedCleaned:
			rep.Cleaned = append(rep.Cleaned, ref)
		case outcome == resumedLeft:
			// The old container is still whole and the tag gone: the
			// container pass moves it again (or says why it cannot).
			delete(done, p.OldID)
			rep.Cleaned = append(rep.Cleaned, ref)
		}
	}
	return done, nil
}

type resumeOutcome int

const (
	resumedCreate  resumeOutcome = iota + 1 // the new container was made from the snapshot
	resumedCleaned                          // the new container existed: only the tag went
	resumedLeft                             // the old container is whole; the tag went
)

func (rl *relayouter) resumeOne(ctx context.Context, p relayoutPlan, snapID string) (resumeOutcome, error) {
	ref := SnapshotRef(p.OfficeKey)
	cur, err := rl.api.ContainerInspect(ctx, p.Name, client.ContainerInspectOptions{})
	switch {
	case err == nil:
		if trimDigest(cur.Container.Image) == trimDigest(snapID) {
			// Created, perhaps not yet started, before the tag went.
			rl.log.Info("finishing an interrupted move: the new container exists", "container", p.Name, "snapshot", ref)
			err := rl.finishCreated(ctx, p, cur.Container.ID, cur.Container.State != nil && cur.Container.State.Running)
			rl.dropTag(ctx, ref)
			return resumedCleaned, err
		}
		_, ierr := rl.api.ContainerInspect(ctx, p.OldID, client.ContainerInspectOptions{})
		switch {
		case ierr == nil:
			// Something else took the new name before the old container
			// went; the old one still holds its layer.
			rl.dropTag(ctx, ref)
			return resumedLeft, nil
		case !engine.IsNotFound(ierr):
			return 0, engine.Classify(ierr, "inspect container "+p.OldName)
		}
		return 0, errdefs.New(errdefs.ErrConflict, fmt.Sprintf(
			"container %s exists but was not made from snapshot %s, which holds the only copy of %s's writable layer; remove %s (docker rm -f %s) and run the migration again",
			p.Name, ref, p.OldName, p.Name, p.Name))
	case !engine.IsNotFound(err):
		return 0, engine.Classify(err, "inspect container "+p.Name)
	}
	// The snapshot is complete (a commit is atomic), so the old container
	// may go if it is still there.
	if err := rl.removeOld(ctx, p); err != nil {
		return 0, err
	}
	rl.log.Info("finishing an interrupted move to office paths", "container", p.OldName, "new_container", p.Name, "snapshot", ref)
	if err := rl.create(ctx, p); err != nil {
		return 0, err
	}
	return resumedCreate, nil
}

// migrate moves one container if its paths translate. It returns the
// container's name, and the new name when it was moved. The steps are
// ordered so that the snapshot exists before the old container goes and
// carries all the rest: wherever a hutch dies, resume finishes the job.
func (rl *relayouter) migrate(ctx context.Context, id string, moves []LayoutMove) (name, newName string, err error) {
	p, name, err := rl.plan(ctx, id, moves)
	if err != nil || p == nil {
		return name, "", err
	}
	rl.log.Info("moving container to its office paths", "container", name, "new_container", p.Name, "office_key", p.OfficeKey)
	if err := rl.snapshot(ctx, *p); err != nil {
		return name, "", err
	}
	if err := rl.removeOld(ctx, *p); err != nil {
		return name, "", err
	}
	if err := rl.create(ctx, *p); err != nil {
		return name, "", err
	}
	return name, p.Name, nil
}

// plan inspects a container and, if its paths translate by exactly one
// move, returns how to re-create it; nil when there is nothing to do.
func (rl *relayouter) plan(ctx context.Context, id string, moves []LayoutMove) (*relayoutPlan, string, error) {
	ins, err := rl.api.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if engine.IsNotFound(err) {
		return nil, id, nil // removed meanwhile
	}
	if err != nil {
		return nil, id, engine.Classify(err, "inspect container "+shortID(id))
	}
	c := ins.Container
	name := strings.TrimPrefix(c.Name, "/")
	if c.Config == nil || c.HostConfig == nil {
		return nil, name, nil
	}
	type match struct {
		mv  LayoutMove
		cfg *container.Config
		hc  *container.HostConfig
	}
	var matches []match
	for _, mv := range moves {
		if cfg, hc, ok := relocate(c.Config, c.HostConfig, mv); ok {
			matches = append(matches, match{mv, cfg, hc})
		}
	}
	switch len(matches) {
	case 0:
		return nil, name, nil // on office paths already, or none of these conversations'
	case 1:
	default:
		var convs []string
		for _, m := range matches {
			convs = append(convs, m.mv.Platform+"/"+m.mv.RawID)
		}
		return nil, name, errdefs.New(errdefs.ErrConflict, fmt.Sprintf(
			"container %s mounts the legacy paths of %d conversations (%s), so it belongs to no one office; it is left as it is",
			name, len(matches), strings.Join(convs, ", ")))
	}
	m := matches[0]
	newName := ContainerName(m.mv.OfficeKey)
	ref := SnapshotRef(m.mv.OfficeKey)
	if newName != name {
		other, err := rl.api.ContainerInspect(ctx, newName, client.ContainerInspectOptions{})
		switch {
		case err == nil:
			return nil, name, errdefs.New(errdefs.ErrConflict, fmt.Sprintf(
				"container %s of office %s exists already (id %s), so %s cannot take its name; remove one of them",
				newName, m.mv.OfficeKey, shortID(other.Container.ID), name))
		case !engine.IsNotFound(err):
			return nil, name, engine.Classify(err, "inspect container "+newName)
		}
	}
	// The tag is shared with the runtime's own re-create, whose snapshot
	// may be the only copy of a layer: never overwrite it.
	if snap, err := rl.snapshotID(ctx, m.mv.OfficeKey); err != nil {
		return nil, name, err
	} else if snap != "" {
		return nil, name, errdefs.New(errdefs.ErrConflict, fmt.Sprintf(
			"snapshot %s exists already (an interrupted re-create of office %s?); start hutch once so the runtime finishes it, then migrate again",
			ref, m.mv.OfficeKey))
	}
	p := &relayoutPlan{
		V:          relayoutVersion,
		StateDir:   rl.stateDir,
		OfficeKey:  m.mv.OfficeKey,
		Name:       newName,
		OldName:    name,
		OldID:      c.ID,
		Running:    c.State != nil && c.State.Running,
		Config:     carryConfig(m.cfg, c.ID, m.mv),
		HostConfig: carryHostConfig(m.hc),
	}
	p.Config.Image = ref
	p.HostConfig.NetworkMode, p.Networks = carryNetworks(c)
	return p, name, nil
}

// snapshot commits the old container's writable layer to the office's
// snapshot tag, with the plan in its labels.
func (rl *relayouter) snapshot(ctx context.Context, p relayoutPlan) error {
	label, err := encodePlan(p)
	if err != nil {
		return err
	}
	opts := client.ContainerCommitOptions{
		Reference: SnapshotRef(p.OfficeKey),
		Comment:   "hutch: writable layer of " + p.OldName + " kept across its move to office " + p.OfficeKey,
		Changes:   []string{"LABEL " + engine.LabelSnapshotOf + "=" + p.Name, "LABEL " + LabelRelayout + "=" + label},
	}
	if rl.eng.Flavor == engine.FlavorPodman {
		// Podman 4's /commit needs a JSON body; see recreate.
		opts.Config = &container.Config{}
	}
	if _, err := rl.api.ContainerCommit(ctx, p.OldID, opts); err != nil {
		return engine.Classify(err, "snapshot container "+p.OldName)
	}
	return nil
}

// removeOld removes the old container once its snapshot exists.
func (rl *relayouter) removeOld(ctx context.Context, p relayoutPlan) error {
	if _, err := rl.api.ContainerRemove(ctx, p.OldID, client.ContainerRemoveOptions{Force: true}); err != nil && !engine.IsNotFound(err) {
		return engine.Classify(err, "remove container "+p.OldName)
	}
	return nil
}

// create makes the new container from the snapshot, connects it, starts
// it if the old one ran, and drops the snapshot's tag.
func (rl *relayouter) create(ctx context.Context, p relayoutPlan) error {
	id, err := rl.createContainer(ctx, p)
	if err != nil {
		return err
	}
	err = rl.finishCreated(ctx, p, id, false)
	// The new container holds the layer now, started or not.
	rl.dropTag(ctx, SnapshotRef(p.OfficeKey))
	return err
}

func (rl *relayouter) createContainer(ctx context.Context, p relayoutPlan) (string, error) {
	ref := SnapshotRef(p.OfficeKey)
	cfg, hc := *p.Config, *p.HostConfig
	cfg.Image = ref
	if rl.networkGone(ctx, string(hc.NetworkMode)) {
		rl.log.Warn("the old container's network is gone; the new one is created without a network", "container", p.Name, "network", hc.NetworkMode)
		hc.NetworkMode = "none"
	}
	res, err := rl.api.ContainerCreate(ctx, client.ContainerCreateOptions{Name: p.Name, Config: &cfg, HostConfig: &hc})
	if err != nil {
		return "", engine.Classify(err, "create container "+p.Name+" from snapshot "+ref)
	}
	rl.log.Info("created container on office paths", "container", p.Name, "id", shortID(res.ID), "from", ref)
	return res.ID, nil
}

// finishCreated connects a new container to the old one's other networks
// and starts it if the old one ran.
func (rl *relayouter) finishCreated(ctx context.Context, p relayoutPlan, id string, running bool) error {
	if mode := string(p.HostConfig.NetworkMode); len(p.Networks) > 0 && mode != "none" && !rl.networkGone(ctx, mode) {
		for _, n := range p.Networks {
			if rl.networkGone(ctx, n) {
				rl.log.Warn("a network of the old container is gone; the new one is not connected to it", "container", p.Name, "network", n)
				continue
			}
			if _, err := rl.api.NetworkConnect(ctx, n, client.NetworkConnectOptions{Container: id}); err != nil && !strings.Contains(err.Error(), "already") {
				return engine.Classify(err, "connect container "+p.Name+" to network "+n)
			}
		}
	}
	if !p.Running || running {
		return nil
	}
	// A carried socket dir of hutch's own (the old container's agent
	// listened there, and hutch sealed it) is emptied first, so the new
	// agent can make its socket.
	for _, dir := range socketDirSources(p.HostConfig) {
		if err := prepareSocketDir(dir); err != nil {
			return err
		}
	}
	if _, err := rl.api.ContainerStart(ctx, id, client.ContainerStartOptions{}); err != nil {
		return engine.Classify(err, "start container "+p.Name)
	}
	return nil
}

// socketDirSources is the host dirs a carried host config mounts at the
// agent's socket dir. Docker reads mounts back the way they were made;
// Podman reads every one back as a bind string.
func socketDirSources(hc *container.HostConfig) []string {
	var dirs []string
	for _, m := range hc.Mounts {
		if m.Target == runPath {
			dirs = append(dirs, m.Source)
		}
	}
	for _, b := range hc.Binds {
		// source:target[:options]; hutch's own paths hold no colon.
		if parts := strings.SplitN(b, ":", 3); len(parts) >= 2 && parts[1] == runPath {
			dirs = append(dirs, parts[0])
		}
	}
	return dirs
}

// networkGone reports whether mode names a network that no longer exists
// (a move resumed long after the old container went). The image runtime
// attaches the container to its office network when it next re-creates
// it, so the container is created without it.
func (rl *relayouter) networkGone(ctx context.Context, mode string) bool {
	switch {
	case mode == "" || mode == "none" || mode == "default" || mode == "bridge" || mode == "host" ||
		strings.Contains(mode, ":"): // container:<id>, ns:<path>, slirp4netns:...
		return false
	}
	_, err := rl.api.NetworkInspect(ctx, mode, client.NetworkInspectOptions{})
	return engine.IsNotFound(err)
}

// snapshotID returns the id of the image SnapshotRef(key) names, "" when none.
func (rl *relayouter) snapshotID(ctx context.Context, key string) (string, error) {
	res, err := rl.api.ImageInspect(ctx, SnapshotRef(key))
	if engine.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", engine.Classify(err, "inspect snapshot "+SnapshotRef(key))
	}
	return res.ID, nil
}

// dropTag removes a snapshot's tag and leaves its image to the container
// made from it (see Runtime.dropSnapshot for the Podman case).
func (rl *relayouter) dropTag(ctx context.Context, ref string) {
	var err error
	if rl.eng.Flavor == engine.FlavorPodman {
		err = rl.eng.PodmanUntag(ctx, ref)
	} else {
		_, err = rl.api.ImageRemove(ctx, ref, client.ImageRemoveOptions{Force: true})
	}
	if err != nil && !engine.IsNotFound(err) {
		rl.log.Warn("could not remove snapshot tag", "snapshot", ref, "error", err)
	}
}

// hasTag reports whether an image listing shows a name for the image
// (old engines list an untagged one as <none>:<none>).
func hasTag(tags []string) bool {
	for _, t := range tags {
		if t != "" && t != "<none>:<none>" {
			return true
		}
	}
	return false
}

func trimDigest(id string) string { return strings.TrimPrefix(id, "sha256:") }

// relocate translates a container's mounts (HostConfig.Mounts and Binds)
// and working dir by mv, and reports whether anything changed. It returns
// copies; the arguments are not modified.
func relocate(cfg *container.Config, hc *container.HostConfig, mv LayoutMove) (*container.Config, *container.HostConfig, bool) {
	host, guest := newPrefixMap(mv.HostPaths, filepath.Clean), newPrefixMap(mv.GuestPaths, path.Clean)
	c, h := *cfg, *hc
	changed := false
	tr := func(m prefixMap, p string) string {
		q := m.translate(p)
		if q != p {
			changed = true
		}
		return q
	}
	c.WorkingDir = tr(guest, cfg.WorkingDir)
	if hc.Mounts != nil {
		h.Mounts = append(h.Mounts[:0:0], hc.Mounts...)
		for i := range h.Mounts {
			h.Mounts[i].Source = tr(host, h.Mounts[i].Source)
			h.Mounts[i].Target = tr(guest, h.Mounts[i].Target)
		}
	}
	if hc.Binds != nil {
		h.Binds = make([]string, len(hc.Binds))
		for i, b := range hc.Binds {
			// "src:dst[:opts]"; src may also be a named volume, which no
			// host path prefix matches.
			parts := strings.SplitN(b, ":", 3)
			if len(parts) >= 2 {
				parts[0] = tr(host, parts[0])
				parts[1] = tr(guest, parts[1])
			}
			h.Binds[i] = strings.Join(parts, ":")
		}
	}
	return &c, &h, changed
}

// prefixMap maps path prefixes, cleaned, to their replacements.
type prefixMap map[string]string

func newPrefixMap(m map[string]string, clean func(string) string) prefixMap {
	out := make(prefixMap, len(m))
	for k, v := range m {
		if k != "" && v != "" {
			out[clean(k)] = clean(v)
		}
	}
	return out
}

// translate replaces the longest prefix of p that ends on a path
// component boundary: /ws/C1 rewrites /ws/C1 and /ws/C1/x, never /ws/C10.
func (m prefixMap) translate(p string) string {
	best := ""
	found := false
	for k := range m {
		if (p == k || strings.HasPrefix(p, strings.TrimSuffix(k, "/")+"/")) && (!found || len(k) > len(best)) {
			best, found = k, true
		}
	}
	if !found {
		return p
	}
	rest := strings.TrimPrefix(p[len(strings.TrimSuffix(best, "/")):], "/")
	if rest == "" {
		return m[best]
	}
	return strings.TrimSuffix(m[best], "/") + "/" + rest
}

// carryConfig is what the new container keeps of the old one's config:
// the command, environment and user, with its labels naming the office.
// The hostname is dropped when it was the engine's default (the old id).
func carryConfig(c *container.Config, oldID string, mv LayoutMove) *container.Config {
	out := &container.Config{
		Hostname:     c.Hostname,
		Domainname:   c.Domainname,
		User:         c.User,
		ExposedPorts: c.ExposedPorts,
		Tty:          c.Tty,
		OpenStdin:    c.OpenStdin,
		StdinOnce:    c.StdinOnce,
		Env:          c.Env,
		Cmd:          c.Cmd,
		Healthcheck:  c.Healthcheck,
		WorkingDir:   c.WorkingDir,
		Entrypoint:   c.Entrypoint,
		Labels:       carryLabels(c.Labels, mv),
		StopSignal:   c.StopSignal,
		StopTimeout:  c.StopTimeout,
	}
	if out.Hostname != "" && strings.HasPrefix(oldID, out.Hostname) {
		out.Hostname = ""
	}
	if out.Cmd == nil {
		// With an entrypoint and no command, the snapshot's command
		// (the old one's, committed) must not be appended.
		out.Cmd = []string{}
	}
	return out
}

// carryLabels keeps every label (the fingerprint too: the image runtime
// sees the drift and re-creates the container, keeping the layer again)
// and names the office. LabelRelayout is set empty because a container
// inherits its image's labels, and the snapshot's plan must not outlive
// the move in the container (or in a snapshot the runtime takes of it).
func carryLabels(old map[string]string, mv LayoutMove) map[string]string {
	out := make(map[string]string, len(old)+4)
	for k, v := range old {
		out[k] = v
	}
	out[engine.LabelOffice] = mv.OfficeKey
	out[engine.LabelPlatform] = mv.Platform
	out[engine.LabelConversation] = mv.RawID
	out[LabelRelayout] = ""
	return out
}

// carryHostConfig is what the new container keeps of the old one's host
// config: mounts (already translated), capabilities, security options,
// resources and the like. Engine-specific read-outs that a create does
// not take back (Podman's namespace modes, runtime name, rlimit names)
// are left out or normalised.
func carryHostConfig(h *container.HostConfig) *container.HostConfig {
	out := &container.HostConfig{
		Binds:          h.Binds,
		Mounts:         h.Mounts,
		RestartPolicy:  h.RestartPolicy,
		CapAdd:         h.CapAdd,
		CapDrop:        h.CapDrop,
		SecurityOpt:    h.SecurityOpt,
		DNS:            h.DNS,
		DNSOptions:     h.DNSOptions,
		DNSSearch:      h.DNSSearch,
		ExtraHosts:     h.ExtraHosts,
		GroupAdd:       h.GroupAdd,
		OomScoreAdj:    h.OomScoreAdj,
		Privileged:     h.Privileged,
		ReadonlyRootfs: h.ReadonlyRootfs,
		Tmpfs:          h.Tmpfs,
		Sysctls:        h.Sysctls,
		Init:           h.Init,
		Resources:      h.Resources,
	}
	if out.NanoCPUs != 0 {
		// Podman reads a CPU limit out both ways, and a create refuses
		// both at once.
		out.CPUPeriod, out.CPUQuota = 0, 0
	}
	if s := out.MemorySwappiness; s != nil && *s < 0 {
		out.MemorySwappiness = nil // Podman reads "unset" out as -1
	}
	if len(out.Ulimits) > 0 {
		ul := make([]*container.Ulimit, 0, len(out.Ulimits))
		for _, u := range out.Ulimits {
			if u == nil {
				continue
			}
			// Podman reads rlimits out as RLIMIT_NOFILE; a create takes nofile.
			n := *u
			n.Name = strings.ToLower(strings.TrimPrefix(strings.ToUpper(n.Name), "RLIMIT_"))
			ul = append(ul, &n)
		}
		out.Ulimits = ul
	}
	return out
}

// carryNetworks decides the new container's network mode and the further
// networks to connect it to. The image runtime creates a container on
// "none" and attaches it to its office network afterwards, and Podman
// reads a container created on a network out as "bridge", so the network
// mode alone does not say where a container is: its endpoints do.
func carryNetworks(c container.InspectResponse) (container.NetworkMode, []string) {
	mode := string(c.HostConfig.NetworkMode)
	var nets []string
	if c.NetworkSettings != nil {
		for name := range c.NetworkSettings.Networks {
			if name != "none" {
				nets = append(nets, name)
			}
		}
	}
	sort.Strings(nets)
	if len(nets) == 0 || strings.Contains(mode, ":") || mode == "host" {
		return container.NetworkMode(mode), nil
	}
	primary := nets[0]
	for _, n := range nets {
		ep := c.NetworkSettings.Networks[n]
		if n == mode || ep != nil && ep.NetworkID != "" && ep.NetworkID == mode {
			primary = n
		}
	}
	var rest []string
	for _, n := range nets {
		if n != primary {
			rest = append(rest, n)
		}
	}
	return container.NetworkMode(primary), rest
}
