package box_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/hutchsandbox/hutch/internal/agent"
	"github.com/hutchsandbox/hutch/internal/agentbin"
	"github.com/hutchsandbox/hutch/internal/engine"
	"github.com/hutchsandbox/hutch/internal/imagebuild"
	"github.com/hutchsandbox/hutch/internal/project"
	"github.com/hutchsandbox/hutch/internal/project/box"
	"github.com/hutchsandbox/hutch/internal/testenv"
)

// fixture is one user of hutch against the real engine: their own home,
// config, state and run dirs, one project, and the static hutch binary
// (the agent of every container, and the CLI the multi-process tests run).
type fixture struct {
	cli   *client.Client
	eng   *engine.Engine
	bin   string
	agent agentbin.Binary
	// busybox is the default sandbox-image.
	busybox string

	home, config, state, run string
	// project is the project dir, resolved; name its container's name.
	project, name string

	progress syncBuffer
	// extraEnv is added to the environment of the hutch processes the
	// fixture runs.
	extraEnv []string

	changesMu sync.Mutex // guards the following
	// changes are what the boxes told Options.Changed: "event name why".
	changes []string
}

// changed is the fixture's boxes' Options.Changed.
func (f *fixture) changed(_ context.Context, event, name, why string) {
	f.changesMu.Lock()
	defer f.changesMu.Unlock()
	f.changes = append(f.changes, strings.TrimSpace(event+" "+name+" "+why))
}

// takeChanges returns the changes told so far and forgets them.
func (f *fixture) takeChanges() []string {
	f.changesMu.Lock()
	defer f.changesMu.Unlock()
	c := f.changes
	f.changes = nil
	return c
}

// newFixture makes a project dir named after the test (with an empty .git
// dir, so it is a project) and settings that run it on busybox as root,
// with settings merged over them. Everything it makes in the engine for
// the project (hutch's container, its home volume, any container labelled
// devcontainer.local_folder=<project>) is removed when the test ends.
func newFixture(t *testing.T, settings map[string]any) *fixture {
	t.Helper()
	return newFixtureNamed(t, settings, testenv.Name(t))
}

// newFixtureNamed is newFixture with the project dir named base, as a
// checkout is named after its project (the spec's default workspace
// folder, /workspaces/<base>, follows from it).
func newFixtureNamed(t *testing.T, settings map[string]any, base string) *fixture {
	t.Helper()
	cli := testenv.Docker(t)
	f := &fixture{cli: cli, busybox: testenv.BusyboxImage(t, cli), bin: testenv.HutchBinary(t)}
	eng, err := engine.Connect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = eng.Close() })
	f.eng = eng
	if f.agent, err = agentbin.Locate(f.bin); err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	f.home, f.config, f.state = filepath.Join(tmp, "home"), filepath.Join(tmp, "config"), filepath.Join(tmp, "state")
	dir := filepath.Join(tmp, base)
	for _, d := range []string{f.home, f.config, f.state, filepath.Join(dir, ".git")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// Unix socket paths are short; t.TempDir paths are not.
	if f.run, err = os.MkdirTemp("", "hp-"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = agent.RemoveSocketDir(f.run) }) // sealed socket dirs included
	if f.project, err = box.FindProject(dir, f.home); err != nil {
		t.Fatal(err)
	}
	f.name = project.ContainerName(f.project)
	// Cleanups run last-registered first: the volume goes after the
	// containers that mount it.
	t.Cleanup(func() { f.removeVolume(t) })
	testenv.CleanupContainers(t, cli, project.LabelLocalFolder+"="+f.project)
	f.removeVolume(t)

	s := map[string]any{project.KeyEnabled: true, project.KeyImage: f.busybox, project.KeyUser: "root"}
	maps.Copy(s, settings)
	f.writeSettings(t, s)
	return f
}

func (f *fixture) removeVolume(t *testing.T) {
	t.Helper()
	vol := project.HomeVolume(f.name)
	if _, err := f.cli.VolumeRemove(context.Background(), vol, client.VolumeRemoveOptions{Force: true}); err != nil && !engine.IsNotFound(err) {
		t.Errorf("removing the volume %s: %v", vol, err)
	}
}

