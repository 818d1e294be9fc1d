package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/moby/moby/client"
	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"
	"golang.org/x/term"

	"github.com/hutchsandbox/hutch/internal/agentbin"
	"github.com/hutchsandbox/hutch/internal/api"
	"github.com/hutchsandbox/hutch/internal/atomicfile"
	"github.com/hutchsandbox/hutch/internal/devcontainer"
	"github.com/hutchsandbox/hutch/internal/engine"
	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/events"
	"github.com/hutchsandbox/hutch/internal/project"
	"github.com/hutchsandbox/hutch/internal/project/box"
	"github.com/hutchsandbox/hutch/internal/service"
)

func newProjectCmd(g *globals) *cobra.Command {
	var dir, config string
	cmd := &cobra.Command{
		Use:   "project",
		Short: "One shared sandbox container per checkout, for you and your agents",
		Long: `A team of coding agents and you share one container per project: the
checkout is mounted at its own path (so git worktrees work from both sides),
only the credentials you mount are there, and processes are capped (memory
and CPUs too, once sandbox-memory and sandbox-cpus set a ceiling). The
project is the nearest directory at or above the current one holding .git,
and a team member's worktree under <checkout>/.worktrees/ belongs to its
checkout; /, top-level directories and your home directory are refused.
The sandbox is off for a project until hutch project enable turns it on.

The container is named hutch-sbx-<slug>-<hash> and labelled so that editors
find it too; an editor's running container for the project is entered
instead and never stopped or removed. Its home (/sandbox/home) is a named
volume that survives rebuilds. The image is generated from a recipe (base,
packages, agent CLIs, setup lines) unless sandbox-image names one, and a
project's devcontainer.json is honoured once you approve it
(hutch project trust).

Settings live in <config-dir>/hutch/settings.json ($HUTCH_CONFIG_DIR), never
in the project: see hutch project settings.`,
	}
	cmd.PersistentFlags().StringVarP(&dir, "dir", "C", "", "act on the project holding this directory (default: the current directory)")
	cmd.PersistentFlags().StringVar(&config, "config", "", "the devcontainer.json to use, e.g. .devcontainer/cuda/devcontainer.json (default: .devcontainer/devcontainer.json, .devcontainer.json)")
	p := &projectCmd{g: g, dir: &dir, config: &config}
	cmd.AddCommand(p.upCmd(), p.shellCmd(), p.execCmd(), p.statusCmd(), p.stopCmd(), p.rebuildCmd(), p.downCmd(),
		p.settingsCmd(), p.configCmd(), p.trustCmd(), p.worktreeCmd(), p.mcpCmd(), p.enableCmd(true), p.enableCmd(false))
	return cmd
}

type projectCmd struct {
	g   *globals
	dir *string
	// config is --config: a devcontainer.json chosen by path.
	config *string
}

// loaded is one project with everything its commands need.
type loaded struct {
	dir      string
	settings project.Resolved
	notes    []string
	eng      *engine.Engine
	box      *box.Box
	dcPath   string
	dcData   []byte
	trust    *box.Trust
}

func (p *projectCmd) configDir() (string, error) {
	if d := p.g.env("HUTCH_CONFIG_DIR"); d != "" {
		return d, nil
	}
	d, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("no config dir: %w (set HUTCH_CONFIG_DIR)", err)
	}
	return filepath.Join(d, "hutch"), nil
}

// home is the user's home directory with its symlinks resolved, as the
// project and every mount are judged against it.
func (p *projectCmd) home() string {
	h := p.g.env("HOME")
	if h == "" {
		h, _ = os.UserHomeDir()
	}
	if real, err := filepath.EvalSymlinks(h); err == nil {
		return real
	}
	return h
}

// settings reads the settings file and the project's devcontainer.json
// (applied only once trusted) and resolves the project's settings.
func (p *projectCmd) settings() (*loaded, error) {
	start := *p.dir
	if start == "" {
		var err error
		if start, err = os.Getwd(); err != nil {
			return nil, err
		}
	}
	home := p.home()
	dir, err := box.FindProject(start, home)
	if err != nil {
		return nil, err
	}
	cfg, err := p.configDir()
	if err != nil {
		return nil, err
	}
	l := &loaded{dir: dir, trust: box.NewTrust(filepath.Join(cfg, "trusted-devcontainers.json"))}
	path := filepath.Join(cfg, "settings.json")
	data, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	var s project.Settings
	if data != nil {
		var notes []string
		if s, notes, err = project.ParseSettings(path, data); err != nil {
			return nil, err
		}
		l.notes = append(l.notes, notes...)
	}
	l.settings = project.Effective(s, dir)
	if *p.config != "" {
		if l.dcPath, err = p.chosenConfig(); err != nil {
			return nil, err
		}
		if l.dcData, err = os.ReadFile(l.dcPath); err != nil {
			return nil, err
		}
	} else if rel, ok := devcontainer.Find(func(rel string) bool {
		fi, err := os.Stat(filepath.Join(dir, rel))
		return err == nil && fi.Mode().IsRegular()
	}); ok {
		l.dcPath = filepath.Join(dir, rel)
		if l.dcData, err = os.ReadFile(l.dcPath); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// chosenConfig is --config as an absolute path, symlinks resolved (the
// labels and the trust store name the file itself), after checking it
// is a regular file.
func (p *projectCmd) chosenConfig() (string, error) {
	path, err := filepath.Abs(*p.config)
	if err != nil {
		return "", err
	}
	if real, err := filepath.EvalSymlinks(path); err == nil {
		path = real
	}
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", errdefs.New(errdefs.ErrNotFound, fmt.Sprintf("--config %s: no such file.", *p.config))
	case err != nil:
		return "", fmt.Errorf("--config %s: %w", *p.config, err)
	case !fi.Mode().IsRegular():
		return "", errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("--config %s is not a file; name a devcontainer.json.", *p.config))
	}
	return path, nil
}

