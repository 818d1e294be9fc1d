package box

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"

	"github.com/hutchsandbox/hutch/internal/agent"
	"github.com/hutchsandbox/hutch/internal/agentbin"
	"github.com/hutchsandbox/hutch/internal/beneath"
	"github.com/hutchsandbox/hutch/internal/devcontainer"
	"github.com/hutchsandbox/hutch/internal/devcontainer/features"
	"github.com/hutchsandbox/hutch/internal/egress"
	"github.com/hutchsandbox/hutch/internal/engine"
	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/imagebuild"
	"github.com/hutchsandbox/hutch/internal/netpolicy"
	"github.com/hutchsandbox/hutch/internal/project"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	sbxcontainer "github.com/hutchsandbox/hutch/internal/sandbox/container"
)

// Paths inside hutch's own project container.
const (
	agentPath  = "/hutch/bin/hutch"
	runPath    = "/hutch/run"
	socketName = "agent.sock"
	keyPath    = "/hutch/key" // the agent's channel key, read-only
	homePath   = "/sandbox/home"
	relayPath  = "/sandbox/relay"
)

// Options say where a Box keeps its state and how it reaches the engine.
type Options struct {
	Engine *engine.Engine
	// StateDir holds per-project state: <state>/projects/<name>/ with the
	// session files and the relay directory.
	StateDir string
	// RunDir holds one socket directory per project container.
	RunDir string
	// Agent locates the static hutch binary that is the container's init
	// (and is copied into an adopted container). It is called only when
	// one is needed: hashing the binary costs more than a warm command.
	Agent func() (agentbin.Binary, error)
	// Home is the user's home directory (symlink-resolved), against which
	// mounts are judged.
	Home string
	// SettingsFile is the settings file the spec was resolved from. The
	// egress proxy of a sandbox whose network is allowlist or none reads
	// the project's policy from it at every connection (see egress.go);
	// "" keeps the spec's.
	SettingsFile string
	// Progress receives stage lines, build progress and the output of
	// lifecycle commands; nil discards.
	Progress io.Writer
	Log      *slog.Logger
	// Refine, set when a devcontainer.json applies, resolves the spec
	// again with an image's devcontainer.metadata label (its value; ""
	// for none) merged under the file, as the spec merges them: users,
	// environment, mounts and lifecycle commands an image or its
	// features declare. The box keeps its first spec's name, hash and
	// labels: the image follows from them.
	Refine func(label string) (project.Spec, error)
	// FeatureMirrors are registries the devcontainer's features are
	// fetched from instead of the ones they name (HUTCH_FEATURE_MIRRORS).
	FeatureMirrors features.Mirrors
	// Changed, when set, is told of each change to hutch's container of
	// the project (for the event log): "created" (why: "rebuild" after a
	// rebuild), "stopped", "removed"; name is the container's.
	Changed func(ctx context.Context, event, name, why string)
}

// changed tells Options.Changed of a change, when set.
func (b *Box) changed(ctx context.Context, event, why string) {
	if b.opts.Changed != nil {
		b.opts.Changed(ctx, event, b.spec.Name, why)
	}
}

// Box is one project's sandbox.
type Box struct {
	opts    Options
	project string
	spec    project.Spec

	// egressDial, set by tests only, is the egress proxy's Dial.
	egressDial func(ctx context.Context, network, addr string) (net.Conn, error)

	// rebuild is set by Rebuild: the devcontainer's Dockerfile is built
	// whatever its tag (build.go). freshBase says it was built by this
	// create, so the recipe's layers go onto it even when their tag is
	// present.
	rebuild, freshBase bool
	// buildNotes are advisories of making the images (what installing
	// the features left out), shown with the spec's.
	buildNotes []string

	egressMu sync.Mutex // guards the following
	live     netpolicy.Policy
	relays   *egress.Relays
	stops    []context.CancelFunc // of the relay pumps
}