// writeSettings writes the user's settings file.
func (f *fixture) writeSettings(t *testing.T, settings map[string]any) {
	t.Helper()
	// The sandbox is on for every test project unless a test says not.
	if _, ok := settings[project.KeyEnabled]; !ok {
		settings = maps.Clone(settings)
		settings[project.KeyEnabled] = true
	}
	data, err := json.MarshalIndent(settings, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.config, "settings.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// box resolves the project's spec from the settings file as `hutch
// project` does (without a devcontainer.json) and returns its Box.
func (f *fixture) box(t *testing.T) *box.Box {
	t.Helper()
	path := filepath.Join(f.config, "settings.json")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s, notes, err := project.ParseSettings(path, data)
	if err != nil {
		t.Fatal(err)
	}
	if len(notes) > 0 {
		t.Fatalf("settings notes: %q", notes)
	}
	spec, err := project.Resolve(project.Input{
		Project: f.project, Home: f.home, HostUID: os.Getuid(), HostGID: os.Getgid(),
		Settings: project.Effective(s, f.project), Flavor: string(f.eng.Flavor),
		RelayDir: box.RelayDir(f.state, f.name),
	})
	if err != nil {
		t.Fatal(err)
	}
	return box.New(box.Options{
		Engine: f.eng, StateDir: f.state, RunDir: f.run, Progress: &f.progress, SettingsFile: path,
		Agent:   func() (agentbin.Binary, error) { return f.agent, nil },
		Changed: f.changed,
	}, f.project, spec)
}

// up brings the box up; the target's agent connection is closed when the
// test ends.
func up(t *testing.T, b *box.Box) *box.Target {
	t.Helper()
	tg, err := b.Up(context.Background())
	if err != nil {
		t.Fatalf("Up: %v", err)
	}
	t.Cleanup(func() { _ = tg.Agent().Close() })
	return tg
}

// run runs argv in the target (dir "" = the workdir) and returns its
// stdout, stderr and exit code.
func run(t *testing.T, tg *box.Target, dir string, argv ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out, errb bytes.Buffer
	res, err := tg.Exec(ctx, argv, dir, box.IO{Stdout: &out, Stderr: &errb})
	if err != nil {
		t.Fatalf("Exec(%q): %v", argv, err)
	}
	return out.String(), errb.String(), res.ExitCode
}

// mustRun runs argv and fails the test unless it exits 0.
func mustRun(t *testing.T, tg *box.Target, dir string, argv ...string) string {
	t.Helper()
	out, errOut, code := run(t, tg, dir, argv...)
	if code != 0 {
		t.Fatalf("%q in the sandbox: exit %d\nstdout: %s\nstderr: %s", argv, code, out, errOut)
	}
	return out
}

// env is the environment of a hutch process of this fixture's user.
func (f *fixture) env() []string {
	return append(append(os.Environ(),
		"HOME="+f.home,
		"HUTCH_CONFIG_DIR="+f.config,
		"HUTCH_STATE_DIR="+f.state,
		"HUTCH_RUN_DIR="+f.run,
		"HUTCH_AGENT_BINARY="+f.bin,
	), f.extraEnv...)
}

// command is `hutch project -C <project> args...` as this fixture's user,
// with stdin empty.
func (f *fixture) command(args ...string) *exec.Cmd {
	cmd := exec.Command(f.bin, append([]string{"project", "-C", f.project}, args...)...)
	cmd.Env = f.env()
	return cmd
}

// hutch runs `hutch project -C <project> args...` and returns its stdout,
// stderr and exit code.
func (f *fixture) hutch(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	return f.hutchIn(t, f.project, args...)
}

// hutchIn is hutch with -C dir.
func (f *fixture) hutchIn(t *testing.T, dir string, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, f.bin, append([]string{"project", "-C", dir}, args...)...)
	cmd.Env = f.env()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return out.String(), errb.String(), 0
	case errors.As(err, &ee) && ee.Exited():
		return out.String(), errb.String(), ee.ExitCode()
	}
	t.Fatalf("hutch project %s: %v\nstderr: %s", strings.Join(args, " "), err, errb.String())
	return "", "", -1
}

// mustHutch runs hutch and fails the test unless it exits 0.
func (f *fixture) mustHutch(t *testing.T, args ...string) (string, string) {
	t.Helper()
	out, errOut, code := f.hutch(t, args...)
	if code != 0 {
		t.Fatalf("hutch project %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, out, errOut)
	}
	return out, errOut
}

// running reports whether the container named name exists and whether
// it is running.
func (f *fixture) running(t *testing.T, name string) (exists, running bool) {
	t.Helper()
	res, err := f.cli.ContainerInspect(context.Background(), name, client.ContainerInspectOptions{})
	if engine.IsNotFound(err) {
		return false, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return true, res.Container.State != nil && res.Container.State.Running
}

// inspect inspects the container named name.
func (f *fixture) inspect(t *testing.T, name string) client.ContainerInspectResult {
	t.Helper()
	res, err := f.cli.ContainerInspect(context.Background(), name, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// sessions is the project container's session set as hutch keeps it.
func (f *fixture) sessions() *box.Sessions {
	return box.NewSessions(box.SessionDir(f.state, f.name))
}

// waitFor polls cond until it holds or d passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(d); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// debianBase resolves the local Debian bookworm base as hutch does.
func (f *fixture) debianBase(ctx context.Context, w io.Writer) (string, error) {
	return imagebuild.ResolveBase(ctx, f.eng, imagebuild.DefaultBase, w)
}

// slow marks a test that takes minutes. It is skipped with -short, but
// never in CI: Docker-backed tests must not skip there.
func slow(t *testing.T) {
	t.Helper()
	if testing.Short() && !inCI() {
		t.Skip("slow: skipped with -short (never in CI)")
	}
}

func inCI() bool { return testenv.InCI() }

// syncBuffer is a bytes.Buffer safe for concurrent use.
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

// buildsImages marks a test that builds images parallel, except on a
// Podman that kills build steps (engine.Engine.KillsBuildSteps): there it
// stays sequential, so it runs before the parallel tests start and no
// container is created beside its builds. Podman before 4.6 kills a RUN
// step's runtime when a thread of its own ends, which making a
// container's network namespace does (containers/podman#17918): this
// package's run against Podman 4.3 failed on it in 2 of 4 runs. hutch
// builds such a step again (engine.retryKilledStep), and yet 1 run in 3
// still failed so, on the recipe's apt-get step. Without an engine the
// test is parallel, and its fixture says why it cannot run.
func buildsImages(t *testing.T) {
	t.Helper()
	if !killsBuildSteps() {
		t.Parallel()
	}
}

// killsBuildSteps reports whether the engine the environment names is a
// Podman that kills build steps (false when none answers).
var killsBuildSteps = sync.OnceValue(func() bool {
	eng, err := engine.Connect(context.Background())
	if err != nil {
		return false
	}
	defer func() { _ = eng.Close() }()
	return eng.KillsBuildSteps()
})