// devcontainer returns the parsed devcontainer.json when it applies.
func (p *projectCmd) devcontainer(l *loaded) (*devcontainer.Config, error) {
	if l.dcPath == "" {
		return nil, nil
	}
	if !l.settings.Devcontainer {
		l.notes = append(l.notes, fmt.Sprintf("%s is not read: sandbox-devcontainer is off.", l.dcPath))
		return nil, nil
	}
	a := p.approval(l)
	ok, err := l.trust.Trusted(l.dir, a)
	if err != nil {
		return nil, err
	}
	if !ok {
		l.notes = append(l.notes, notApproved(l, a))
		return nil, nil
	}
	dc, err := p.parseDevcontainer(l)
	if err != nil {
		l.notes = append(l.notes, err.Error())
		return nil, nil
	}
	moved, err := l.trust.Moved(l.dir, box.ResolveSources(l.dir, bindSources(dc)))
	if err != nil {
		return nil, err
	}
	if moved != "" {
		l.notes = append(l.notes, fmt.Sprintf("%s is not applied: its %s (something changed a link on the way). Check it, then run `hutch project trust` to apply it.", l.dcPath, moved))
		return nil, nil
	}
	return dc, nil
}

func (p *projectCmd) parseDevcontainer(l *loaded) (*devcontainer.Config, error) {
	return devcontainer.Parse(l.dcPath, l.dcData, p.devcontainerVars(l))
}

// devcontainerVars are what the variables of l's devcontainer.json (and
// of an image's metadata) stand for.
func (p *projectCmd) devcontainerVars(l *loaded) devcontainer.Vars {
	// The id labels are the ones the sandbox is stamped with
	// (project.Labels), as an editor stamps its container.
	id := devcontainer.ID(map[string]string{project.LabelLocalFolder: l.dir, project.LabelConfigFile: l.dcPath})
	// The project is mounted at its own path, so that is where
	// ${containerWorkspaceFolder} is.
	return devcontainer.Vars{LocalWorkspaceFolder: l.dir, ContainerWorkspaceFolder: l.dir, DevcontainerID: id, Getenv: func(k string) (string, bool) {
		v := p.g.env(k)
		return v, v != ""
	}}
}

// refine is the box's Refine: in resolved again with an image's
// devcontainer.metadata merged under the file.
func (p *projectCmd) refine(l *loaded, in project.Input) func(label string) (project.Spec, error) {
	file := in.Devcontainer
	return func(label string) (project.Spec, error) {
		entries, notes := devcontainer.ParseMetadata(label, p.devcontainerVars(l))
		for _, e := range entries {
			// An image's and its features' containerEnv are in its
			// environment already (they are built in as ENV, where
			// ${PATH} in them meant the PATH before); given again to
			// the container, ${PATH} would stay as text.
			e.ContainerEnv = nil
		}
		in.Devcontainer = devcontainer.Merge(append(entries, file)...)
		sp, err := project.Resolve(in)
		if err != nil {
			return sp, err
		}
		sp.Notes = append(append(slices.Clone(l.notes), notes...), sp.Notes...)
		return sp, nil
	}
}

// dockerfileOf reads the Dockerfile dc's build property names, beneath
// the project without following links, for Resolve: nil when dc builds
// nothing (or sandbox-image wins), when the paths are refused (Resolve
// says why) or when the file is missing (Resolve says that too).
func dockerfileOf(l *loaded, dc *devcontainer.Config) ([]byte, error) {
	if dc == nil || dc.Build == nil || strings.TrimSpace(l.settings.Image) != "" {
		return nil, nil
	}
	path, _, err := project.BuildPaths(l.dir, dc, l.dcPath)
	if err != nil {
		return nil, nil
	}
	data, err := engine.ReadBuildFile(l.dir, path)
	if errdefs.IsNotFound(err) {
		return nil, nil
	}
	return data, err
}

// bindSources lists the bind mount sources of a devcontainer.json.
func bindSources(dc *devcontainer.Config) []string {
	var out []string
	for _, m := range dc.Mounts {
		if m.Type == "bind" && m.Source != "" {
			out = append(out, m.Source)
		}
	}
	return out
}