// New returns the sandbox of project as spec describes it.
func New(opts Options, projectDir string, spec project.Spec) *Box {
	if opts.Progress == nil {
		opts.Progress = io.Discard
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	return &Box{opts: opts, project: projectDir, spec: spec, live: spec.Policy()}
}

// SetEngine gives a box made for the warm path (no engine) its engine.
func (b *Box) SetEngine(eng *engine.Engine) { b.opts.Engine = eng }

// Spec is the spec the box was made with.
func (b *Box) Spec() project.Spec { return b.spec }

// ProjectDir is the project's path.
func (b *Box) ProjectDir() string { return b.project }

// SessionDir is where the sessions of a project container are counted.
func SessionDir(stateDir, name string) string {
	return filepath.Join(stateDir, "projects", name, "sessions")
}

// RelayDir is the host directory a project container mounts read-only at
// /sandbox/relay.
func RelayDir(stateDir, name string) string {
	return filepath.Join(stateDir, "projects", name, "relay")
}

// Sessions returns the project container's session set.
func (b *Box) Sessions() *Sessions { return NewSessions(SessionDir(b.opts.StateDir, b.spec.Name)) }

// Target is the container commands of a project run in.
type Target struct {
	Name, ID string
	// Foreign: the container was not created by hutch (an editor's); hutch
	// enters it but never stops or removes it.
	Foreign bool
	// Workdir is the project as the container sees it.
	Workdir string
	// Env and User apply to every command (none for a foreign container:
	// it keeps its own).
	Env  []string
	User string
	// Notes are advisories to show the user.
	Notes []string
	agent *agent.Client
}

// Agent returns the client of the agent in the target.
func (t *Target) Agent() *agent.Client { return t.agent }

// Files returns the target's file operations, served by its agent and
// confined to roots (the project, as the container sees it), with
// relative paths starting at office: the same contract every mode's
// runtime keeps.
func (t *Target) Files(office string, roots []string) sandbox.Files {
	return agent.Files(func(context.Context) (*agent.Client, error) { return t.agent, nil }, office, roots)
}

// containerState is what hutch needs to know of one container.
type containerState struct {
	exists, running bool
	id, image       string
	labels          map[string]string
	mounts          []container.MountPoint
	// networkMode is the engine's (bridge, host, none, a network's name);
	// entrypoint is what the container runs (the agent's flags).
	networkMode string
	entrypoint  []string
	// env is the container's environment (the image's and its own).
	env []string
}

func (b *Box) inspect(ctx context.Context, nameOrID string) (containerState, error) {
	res, err := b.opts.Engine.Client.ContainerInspect(ctx, nameOrID, client.ContainerInspectOptions{})
	if engine.IsNotFound(err) {
		return containerState{}, nil
	}
	if err != nil {
		return containerState{}, engine.Classify(err, "inspect container "+nameOrID)
	}
	c := res.Container
	st := containerState{exists: true, id: c.ID, mounts: c.Mounts}
	if c.State != nil {
		st.running = c.State.Running
	}
	if c.Config != nil {
		st.labels = c.Config.Labels
		st.image = c.Config.Image
		st.entrypoint = c.Config.Entrypoint
		st.env = c.Config.Env
	}
	if c.HostConfig != nil {
		st.networkMode = string(c.HostConfig.NetworkMode)
	}
	return st, nil
}

// ownedBy reports whether labels say hutch created the container for
// this project. Labels are read from inspect's JSON map on both engines,
// so neither Podman's map rendering nor a value holding commas can
// confuse it.
func ownedBy(labels map[string]string, projectDir string) bool {
	return labels[project.LabelOwner] == "hutch" && labels[project.LabelProject] == projectDir
}

// Up brings the sandbox up: an editor's running container labelled for
// the project is adopted (unless the spec says not, sandbox-devcontainer
// off); otherwise hutch's own is started if stopped, or created (its
// image built first when the recipe's tag is missing). Under
// sandbox-network allowlist or none, an editor's container and one of
// hutch's made with a network of its own are refused (run rebuild), and
// the target's relayed connections reach the box's egress proxy while
// its agent client is open.
func (b *Box) Up(ctx context.Context) (*Target, error) {
	b.stage("Looking for the sandbox…")
	if b.spec.AdoptEditor {
		if t, err := b.adoptForeign(ctx); err != nil || t != nil {
			return t, err
		}
	}
	st, err := b.inspect(ctx, b.spec.Name)
	if err != nil {
		return nil, err
	}
	notes := append([]string(nil), b.spec.Notes...)
	switch {
	case st.exists && !ownedBy(st.labels, b.project):
		return nil, errdefs.New(errdefs.ErrConflict, fmt.Sprintf(
			"A container named %s exists that hutch did not create for %s; hutch leaves it alone. Rename or remove it, then try again.", b.spec.Name, b.project))
	case st.exists && st.labels[project.LabelSpec] != b.spec.Hash:
		notes = append(notes, "The sandbox runs with older settings or an older devcontainer.json; run `hutch project rebuild` to apply the current ones.")
	}
	created := false
	if !st.exists {
		if err := b.create(ctx); err != nil {
			return nil, err
		}
		if st, err = b.created(ctx); err != nil {
			return nil, err
		}
		created = true
		notes = append(notes, b.buildNotes...)
		why := ""
		if b.rebuild {
			why = "rebuild"
		}
		b.changed(ctx, "created", why)
	}
	// The one it found or made (another hutch may have made it a moment
	// before, from other settings). Its labels hold its image's.
	if err := b.refine(metadataLabel(st.labels)); err != nil {
		return nil, err
	}
	notes = append(notes, b.refinedNotes(notes)...)
	if note, err := b.checkEgress(st); err != nil {
		return nil, err
	} else if note != "" {
		notes = append(notes, note)
	}
	var pins []*beneath.File
	defer func() { beneath.CloseAll(pins) }()
	started := !st.running
	if started {
		b.stage("Starting the sandbox…")
		if err := b.prepareChannel(); err != nil {
			return nil, err
		}
		if pins, err = b.pinMounts(); err != nil {
			return nil, err
		}
		if h := testHookBeforeStart.Load(); h != nil {
			(*h)(b.spec)
		}
		if _, err := b.opts.Engine.Client.ContainerStart(ctx, st.id, client.ContainerStartOptions{}); err != nil {
			return nil, b.startFailed(ctx, st.id, created, err)
		}
	}
	cl, err := b.agentClient()
	if err != nil {
		return nil, err
	}
	t := &Target{Name: b.spec.Name, ID: st.id, Workdir: b.spec.Workdir, Env: b.execEnv(st.env), User: b.spec.User, Notes: notes, agent: cl}
	if err := b.waitAgent(ctx, t); err != nil {
		return nil, err
	}
	if b.opts.Refine != nil {
		b.writeExecCache(execCache{Hash: b.spec.Hash, Label: metadataLabel(st.labels), Env: st.env})
	}
	relays := containerRelays(st)
	b.recordRelays(relays)
	if relays {
		// Before anything runs in it: a command's first connection
		// must not wait for the pump.
		b.relay(t)
	}
	if started {
		// Its agent listens and nothing ran in it yet.
		if err := agent.SealSocketDir(b.socketDir()); err != nil {
			b.opts.Log.Debug("socket dir left writable from inside", "sandbox", b.spec.Name, "error", err)
		}
		if err := b.verifyMounts(ctx, t, pins); err != nil {
			_ = t.agent.Close()
			return nil, err
		}
	}
	if created {
		if err := b.openHome(ctx, st.id); err != nil {
			return nil, err
		}
	}
	if err := b.runLifecycle(ctx, t, st.id, started); err != nil {
		_ = t.agent.Close()
		return nil, err
	}
	b.stage("Sandbox ready")
	return t, nil
}

// created inspects the container create just made, or that another
// hutch process made at the same moment: the engine answers the loser's
// create with a conflict as soon as the name is reserved, a moment before
// an inspect finds the container, so it is looked up until it appears.
// One that appears without hutch's labels for the project is refused, as
// Up refuses any such container.
func (b *Box) created(ctx context.Context) (containerState, error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := b.inspect(ctx, b.spec.Name)
		switch {
		case err != nil:
			return st, err
		case st.exists && !ownedBy(st.labels, b.project):
			return st, errdefs.New(errdefs.ErrConflict, fmt.Sprintf(
				"A container named %s exists that hutch did not create for %s; hutch leaves it alone. Rename or remove it, then try again.", b.spec.Name, b.project))
		case st.exists:
			return st, nil
		case time.Now().After(deadline):
			return st, errdefs.New(errdefs.ErrUnavailable, fmt.Sprintf("The sandbox %s was created, but the engine does not list it.", b.spec.Name))
		}
		select {
		case <-ctx.Done():
			return st, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// stage writes a line of progress, best-effort: bringing the sandbox up
// does not fail because its progress could not be shown.
func (b *Box) stage(s string) { _, _ = fmt.Fprintln(b.opts.Progress, s) }

// execEnv is the environment of every command: the container's (env,
// as the engine reports it) and on top of it the spec's, HOME included,
// then the devcontainer's remoteEnv, whose ${containerEnv:VAR} are
// filled from the container's environment.
func (b *Box) execEnv(containerEnv []string) []string {
	out := b.env()
	lookup := envLookup(out, containerEnv)
	var remote []string
	for _, kv := range b.spec.RemoteEnv {
		remote = append(remote, kv.Name+"="+devcontainer.ExpandContainerEnv(kv.Value, lookup))
	}
	return append(out, remote...)
}

// needsContainerEnv reports whether a remoteEnv value can only be known
// from the container's environment, which the warm path does not ask
// the engine for.
func (b *Box) needsContainerEnv() bool {
	for _, kv := range b.spec.RemoteEnv {
		if strings.Contains(kv.Value, "${containerEnv:") {
			return true
		}
	}
	return false
}

// env is the container's configured environment: the spec's, with HOME.
func (b *Box) env() []string {
	out := make([]string, 0, len(b.spec.Env)+1)
	for _, kv := range b.spec.Env {
		out = append(out, kv.Name+"="+kv.Value)
	}
	return out
}

// adoptForeign finds a running container labelled for the project that
// hutch did not create (an editor's) and enters it.
func (b *Box) adoptForeign(ctx context.Context) (*Target, error) {
	res, err := b.opts.Engine.Client.ContainerList(ctx, client.ContainerListOptions{
		All:     true,
		Filters: make(client.Filters).Add("label", project.LabelLocalFolder+"="+b.project),
	})
	if err != nil {
		return nil, engine.Classify(err, "list containers")
	}
	for _, c := range res.Items {
		st, err := b.inspect(ctx, c.ID)
		if err != nil || !st.exists || !st.running || ownedBy(st.labels, b.project) {
			continue
		}
		// Label values are compared exactly: a filter match on a prefix
		// or another engine's rendering must not adopt a stranger.
		if st.labels[project.LabelLocalFolder] != b.project {
			continue
		}
		name := strings.TrimPrefix(firstName(c.Names), "/")
		if b.spec.Egress.Proxied() {
			return nil, b.errForeignEgress(name)
		}
		workdir, identity := projectInside(st.mounts, b.project)
		notes := []string{fmt.Sprintf("Attached to %s, a container hutch did not create. It is never stopped or removed from here.", name)}
		if !identity {
			notes = append(notes, fmt.Sprintf("%s mounts the project at %s, not at its own path: git worktrees made on one side will not work on the other.", name, workdir))
		}
		// Commands run as the editor runs them: as the user, and with
		// the remoteEnv, of the configuration it made the container
		// from, which it records in the container's
		// devcontainer.metadata.
		user, env, mn := editorExec(st)
		notes = append(notes, mn...)
		bin, err := b.opts.Agent()
		if err != nil {
			return nil, err
		}
		rt, err := sbxcontainer.New(sbxcontainer.Config{Engine: b.opts.Engine, Name: c.ID, Agent: bin, Log: b.opts.Log, User: user})
		if err != nil {
			return nil, err
		}
		cl, err := rt.Agent(ctx)
		if err != nil {
			return nil, err
		}
		b.stage("Sandbox ready")
		return &Target{Name: name, ID: st.id, Foreign: true, Workdir: workdir, Env: env, User: user, Notes: notes, agent: cl}, nil
	}
	return nil, nil
}

func firstName(names []string) string {
	if len(names) == 0 {
		return ""
	}
	return names[0]
}

// projectInside returns where a container mounts the project and whether
// that is the project's own path.
func projectInside(mounts []container.MountPoint, projectDir string) (string, bool) {
	for _, m := range mounts {
		if filepath.Clean(m.Source) == projectDir {
			return m.Destination, m.Destination == projectDir
		}
	}
	return projectDir, true
}

// create builds the image if needed and creates hutch's own container.
func (b *Box) create(ctx context.Context) error {
	img := b.spec.Image
	if b.spec.Build != nil {
		built, err := b.ensureBuild(ctx)
		if err != nil {
			return err
		}
		b.freshBase = built
	}
	if b.spec.Recipe != nil {
		r := *b.spec.Recipe
		if b.spec.Features != nil {
			// The recipe's layers go on the features, which go on
			// the recipe's base.
			tag, fresh, err := b.ensureFeatures(ctx, *b.spec.Features)
			if err != nil {
				return err
			}
			r.Base, b.freshBase = tag, fresh
		}
		var err error
		if img, err = b.ensureImage(ctx, r); err != nil {
			return err
		}
	}
	if b.opts.Refine != nil {
		// What the image declares shapes the container too (its
		// user, environment, mounts). An image the engine cannot
		// inspect has none; creating the container says what is wrong.
		label := ""
		if res, err := b.opts.Engine.Client.ImageInspect(ctx, img); err == nil && res.Config != nil {
			label = metadataLabel(res.Config.Labels)
		}
		if err := b.refine(label); err != nil {
			return err
		}
	}
	if err := checkResolvedMounts(b.spec.Mounts, b.opts.Home); err != nil {
		return err
	}
	b.stage("Creating the sandbox…")
	if err := b.prepareChannel(); err != nil {
		return err
	}
	bin, err := b.opts.Agent()
	if err != nil {
		return err
	}
	// The staged copy never changes under the container, even when the
	// hutch binary on the host is rebuilt.
	staged, err := bin.Stage(filepath.Join(b.opts.RunDir, "bin"))
	if err != nil {
		return err
	}
	if err := os.MkdirAll(RelayDir(b.opts.StateDir, b.spec.Name), 0o755); err != nil {
		return fmt.Errorf("relay dir: %w", err)
	}
	mounts := []mount.Mount{
		{Type: mount.TypeBind, Source: staged, Target: agentPath, ReadOnly: true},
		{Type: mount.TypeBind, Source: b.socketDir(), Target: runPath},
		{Type: mount.TypeBind, Source: b.keyFile(), Target: keyPath, ReadOnly: true},
	}
	for _, m := range b.spec.Mounts {
		mt := mount.Mount{Type: mount.TypeBind, Source: m.Source, Target: m.Target, ReadOnly: m.ReadOnly}
		if m.Type == "volume" {
			mt.Type = mount.TypeVolume
		} else if _, err := os.Stat(m.Source); err != nil {
			// An engine would create a missing bind source as an empty
			// root-owned directory; say what is missing instead.
			origin := m.Origin
			if origin == "" {
				origin = "the settings"
			}
			return errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("Mount source %s does not exist (mount at %s, from %s); create it or remove the mount from %s.", m.Source, m.Target, origin, origin))
		}
		mounts = append(mounts, mt)
	}
	pids := b.spec.PidsLimit
	hc := &container.HostConfig{
		Mounts:     mounts,
		ExtraHosts: b.spec.ExtraHosts,
		Resources: container.Resources{
			Memory:    b.spec.MemoryBytes,
			NanoCPUs:  b.spec.NanoCPUs,
			PidsLimit: &pids,
		},
		RestartPolicy: container.RestartPolicy{Name: container.RestartPolicyDisabled},
	}
	if b.spec.MemoryBytes > 0 {
		hc.Resources.MemorySwap = b.spec.MemoryBytes
	}
	switch b.spec.Network {
	case "host", "none":
		hc.NetworkMode = container.NetworkMode(b.spec.Network)
	}
	if b.spec.UsernsKeepID {
		hc.UsernsMode = "keep-id"
	}
	entry := []string{agentPath, "agent", "--init", "--listen", runPath + "/" + socketName, "--key-file", keyPath}
	if b.spec.Egress.Proxied() {
		// Its network is none (spec.Network): the relay is its way out.
		entry = append(entry, "--egress", project.EgressAddr)
	}
	cfg := &container.Config{
		Image:      img,
		Entrypoint: entry,
		Cmd:        []string{},
		WorkingDir: b.spec.Workdir,
		Env:        b.env(),
		User:       b.spec.User,
		Labels:     b.spec.Labels,
	}
	_, err = b.opts.Engine.Client.ContainerCreate(ctx, client.ContainerCreateOptions{Name: b.spec.Name, Config: cfg, HostConfig: hc})
	if err != nil && !engine.IsConflict(err) {
		return engine.Classify(err, "create the sandbox "+b.spec.Name)
	}
	return nil
}

// openHome makes /sandbox/home writable by any uid. A generated image
// ships it 0777 and a fresh volume copies that; an image used as-is may
// not have it, and the engine then makes the volume root-owned 0755,
// which a non-root user cannot write its logins to.
func (b *Box) openHome(ctx context.Context, id string) error {
	if b.spec.Recipe != nil {
		return nil
	}
	api := b.opts.Engine.Client
	// Attached, not detached: Podman refuses an exec with no stream, and
	// reading the stream to its end is how the exec is waited for.
	ex, err := api.ExecCreate(ctx, id, client.ExecCreateOptions{User: "0", AttachStdout: true, AttachStderr: true,
		Cmd: []string{"/bin/sh", "-c", "chmod 0777 " + homePath}})
	if err != nil {
		return engine.Classify(err, "prepare "+homePath)
	}
	att, err := api.ExecAttach(ctx, ex.ID, client.ExecAttachOptions{})
	if err != nil {
		return engine.Classify(err, "prepare "+homePath)
	}
	_, _ = io.Copy(io.Discard, att.Reader)
	att.Close()
	code, err := execExitCode(ctx, api, ex.ID)
	if err != nil {
		return err
	}
	if code != 0 {
		b.opts.Log.Warn("could not make the sandbox home writable by every user", "container", b.spec.Name, "exit_code", code)
	}
	return nil
}

// ensureImage builds the recipe's image unless its tag is present: an
// unchanged recipe is an instant hit. On a base built just now it builds
// anyway (the tag names the base by its tag, not its content); the
// builder's cache makes that quick when the base did not change.
func (b *Box) ensureImage(ctx context.Context, r project.Recipe) (string, error) {
	tag := r.Tag()
	if _, err := b.opts.Engine.Client.ImageInspect(ctx, tag); err == nil {
		if !b.freshBase {
			return tag, nil
		}
	} else if !engine.IsNotFound(err) {
		return "", engine.Classify(err, "inspect image "+tag)
	}
	want := strings.TrimSpace(r.Base)
	if want == "" {
		want = project.DefaultBase
	}
	if local, ok, err := b.builtOnLocalBase(ctx, r, want); err != nil || ok {
		return local, err
	}
	b.stage("Building the sandbox image " + tag + "…")
	base, err := imagebuild.ResolveBase(ctx, b.opts.Engine, want, b.opts.Progress)
	if err != nil {
		return "", fmt.Errorf("could not build the sandbox image: %w", err)
	}
	if base != want {
		// Built on a local stand-in for the base (no registry): the
		// recipe names it, so its tag says what it was built from.
		r.Base = base
		tag = r.Tag()
		if _, err := b.opts.Engine.Client.ImageInspect(ctx, tag); err == nil {
			return tag, nil
		}
	}
	var out tail
	if err := b.opts.Engine.BuildFile(ctx, []byte(r.Dockerfile()), tag, nil, b.recipeOffline(), io.MultiWriter(b.opts.Progress, &out)); err != nil {
		return "", b.explainRecipe(err, out.String(), r.Base)
	}
	return tag, nil
}

// explainBuild is the error of a failed image build, with what to do
// about it when its output shows a cause the user can act on.
func explainBuild(err error, output string) error {
	if advice := project.BuildAdvice(output); advice != "" {
		return fmt.Errorf("could not build the sandbox image: %w. %s", err, advice)
	}
	return fmt.Errorf("could not build the sandbox image: %w", err)
}

// tail keeps the last tailSize bytes written to it: enough of a build's
// output to explain its failure, without holding all of it.
type tail struct{ buf []byte }

const tailSize = 64 << 10

func (t *tail) Write(p []byte) (int, error) {
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - tailSize; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

func (t *tail) String() string { return string(t.buf) }

// builtOnLocalBase finds the image of a recipe on Debian bookworm that
// an earlier run built on imagebuild.LocalBase, the stand-in for a base
// no registry served (tagged after it, see ensureImage). Without it, an
// unchanged recipe would try the registry again on every create, which
// can take up to imagebuild.PullTimeout, before finding its image. When
// the engine has the base itself, ResolveBase builds on it, so no
// stand-in's image is used.
func (b *Box) builtOnLocalBase(ctx context.Context, r project.Recipe, want string) (string, bool, error) {
	if !imagebuild.IsBookworm(want) {
		return "", false, nil
	}
	api := b.opts.Engine.Client
	if _, err := api.ImageInspect(ctx, want); err == nil {
		return "", false, nil
	} else if !engine.IsNotFound(err) {
		return "", false, engine.Classify(err, "inspect image "+want)
	}
	r.Base = imagebuild.LocalBase
	tag := r.Tag()
	if _, err := api.ImageInspect(ctx, tag); err == nil {
		return tag, true, nil
	} else if !engine.IsNotFound(err) {
		return "", false, engine.Classify(err, "inspect image "+tag)
	}
	return "", false, nil
}

// socketDir is the host directory mounted at /hutch/run, named by a
// digest so the socket path stays short.
func (b *Box) socketDir() string {
	sum := sha256.Sum256([]byte("project\x00" + b.spec.Name))
	return filepath.Join(b.opts.RunDir, "prj", hex.EncodeToString(sum[:8]))
}

// prepareSocketDir makes the socket directory, empty: it is called only
// while no agent runs in it, and what a past run left there (a link
// planted in place of the socket included) goes; removal follows no
// link. It is open to every uid (the container may run as any user)
// inside the run dir, which is private to hutch's user.
func prepareSocketDir(dir string) error {
	if err := agent.RemoveSocketDir(dir); err != nil {
		return fmt.Errorf("sandbox socket dir: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("sandbox socket dir: %w", err)
	}
	return os.Chmod(dir, 0o777) //nolint:gosec // G302: see above
}

// keyFile is the host file mounted at keyPath: beside the socket dir, not
// in it, so nothing inside can replace it.
func (b *Box) keyFile() string { return b.socketDir() + ".key" }

// channelKey is the key the sandbox's agent proves it holds.
func (b *Box) channelKey() ([]byte, error) {
	return agent.ChannelKey(b.opts.StateDir, "project\x00"+b.spec.Name)
}

// prepareChannel makes what the container mounts for its agent's channel:
// the socket dir and the channel key file (a run dir on tmpfs loses both
// when the host restarts, while the container stays).
func (b *Box) prepareChannel() error {
	if err := prepareSocketDir(b.socketDir()); err != nil {
		return err
	}
	key, err := b.channelKey()
	if err != nil {
		return err
	}
	return agent.WriteChannelKey(b.keyFile(), key)
}

func (b *Box) agentClient() (*agent.Client, error) {
	sock := filepath.Join(b.socketDir(), socketName)
	key, err := b.channelKey()
	if err != nil {
		return nil, err
	}
	return agent.NewClient(func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}, b.opts.Log).RequireProof(key, fmt.Sprintf(
		"The channel of the sandbox %s is answered by a process that is not its agent: something inside replaced the agent's socket, or an older hutch made the sandbox. Nothing was sent to it. Run `hutch project rebuild` to make it anew.",
		b.spec.Name)), nil
}

// Attach returns the target of a sandbox that is up, without starting
// or creating anything: the fast path of a warm command. It returns nil
// when hutch's own container is not running (the caller then calls Up),
// and under sandbox-network allowlist or none unless the last Up found
// the container relaying: only Up asks the engine what the container is.
func (b *Box) Attach(ctx context.Context) *Target {
	relays := b.relaysRecorded()
	if b.spec.Egress.Proxied() && !relays {
		return nil
	}
	var containerEnv []string
	if b.opts.Refine != nil {
		// What the last Up learnt of the image and the container; a
		// spec that changed since needs the engine.
		c, ok := b.readExecCache()
		if !ok || b.refine(c.Label) != nil {
			return nil
		}
		containerEnv = c.Env
	} else if b.needsContainerEnv() {
		return nil
	}
	cl, err := b.agentClient()
	if err != nil {
		return nil
	}
	t := &Target{Name: b.spec.Name, Workdir: b.spec.Workdir, Env: b.execEnv(containerEnv), User: b.spec.User, agent: cl}
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if _, err := t.agent.Ping(pctx); err != nil {
		_ = t.agent.Close()
		return nil
	}
	if relays {
		b.relay(t)
	}
	return t
}

// waitAgent waits for a started container's agent to answer.
func (b *Box) waitAgent(ctx context.Context, t *Target) error {
	deadline := time.Now().Add(30 * time.Second)
	delay := 2 * time.Millisecond
	for i := 0; ; i++ {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		_, err := t.agent.Ping(pctx)
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if errors.Is(err, errdefs.ErrFailedPrecondition) {
			return err // an agent answered and failed the channel proof
		}
		if i%20 == 19 {
			if st, ierr := b.inspect(ctx, t.ID); ierr == nil && !st.running {
				return errdefs.New(errdefs.ErrUnavailable, fmt.Sprintf("The sandbox %s exited before its agent answered; see `docker logs %s`.", b.spec.Name, b.spec.Name))
			}
		}
		if time.Now().After(deadline) {
			return errdefs.New(errdefs.ErrUnavailable, fmt.Sprintf("The agent in the sandbox %s did not answer within 30 s: %v", b.spec.Name, err))
		}
		time.Sleep(delay)
		delay = min(delay*2, 50*time.Millisecond)
	}
}

// mayRemove checks, right before a stop or remove, that the container is
// hutch's own for this project.
func (b *Box) mayRemove(ctx context.Context) (containerState, error) {
	st, err := b.inspect(ctx, b.spec.Name)
	if err != nil {
		return st, err
	}
	if st.exists && !ownedBy(st.labels, b.project) {
		return st, errdefs.New(errdefs.ErrFailedPrecondition, fmt.Sprintf("%s was not created by hutch for this project, so it is left alone.", b.spec.Name))
	}
	return st, nil
}

// errForeign refuses to stop, remove or rebuild an adopted container.
func (b *Box) errForeign(name string) error {
	return errdefs.New(errdefs.ErrFailedPrecondition, fmt.Sprintf("%s was not created by hutch, so it is left alone (an editor is likely attached to it).", name))
}

// Stop stops hutch's own container. An adopted one is refused.
func (b *Box) Stop(ctx context.Context) (bool, error) {
	if t, err := b.foreignRunning(ctx); err != nil || t != "" {
		if err == nil {
			err = b.errForeign(t)
		}
		return false, err
	}
	st, err := b.mayRemove(ctx)
	if err != nil || !st.exists || !st.running {
		return false, err
	}
	if _, err := b.opts.Engine.Client.ContainerStop(ctx, st.id, client.ContainerStopOptions{}); err != nil && !engine.IsNotFound(err) {
		return false, engine.Classify(err, "stop the sandbox "+b.spec.Name)
	}
	b.changed(ctx, "stopped", "")
	return true, nil
}

// Down removes hutch's own container; its home volume stays (it holds
// logins and history) unless volumes is set.
func (b *Box) Down(ctx context.Context, volumes bool) (bool, error) {
	if t, err := b.foreignRunning(ctx); err != nil || t != "" {
		if err == nil {
			err = b.errForeign(t)
		}
		return false, err
	}
	st, err := b.mayRemove(ctx)
	if err != nil {
		return false, err
	}
	if st.exists {
		b.recordRelays(false)
		if _, err := b.opts.Engine.Client.ContainerRemove(ctx, st.id, client.ContainerRemoveOptions{Force: true}); err != nil && !engine.IsNotFound(err) {
			return false, engine.Classify(err, "remove the sandbox "+b.spec.Name)
		}
		b.changed(ctx, "removed", "")
	}
	if volumes {
		if _, err := b.opts.Engine.Client.VolumeRemove(ctx, project.HomeVolume(b.spec.Name), client.VolumeRemoveOptions{}); err != nil && !engine.IsNotFound(err) {
			return st.exists, engine.Classify(err, "remove the volume "+project.HomeVolume(b.spec.Name))
		}
	}
	return st.exists, nil
}

// Rebuild removes hutch's own container, builds the devcontainer's
// Dockerfile again (its context may have changed), installs its features
// again (fetched anew; their scripts download), builds the recipe's
// image again when it or its base changed (an unchanged one is reused)
// and brings it up.
func (b *Box) Rebuild(ctx context.Context) (*Target, error) {
	if _, err := b.Down(ctx, false); err != nil {
		return nil, err
	}
	b.rebuild = true
	return b.Up(ctx)
}

// foreignRunning names the editor's running container for the project
// that Up would adopt, "" when there is none or none is adopted.
func (b *Box) foreignRunning(ctx context.Context) (string, error) {
	if !b.spec.AdoptEditor {
		return "", nil
	}
	res, err := b.opts.Engine.Client.ContainerList(ctx, client.ContainerListOptions{
		Filters: make(client.Filters).Add("label", project.LabelLocalFolder+"="+b.project),
	})
	if err != nil {
		return "", engine.Classify(err, "list containers")
	}
	for _, c := range res.Items {
		if c.Labels[project.LabelLocalFolder] == b.project && !ownedBy(c.Labels, b.project) {
			return strings.TrimPrefix(firstName(c.Names), "/"), nil
		}
	}
	return "", nil
}

// The owners Status names.
const (
	OwnerHutch    = "hutch"
	OwnerExternal = "external" // an editor's container: never stopped or removed by hutch
	OwnerUnknown  = "unknown"  // not created by hutch for this project
)

// OwnerText is owner as the status's text says it: the word, and what
// it means for hutch's commands.
func OwnerText(owner string) string {
	switch owner {
	case OwnerExternal:
		return "external (never stopped or removed by hutch)"
	case OwnerUnknown:
		return "unknown (not created by hutch for this project)"
	case "":
		return "-"
	}
	return owner
}

// Status is what `hutch project status` prints.
type Status struct {
	Engine   string
	Name     string
	State    string // running, stopped, missing
	Owner    string // OwnerHutch, OwnerExternal, OwnerUnknown, "" (none)
	Sessions int
	Image    string
	Limits   string
	// Network is sandbox-network, and under allowlist the hosts it lets
	// through.
	Network   string
	Notes     []string
	Persisted bool
}

// Status reports the sandbox without changing anything.
func (b *Box) Status(ctx context.Context) (Status, error) {
	s := Status{Engine: string(b.opts.Engine.Flavor) + " " + b.opts.Engine.ServerVersion, Name: b.spec.Name, State: "missing", Notes: b.spec.Notes}
	if name, err := b.foreignRunning(ctx); err != nil {
		return s, err
	} else if name != "" {
		s.Name, s.State, s.Owner = name, "running", OwnerExternal
	} else {
		st, err := b.inspect(ctx, b.spec.Name)
		if err != nil {
			return s, err
		}
		if st.exists {
			// Podman reports short names fully qualified.
			s.State, s.Image = "stopped", strings.TrimPrefix(st.image, "docker.io/library/")
			if st.running {
				s.State = "running"
			}
			s.Owner = OwnerHutch
			if !ownedBy(st.labels, b.project) {
				s.Owner = OwnerUnknown
			} else if st.labels[project.LabelSpec] != b.spec.Hash {
				s.Notes = append(s.Notes, "The sandbox runs with older settings or an older devcontainer.json; run `hutch project rebuild` to apply the current ones.")
			}
			if s.Owner == OwnerHutch {
				if note, err := b.checkEgress(st); err != nil {
					s.Notes = append(s.Notes, err.Error())
				} else if note != "" {
					s.Notes = append(s.Notes, note)
				}
			}
		}
	}
	n, err := b.Sessions().Count()
	if err != nil {
		return s, err
	}
	s.Sessions = n
	if s.Image == "" {
		s.Image = b.spec.Image
		if b.spec.Recipe != nil {
			s.Image = b.spec.Recipe.Tag() + " (generated)"
			if b.spec.Features != nil {
				// Its tag follows the features' tag, known once
				// they are fetched.
				s.Image = "generated on the features of " + b.spec.Features.File + " (built by up)"
			}
		}
	}
	s.Limits = limitsText(b.spec)
	s.Network = networkText(b.spec)
	return s, nil
}

// limitsText says what caps the sandbox: the process ceiling always, and
// memory and CPUs when sandbox-memory and sandbox-cpus set a ceiling
// (unlimited by default, as the settings table says), naming the setting
// that would cap what is not.
func limitsText(s project.Spec) string {
	var capped []string
	if s.MemoryBytes > 0 {
		capped = append(capped, fmt.Sprintf("memory %d MiB", s.MemoryBytes>>20))
	}
	if s.NanoCPUs > 0 {
		capped = append(capped, fmt.Sprintf("CPUs %g", float64(s.NanoCPUs)/1e9))
	}
	capped = append(capped, fmt.Sprintf("processes %d", s.PidsLimit))
	out := strings.Join(capped, ", ")
	switch {
	case s.MemoryBytes <= 0 && s.NanoCPUs <= 0:
		out += "; memory and CPUs unlimited (sandbox-memory and sandbox-cpus cap them)"
	case s.MemoryBytes <= 0:
		out += "; memory unlimited (sandbox-memory caps it)"
	case s.NanoCPUs <= 0:
		out += "; CPUs unlimited (sandbox-cpus caps them)"
	}
	return out
}