// load resolves the project fully and connects to the engine. When
// lenient is set (status, stop, down) a devcontainer.json the sandbox
// would refuse does not stop the command: it acts on the sandbox as
// named by the project alone, and the refusal becomes a note.
func (p *projectCmd) load(ctx context.Context, lenient bool) (*loaded, error) {
	l, err := p.settings()
	if err != nil {
		return nil, err
	}
	dc, err := p.devcontainer(l)
	if err != nil {
		return nil, err
	}
	svc, err := p.g.service()
	if err != nil {
		return nil, err
	}
	eng, err := engine.Connect(ctx)
	if err != nil {
		return nil, err
	}
	l.eng = eng
	name := project.ContainerName(l.dir)
	layout := svc.Layout()
	in := project.Input{
		Project: l.dir, Home: p.home(), HostUID: os.Getuid(), HostGID: os.Getgid(),
		Settings: l.settings, Devcontainer: dc, Flavor: string(eng.Flavor), Rootless: eng.Flavor == engine.FlavorPodman && rootless(ctx, eng),
		RelayDir: box.RelayDir(layout.StateDir, name),
	}
	if in.Dockerfile, err = dockerfileOf(l, dc); err != nil && !lenient {
		_ = eng.Close()
		return nil, err
	}
	spec, err := project.Resolve(in)
	if err != nil && dc != nil && lenient {
		l.notes = append(l.notes, fmt.Sprintf("%s is not applied: %v", l.dcPath, err))
		in.Devcontainer = nil
		spec, err = project.Resolve(in)
	}
	if err != nil {
		_ = eng.Close()
		return nil, err
	}
	spec.Notes = append(slices.Clone(l.notes), spec.Notes...)
	opts := p.boxOptions(eng, svc)
	if in.Devcontainer != nil {
		opts.Refine = p.refine(l, in)
	}
	if spec.Features != nil && !lenient {
		if opts.FeatureMirrors, err = p.featureMirrors(); err != nil {
			_ = eng.Close()
			return nil, err
		}
	}
	l.box = box.New(opts, l.dir, spec)
	return l, nil
}

func (p *projectCmd) boxOptions(eng *engine.Engine, svc *service.Service) box.Options {
	stateDir := svc.Layout().StateDir
	// The egress proxy reads the project's network policy from it per
	// connection; without it (no config dir) the spec's stays.
	settings, _ := p.settingsPath()
	return box.Options{Engine: eng, StateDir: stateDir, RunDir: svc.Layout().RunDir, Progress: p.g.stderr, Home: p.home(), SettingsFile: settings,
		Agent:   func() (agentbin.Binary, error) { return agentbin.LocateCached(p.g.env("HUTCH_AGENT_BINARY"), stateDir) },
		Changed: projectChanged(svc)}
}

// projectChanged records the changes to a project's sandbox in svc's
// event log, as the CLI's with its user, the container's name as their
// target.
func projectChanged(svc *service.Service) func(ctx context.Context, event, name, why string) {
	actions := map[string]string{"created": events.RuntimeCreated, "stopped": events.RuntimeStopped, "removed": events.RuntimeRemoved}
	return func(ctx context.Context, event, name, why string) {
		if action, ok := actions[event]; ok {
			svc.Record(ctx, action, name, why)
		}
	}
}

// record writes a change to the project's settings or approval to the
// event log, as the CLI's with its user. A log that cannot be written
// does not undo the change.
func (p *projectCmd) record(action, target, detail string) {
	if svc, err := p.g.service(); err == nil {
		svc.Record(context.Background(), action, target, detail)
	}
}

// attach is the warm path of a command: when hutch's own container of
// the project is running, its agent answers on the socket and nothing
// else is needed, not even the engine. The spec is resolved as for
// Docker without rootless; what that leaves out (extra hosts, user
// namespaces, the spec hash) shapes creating the container, never a
// command in it.
func (p *projectCmd) attach(ctx context.Context, l *loaded) *box.Target {
	dc, err := p.devcontainer(l)
	if err != nil {
		return nil
	}
	svc, err := p.g.service()
	if err != nil {
		return nil
	}
	layout := svc.Layout()
	name := project.ContainerName(l.dir)
	in := project.Input{
		Project: l.dir, Home: p.home(), HostUID: os.Getuid(), HostGID: os.Getgid(),
		Settings: l.settings, Devcontainer: dc, Flavor: project.FlavorDocker, RelayDir: box.RelayDir(layout.StateDir, name),
	}
	if in.Dockerfile, err = dockerfileOf(l, dc); err != nil {
		return nil
	}
	spec, err := project.Resolve(in)
	if err != nil {
		return nil
	}
	opts := p.boxOptions(nil, svc)
	if dc != nil {
		opts.Refine = p.refine(l, in)
	}
	l.box = box.New(opts, l.dir, spec)
	return l.box.Attach(ctx)
}

// onProject makes the RunE of a command that acts on the loaded project:
// it opens it (refusing a disabled one when enabled is set), runs fn and
// closes the engine connection.
func (p *projectCmd) onProject(enabled bool, fn func(ctx context.Context, l *loaded) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, _ []string) error {
		l, err := p.open(cmd.Context(), enabled)
		if err != nil {
			return err
		}
		defer func() { _ = l.eng.Close() }()
		return fn(cmd.Context(), l)
	}
}

// open loads the project for a command and, when enabled is set, refuses
// a project whose sandbox is off. The caller closes l.eng.
func (p *projectCmd) open(ctx context.Context, enabled bool) (*loaded, error) {
	l, err := p.load(ctx, !enabled)
	if err != nil {
		return nil, err
	}
	if enabled && !l.settings.Enabled {
		_ = l.eng.Close()
		return nil, p.errDisabled(l, "")
	}
	return l, nil
}

// rootless reports whether the engine runs without root (Docker lists
// "name=rootless" in its security options; so does Podman's compat API).
// Only Podman's answer changes the spec, and only Podman is asked: its
// GET /info takes a second (it asks dpkg about its helpers).
func rootless(ctx context.Context, eng *engine.Engine) bool {
	info, err := eng.Client.Info(ctx, client.InfoOptions{})
	if err != nil {
		return false
	}
	for _, o := range info.Info.SecurityOptions {
		if strings.Contains(o, "rootless") {
			return true
		}
	}
	return false
}

func (p *projectCmd) printNotes(notes []string) {
	for _, n := range notes {
		note(p.g.stderr, "hutch: note: %s\n", n)
	}
}

// up brings the sandbox up, reusing a running own container without a
// round trip to the engine when its agent answers.
func (p *projectCmd) up(ctx context.Context, l *loaded, fast bool) (*box.Target, error) {
	if fast {
		if t := l.box.Attach(ctx); t != nil {
			return t, nil
		}
	}
	t, err := l.box.Up(ctx)
	if err != nil {
		return nil, err
	}
	p.printNotes(t.Notes)
	return t, nil
}

// leave detaches a session; when it was the last and sandbox-persist is
// off, hutch's own container stops. Counting and stopping happen under
// the lifecycle lock that joining and bringing up take too.
func (p *projectCmd) leave(ctx context.Context, l *loaded, t *box.Target, sessions *box.Sessions, leave func()) {
	unlock, err := sessions.Lock()
	if err != nil {
		leave()
		note(p.g.stderr, "hutch: %v\n", err)
		return
	}
	defer unlock()
	leave()
	if l.settings.Persist || t.Foreign {
		return
	}
	if n, err := sessions.Count(); err != nil || n > 0 {
		return
	}
	if l.eng == nil {
		eng, err := engine.Connect(ctx)
		if err != nil {
			note(p.g.stderr, "hutch: could not stop the sandbox after the last session: %v\n", err)
			return
		}
		defer func() { _ = eng.Close() }()
		l.box.SetEngine(eng)
	}
	if _, err := l.box.Stop(context.WithoutCancel(ctx)); err != nil {
		note(p.g.stderr, "hutch: could not stop the sandbox after the last session: %v\n", err)
	}
}

// workdir maps the current directory into the container: the same path
// when it is inside the project (identity mount), else the workdir.
func (p *projectCmd) workdir(l *loaded, t *box.Target) string {
	cwd, err := os.Getwd()
	if *p.dir != "" {
		cwd, err = filepath.Abs(*p.dir)
	}
	if err != nil {
		return ""
	}
	if real, err := filepath.EvalSymlinks(cwd); err == nil {
		cwd = real
	}
	rel, err := filepath.Rel(l.dir, cwd)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return ""
	}
	return filepath.Join(t.Workdir, rel)
}

func (p *projectCmd) upCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "up",
		Short: "Bring the project's sandbox up (build, create or start as needed)",
		Long: `Bring the project's sandbox up: build its image if needed, then create or
start its container. The sandbox is off for a project until you turn it on
with hutch project enable; on a terminal, up offers to do that first.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			// A fresh checkout's sandbox is off: say so (or offer to turn
			// it on) before anything else, the engine included.
			l, err := p.settings()
			if err != nil {
				return err
			}
			if !l.settings.Enabled {
				on, err := p.offerEnable(l)
				if err != nil {
					return err
				}
				if !on {
					return p.errDisabled(l, "project up")
				}
			}
			return p.onProject(true, func(ctx context.Context, l *loaded) error {
				t, err := p.up(ctx, l, false)
				if err != nil {
					return err
				}
				return printf(p.g.stdout, "Sandbox %s is up for %s.\n", t.Name, l.dir)
			})(cmd, args)
		},
	}
}

// offerEnable asks, when stdin is a terminal, whether to turn the
// sandbox on for l's project, and does when the answer is yes. It
// reports whether the sandbox is on now.
func (p *projectCmd) offerEnable(l *loaded) (bool, error) {
	in, ok := p.g.stdin.(*os.File)
	if !ok || !term.IsTerminal(int(in.Fd())) {
		return false, nil
	}
	path, err := p.settingsPath()
	if err != nil {
		return false, err
	}
	note(p.g.stderr, "The sandbox is off for %s. Turn it on (sandbox-enabled for this project in %s)? [y/N] ", l.dir, path)
	answer, err := bufio.NewReader(in).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return false, err
	}
	switch strings.ToLower(strings.TrimSpace(answer)) {
	case "y", "yes":
	default:
		return false, nil
	}
	if err := p.setEnabled(l, true); err != nil {
		return false, err
	}
	note(p.g.stderr, "The sandbox is on for %s (sandbox-enabled in %s).\n", l.dir, path)
	return true, nil
}

func (p *projectCmd) shellCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "shell",
		Short: "Open an interactive login shell in the project's sandbox",
		Long: `Open an interactive login shell (bash when the image has it, else sh) in the
project's sandbox, in the current directory when it is inside the project.
It needs a terminal. The shell counts as one user of the container.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			in, ok := p.g.stdin.(*os.File)
			if !ok || !term.IsTerminal(int(in.Fd())) {
				return errdefs.New(errdefs.ErrInvalid, "hutch project shell needs a terminal; to run a command, use hutch project exec -- CMD")
			}
			return p.run(cmd.Context(), nil, "", true)
		},
	}
}

func (p *projectCmd) execCmd() *cobra.Command {
	var a agentLaunch
	cmd := &cobra.Command{
		Use:   "exec [--agent NAME [--mcp-config FILE] [--env KEY=URL]...] -- CMD [ARG...]",
		Short: "Run a command (an agent CLI, a build, ...) in the project's sandbox",
		Long: `Run a command in the project's sandbox, in the current directory when it is
inside the project, through a login shell so the image's PATH applies.
A single argument is a shell string run with sh -c, as in hutch exec;
several are run as they are, without a shell, each reaching the command
exactly as given. With a terminal on stdin the command gets a TTY;
otherwise its output streams are kept apart. The exit code is the
command's. The command counts as one user of the container.

With --agent, CMD is an agent CLI launched as it would be on the host, only
running in the sandbox. Inside a bridged container 127.0.0.1 is the
container itself, so every URL whose host is 127.0.0.1, localhost, ::1 or
0.0.0.0 in --env values and in the --mcp-config file is rewritten to the
engine's gateway host (host.docker.internal, or host.containers.internal on
Podman); other hosts are left alone, and nothing is rewritten under
sandbox-network host. The MCP config is written to hutch's state dir, into
the directory the container mounts read-only at /sandbox/relay, and the
agent gets its path there: in $HUTCH_MCP_CONFIG, and in place of any
argument that named the host file. A host service that listens only on
127.0.0.1 cannot be reached from the bridge: hutch warns and says how to
bind it.`,
		Example: "  hutch project exec -- make test\n" +
			"  hutch project exec -- 'pwd; id'\n" +
			"  hutch project exec --agent alice --mcp-config ./relay.mcp.json -- claude --mcp-config ./relay.mcp.json\n" +
			"  hutch project exec --agent bob --env RELAY_URL=http://127.0.0.1:7777 -- codex",
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return p.runAgent(cmd.Context(), args, "", false, a)
		},
	}
	cmd.Flags().StringVar(&a.name, "agent", "", "launch an agent CLI under this name (its MCP config becomes /sandbox/relay/NAME.mcp.json)")
	cmd.Flags().StringVar(&a.mcpConfig, "mcp-config", "", "the agent's MCP config on the host; loopback URLs in it are rewritten")
	cmd.Flags().StringArrayVar(&a.env, "env", nil, "KEY=VALUE for the agent; a loopback URL value is rewritten (repeatable)")
	return cmd
}

// run runs argv (a login shell when argv is nil) in dir ("" = the
// current directory mapped into the container).
func (p *projectCmd) run(ctx context.Context, argv []string, dir string, shell bool) error {
	return p.runAgent(ctx, argv, dir, shell, agentLaunch{})
}

// shellString applies the rule hutch exec has: a single argument is a
// shell string, run with sh -c; several are the command's argv, passed
// as they are. (nil, a login shell, stays nil.)
func shellString(argv []string) []string {
	if len(argv) == 1 {
		return []string{"sh", "-c", argv[0]}
	}
	return argv
}

// errDisabled is what commands that run things in a disabled project say:
// the exact commands to run, with -C when the project was named by it.
// again is the refused command after "hutch", or "" for "this command".
func (p *projectCmd) errDisabled(l *loaded, again string) error {
	path, _ := p.settingsPath()
	prefix := "hutch project"
	if *p.dir != "" {
		prefix += " -C " + shellWord(l.dir)
	}
	then := "run this command again"
	if sub, ok := strings.CutPrefix(again, "project "); ok {
		then = "`" + prefix + " " + sub + "`"
	}
	return errdefs.New(errdefs.ErrFailedPrecondition, fmt.Sprintf(
		"The sandbox is off for %s. Run `%s enable` to turn it on (it sets sandbox-enabled for this project in %s), then %s.", l.dir, prefix, path, then))
}

// shellWord quotes s for a POSIX shell when it holds anything but
// letters, digits and / . _ - : so a command a message shows can be
// pasted as it is.
func shellWord(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// settingsPath is the user's settings file.
func (p *projectCmd) settingsPath() (string, error) {
	cfg, err := p.configDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(cfg, "settings.json"), nil
}

// runAgent is run with an agent launch (see exec --agent).
func (p *projectCmd) runAgent(ctx context.Context, argv []string, dir string, shell bool, a agentLaunch) error {
	if a.set() {
		if err := a.validate(); err != nil {
			return err
		}
	}
	in, isFile := p.g.stdin.(*os.File)
	tty := isFile && term.IsTerminal(int(in.Fd()))
	l, err := p.settings()
	if err != nil {
		return err
	}
	if !l.settings.Enabled {
		return p.errDisabled(l, "")
	}
	svc, err := p.g.service()
	if err != nil {
		return err
	}
	// The session joins before the sandbox is brought up, under the
	// lifecycle lock, so a last session leaving in another process never
	// stops the container under this one.
	sessions := box.NewSessions(box.SessionDir(svc.Layout().StateDir, project.ContainerName(l.dir)))
	unlock, err := sessions.Lock()
	if err != nil {
		return err
	}
	leave, err := sessions.Join()
	if err != nil {
		unlock()
		return err
	}
	var t *box.Target
	if !tty && !a.set() {
		t = p.attach(ctx, l)
	}
	if t == nil {
		var full *loaded
		if full, err = p.load(ctx, false); err == nil {
			l = full
			defer func() { _ = full.eng.Close() }()
			t, err = p.up(ctx, l, false)
		}
	}
	unlock()
	if err != nil {
		leave()
		return err
	}
	defer p.leave(ctx, l, t, sessions, leave)
	if dir == "" {
		dir = p.workdir(l, t)
	}
	if a.set() {
		var extra []string
		if argv, extra, err = p.prepareAgent(ctx, l, t, a, argv); err != nil {
			return err
		}
		withEnv := *t
		withEnv.Env = append(slices.Clone(t.Env), extra...)
		t = &withEnv
	}
	argv = shellString(argv)
	code := 0
	if tty {
		if code, err = l.box.ExecTTY(ctx, t, argv, dir, in, p.g.stdout); err != nil {
			return err
		}
	} else {
		res, err := t.Exec(ctx, argv, dir, box.IO{Stdin: p.g.stdin, Stdout: p.g.stdout, Stderr: p.g.stderr})
		if err != nil {
			return err
		}
		code = res.ExitCode
		if res.Signal != "" {
			code = 128 + int(unix.SignalNum(res.Signal))
		}
	}
	if code != 0 {
		return &exitError{code: code}
	}
	return nil
}

func (p *projectCmd) statusCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the project's sandbox: engine, container, owner, users, image, limits, network, notes",
		Long: `Show the project's sandbox: the engine, the container and its state, who
made it, how many users are attached, its image, limits and network,
whether the sandbox is enabled and kept, and notes on what it could not
apply. Nothing changes.

--json prints one object: {project, engine, container, state, owner,
users, image, limits, network, enabled, persist, notes} (docs/api.md,
"Machine-readable output").`,
		Example: "  hutch project status\n  hutch project status --json | jq -r .state",
		Args:    cobra.NoArgs,
		RunE: p.onProject(false, func(ctx context.Context, l *loaded) error {
			s, err := l.box.Status(ctx)
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(p.g.stdout, projectStatus(l, s))
			}
			tw := tabwriter.NewWriter(p.g.stdout, 0, 4, 2, ' ', 0)
			out := &printer{w: tw}
			out.printf("Project\t%s\n", l.dir)
			out.printf("Engine\t%s\n", s.Engine)
			out.printf("Container\t%s (%s)\n", s.Name, s.State)
			out.printf("Owner\t%s\n", box.OwnerText(s.Owner))
			out.printf("Users\t%d attached\n", s.Sessions)
			out.printf("Image\t%s\n", s.Image)
			out.printf("Limits\t%s\n", s.Limits)
			out.printf("Network\t%s\n", s.Network)
			enabled := "yes"
			if !l.settings.Enabled {
				enabled = "no (hutch project enable turns it on)"
			}
			out.printf("Enabled\t%s\n", enabled)
			out.printf("Persist\t%s\n", persistText(l.settings.Persist))
			if err := out.flush(tw); err != nil {
				return err
			}
			return printNotesList(p.g.stdout, s.Notes)
		}),
	}
	jsonFlag(cmd, &asJSON)
	return cmd
}

// projectStatus is s as hutch project status --json prints it.
func projectStatus(l *loaded, s box.Status) api.ProjectStatus {
	notes := s.Notes
	if notes == nil {
		notes = []string{}
	}
	return api.ProjectStatus{Project: l.dir, Engine: s.Engine, Container: s.Name, State: s.State, Owner: s.Owner, Users: s.Sessions,
		Image: s.Image, Limits: s.Limits, Network: s.Network, Enabled: l.settings.Enabled, Persist: l.settings.Persist, Notes: notes}
}

// persistText is the Persist line of status: what sandbox-persist does
// with its current value.
func persistText(persist bool) string {
	if persist {
		return "yes (the container is kept when the last user leaves)"
	}
	return "no (the container stops when the last user leaves)"
}

func (p *projectCmd) stopCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "stop",
		Short: "Stop hutch's sandbox of the project (an editor's container is left alone)",
		Args:  cobra.NoArgs,
		RunE: p.onProject(false, func(ctx context.Context, l *loaded) error {
			stopped, err := l.box.Stop(ctx)
			if err != nil {
				return err
			}
			if stopped {
				return printf(p.g.stdout, "Stopped %s.\n", l.box.Spec().Name)
			}
			return printf(p.g.stdout, "%s is not running.\n", l.box.Spec().Name)
		}),
	}
}

func (p *projectCmd) rebuildCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "rebuild",
		Short: "Re-create hutch's sandbox of the project from the current settings",
		Long: `Remove hutch's container of the project and create it again from the
current settings and devcontainer.json, building the image when its recipe
changed. The home volume (logins, history) is kept. An editor's container is
left alone.`,
		Args: cobra.NoArgs,
		RunE: p.onProject(true, func(ctx context.Context, l *loaded) error {
			t, err := l.box.Rebuild(ctx)
			if err != nil {
				return err
			}
			p.printNotes(t.Notes)
			return printf(p.g.stdout, "Rebuilt %s.\n", t.Name)
		}),
	}
}

func (p *projectCmd) downCmd() *cobra.Command {
	var volumes bool
	cmd := &cobra.Command{
		Use:   "down",
		Short: "Remove hutch's sandbox of the project (the home volume stays)",
		Args:  cobra.NoArgs,
		RunE: p.onProject(false, func(ctx context.Context, l *loaded) error {
			removed, err := l.box.Down(ctx, volumes)
			if err != nil {
				return err
			}
			switch {
			case removed && volumes:
				return printf(p.g.stdout, "Removed %s and its home volume.\n", l.box.Spec().Name)
			case removed:
				return printf(p.g.stdout, "Removed %s; its home volume %s stays (--volumes removes it).\n", l.box.Spec().Name, project.HomeVolume(l.box.Spec().Name))
			default:
				return printf(p.g.stdout, "%s does not exist.\n", l.box.Spec().Name)
			}
		}),
	}
	cmd.Flags().BoolVar(&volumes, "volumes", false, "also remove the home volume (logins, shell history)")
	return cmd
}

func (p *projectCmd) settingsCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "settings",
		Short: "Show the project's effective sandbox settings and where each came from",
		Long: `Show every sandbox-* setting of the project: its effective value and where
it came from (the default, the settings file, or the file's override for
this project under "projects"). Entries that could not be used are listed
as notes; they never stop the sandbox.

--json prints one object: {project, settingsFile, settings: [{key, value,
from}], notes} (docs/api.md, "Machine-readable output").`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			l, err := p.settings()
			if err != nil {
				return err
			}
			cfg, _ := p.configDir()
			if asJSON {
				if _, err := p.devcontainer(l); err != nil {
					return err
				}
				out := api.ProjectSettings{Project: l.dir, SettingsFile: filepath.Join(cfg, "settings.json"), Settings: []api.ProjectSetting{}, Notes: []string{}}
				for _, row := range l.settings.Table() {
					out.Settings = append(out.Settings, api.ProjectSetting{Key: row[0], Value: row[1], From: row[2]})
				}
				out.Notes = append(out.Notes, l.notes...)
				return printJSON(p.g.stdout, out)
			}
			if err := printf(p.g.stdout, "Project %s (settings: %s)\n", l.dir, filepath.Join(cfg, "settings.json")); err != nil {
				return err
			}
			tw := tabwriter.NewWriter(p.g.stdout, 0, 4, 2, ' ', 0)
			out := &printer{w: tw}
			out.println("KEY\tVALUE\tFROM")
			for _, row := range l.settings.Table() {
				out.printf("%s\t%s\t%s\n", row[0], row[1], row[2])
			}
			if err := out.flush(tw); err != nil {
				return err
			}
			if _, err := p.devcontainer(l); err != nil {
				return err
			}
			return printNotesList(p.g.stdout, l.notes)
		},
	}
	cmd.AddCommand(p.settingsSetCmd(true), p.settingsSetCmd(false))
	jsonFlag(cmd, &asJSON)
	return cmd
}

// settingsSetCmd is `hutch project settings set KEY VALUE` (set) or
// `unset KEY`: one key of the user's settings file, for this project or,
// with --global, for every project. Values are never printed: sandbox-env
// often holds tokens.
func (p *projectCmd) settingsSetCmd(set bool) *cobra.Command {
	var global bool
	use, short, args := "set KEY VALUE", "Set one sandbox-* setting for this project (--global: for every project)", cobra.ExactArgs(2)
	if !set {
		use, short, args = "unset KEY", "Remove one sandbox-* setting for this project (--global: for every project)", cobra.ExactArgs(1)
	}
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Long: short + `.

The setting is written to <config-dir>/hutch/settings.json: into the
project's override under "projects", or at the top level with --global;
nothing is written inside the project, and the rest of the file is kept.
VALUE is read as the file reads it: JSON when it is JSON ([], true, 4,
["jq","make"]), else a string (8g, debian:12). A value the file could not
use is refused and nothing is written. hutch project settings lists the
keys and the effective values.`,
		Example: "  hutch project settings set sandbox-agents '[]'\n" +
			"  hutch project settings set sandbox-packages '[\"jq\",\"make\"]'\n" +
			"  hutch project settings set --global sandbox-memory 8g\n" +
			"  hutch project settings set sandbox-network allowlist\n" +
			"  hutch project settings set sandbox-network-allow 'api.anthropic.com,github.com,*.npmjs.org'\n" +
			"  hutch project settings unset sandbox-memory",
		Args: args,
		RunE: func(cmd *cobra.Command, args []string) error {
			path, err := p.settingsPath()
			if err != nil {
				return err
			}
			dir, scope := "", "every project"
			if !global {
				l, err := p.settings()
				if err != nil {
					return err
				}
				dir, scope = l.dir, l.dir
			}
			var value *string
			if set {
				value = &args[1]
			}
			data, err := os.ReadFile(path)
			if err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
			out, err := project.SetSetting(data, dir, args[0], value)
			if err != nil {
				if errdefs.IsInvalid(err) {
					return err
				}
				return fmt.Errorf("%s: %w", path, err)
			}
			if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
				return err
			}
			if err := atomicfile.WriteFile(path, out, 0o600); err != nil {
				return err
			}
			verb := "Set"
			if !set {
				verb = "Unset"
			}
			// The key alone: a value may be a credential (sandbox-env).
			target := dir
			if global {
				target = "global"
			}
			p.record(events.ProjectSetting, target, strings.ToLower(verb)+" "+args[0])
			return printf(p.g.stdout, "%s %s for %s in %s.\n", verb, args[0], scope, path)
		},
	}
	cmd.Flags().BoolVar(&global, "global", false, "the top level of the settings file: every project without an override")
	return cmd
}

func (p *projectCmd) trustCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "trust",
		Short: "Approve the project's devcontainer.json as it is now",
		Long: `Approve the project's devcontainer.json as it is now. Agents can edit the
project, and a devcontainer.json decides mounts, environment and the user
the container runs as, so hutch applies only content you approved: after
any change, it is ignored (with a note) until you run this again. The
approval covers the Dockerfile its build names and the files of its local
features too: they run when the image is built. Read them first.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			l, err := p.settings()
			if err != nil {
				return err
			}
			if l.dcPath == "" {
				return errdefs.New(errdefs.ErrNotFound, fmt.Sprintf("%s has no devcontainer.json (looked for %s)", l.dir, strings.Join(devcontainer.Candidates, ", ")))
			}
			// A file that does not parse is approved all the same (its
			// error is noted wherever it is read); it has no sources.
			var sources map[string]string
			if dc, err := p.parseDevcontainer(l); err == nil {
				sources = box.ResolveSources(l.dir, bindSources(dc))
			}
			a := p.approval(l)
			if err := l.trust.Approve(l.dir, a, sources); err != nil {
				return err
			}
			p.record(events.ProjectTrust, l.dir, l.dcPath+" sha256 "+a.Digest()[:12])
			if err := printf(p.g.stdout, "Approved %s (sha256 %s); run `hutch project rebuild` to apply it to a running sandbox.\n", l.dcPath, a.Digest()[:12]); err != nil {
				return err
			}
			if err := printInputs(p.g.stdout, a.Inputs); err != nil {
				return err
			}
			return printSources(p.g.stdout, sources)
		},
	}
}

// printSources lists the bind sources outside the project an approval
// pinned, and where they resolve: the user approves those too.
func printSources(w io.Writer, sources map[string]string) error {
	if len(sources) == 0 {
		return nil
	}
	names := make([]string, 0, len(sources))
	for s := range sources {
		names = append(names, s)
	}
	sort.Strings(names)
	if err := printf(w, "Mount sources outside the project, as approved (a change of where one resolves needs approval again):\n"); err != nil {
		return err
	}
	for _, s := range names {
		if err := printf(w, "  %s -> %s\n", s, sources[s]); err != nil {
			return err
		}
	}
	return nil
}

func (p *projectCmd) worktreeCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "worktree <member> [-- CMD [ARG...]]",
		Short: "Give a team member a git worktree under the project and run there",
		Long: `Make sure <member> has a git worktree at .worktrees/<member> (on branch
<member>, made from HEAD the first time), created inside the sandbox, then
run CMD there (one argument is a shell string, as for exec), or a login
shell without one. The project is mounted at its own path, so the worktree
works with git from the host as well, and hutch project commands run from
it act on the project's sandbox.`,
		Example: "  hutch project worktree reviewer -- git status\n  hutch project worktree alice",
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			l, err := p.load(ctx, false)
			if err != nil {
				return err
			}
			if !l.settings.Enabled {
				_ = l.eng.Close()
				return p.errDisabled(l, "")
			}
			t, err := p.up(ctx, l, true)
			if err != nil {
				_ = l.eng.Close()
				return err
			}
			dir, err := l.box.Worktree(ctx, t, args[0])
			_ = l.eng.Close()
			if err != nil {
				return err
			}
			if len(args) == 1 {
				in, ok := p.g.stdin.(*os.File)
				if !ok || !term.IsTerminal(int(in.Fd())) {
					return printf(p.g.stdout, "Worktree %s is ready.\n", dir)
				}
				return p.run(ctx, nil, dir, true)
			}
			return p.run(ctx, args[1:], dir, false)
		},
	}
}

// enableCmd is `hutch project enable` (on) or `disable`: sandbox-enabled
// for this project, written to the user's settings file, never into the
// project.
func (p *projectCmd) enableCmd(on bool) *cobra.Command {
	use, short := "enable", "Turn the sandbox on for this project"
	if !on {
		use, short = "disable", "Turn the sandbox off for this project (the container is left as it is)"
	}
	return &cobra.Command{
		Use:   use,
		Short: short,
		Long: short + `.

This sets sandbox-enabled in the project's override ("projects" in
<config-dir>/hutch/settings.json); nothing is written inside the project.
While it is off, up, shell, exec, worktree and rebuild refuse and say how
to turn it on.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			l, err := p.settings()
			if err != nil {
				return err
			}
			if err := p.setEnabled(l, on); err != nil {
				return err
			}
			path, err := p.settingsPath()
			if err != nil {
				return err
			}
			state := "on"
			if !on {
				state = "off"
			}
			return printf(p.g.stdout, "The sandbox is %s for %s (sandbox-enabled in %s).\n", state, l.dir, path)
		},
	}
}

// setEnabled sets sandbox-enabled for l's project in the user's settings
// file, never inside the project.
func (p *projectCmd) setEnabled(l *loaded, on bool) error {
	path, err := p.settingsPath()
	if err != nil {
		return err
	}
	data, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	out, err := project.SetOverride(data, l.dir, project.KeyEnabled, on)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return atomicfile.WriteFile(path, out, 0o600)
}

// printNotesList writes notes under a "Notes:" heading, none when empty.
func printNotesList(w io.Writer, notes []string) error {
	if len(notes) == 0 {
		return nil
	}
	out := &printer{w: w}
	out.println("Notes:")
	for _, n := range notes {
		out.println("  " + n)
	}
	return out.err
}
