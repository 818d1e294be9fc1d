package box_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"

	"github.com/hutchsandbox/hutch/internal/engine"
	"github.com/hutchsandbox/hutch/internal/project"
	"github.com/hutchsandbox/hutch/internal/project/box"
)

// quoting are arguments a shell would mangle: each must reach the command
// as it is, through the agent and through the CLI.
var quoting = []string{
	"a b", "  lead and trail  ", "it's", `"double"`, `$HOME`, "${HOME}", "`id`", "$(id)",
	"line1\nline2", "tab\there", "*", "?", "", `back\slash`, "; echo pwned", "&& false", "|", ">x",
	"--flag", "-n", "üñí €", "#comment", "~",
}

// quotingWant is printf '[%s]\n' over quoting.
func quotingWant() string {
	var b strings.Builder
	for _, a := range quoting {
		b.WriteString("[" + a + "]\n")
	}
	return b.String()
}

// TestBox_UpExec brings a sandbox up on busybox and runs commands in it
// through the agent: output, exit code, environment, working directory,
// arguments that need quoting, stdin; then checks what the container was
// made with (limits, labels, mounts) and that the warm path attaches
// without the engine.
func TestBox_UpExec(t *testing.T) {
	t.Parallel()
	f := newFixture(t, map[string]any{
		project.KeyMemory: "256m",
		project.KeyCPUs:   1.5,
		project.KeyEnv:    []string{"FROM_SETTINGS=set in settings", "PATH=/usr/local/bin:/usr/bin:/bin"},
	})
	sub := filepath.Join(f.project, "sub dir")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	b := f.box(t)
	tg := up(t, b)
	if tg.Name != f.name || tg.Foreign || tg.Workdir != f.project {
		t.Errorf("target: name %q foreign %v workdir %q; want %q, false, %q", tg.Name, tg.Foreign, tg.Workdir, f.name, f.project)
	}
	for _, want := range []string{"Creating the sandbox", "Starting the sandbox", "Sandbox ready"} {
		if !strings.Contains(f.progress.String(), want) {
			t.Errorf("progress lacks %q:\n%s", want, f.progress.String())
		}
	}

	t.Run("output_and_exit_code", func(t *testing.T) {
		out, errOut, code := run(t, tg, "", "sh", "-c", "echo out; echo err >&2; exit 7")
		if out != "out\n" || errOut != "err\n" || code != 7 {
			t.Errorf("got stdout %q stderr %q exit %d; want \"out\\n\", \"err\\n\", 7", out, errOut, code)
		}
		if _, _, code := run(t, tg, "", "no-such-command"); code != 127 {
			t.Errorf("a missing command exited %d, want 127", code)
		}
	})
	t.Run("env", func(t *testing.T) {
		out := mustRun(t, tg, "", "sh", "-c", `printf '%s|%s|%s\n' "$HOME" "$FROM_SETTINGS" "$(id -u)"`)
		if want := "/sandbox/home|set in settings|0\n"; out != want {
			t.Errorf("env: %q, want %q", out, want)
		}
	})
	t.Run("cwd", func(t *testing.T) {
		if out := mustRun(t, tg, "", "pwd"); out != f.project+"\n" {
			t.Errorf("pwd = %q, want the project %q", out, f.project)
		}
		if out := mustRun(t, tg, sub, "pwd"); out != sub+"\n" {
			t.Errorf("pwd in %q = %q", sub, out)
		}
	})
	t.Run("quoting", func(t *testing.T) {
		out := mustRun(t, tg, "", append([]string{"printf", `[%s]\n`}, quoting...)...)
		if diff := cmp.Diff(quotingWant(), out); diff != "" {
			t.Errorf("arguments changed on the way (-want +got):\n%s", diff)
		}
	})
	t.Run("stdin", func(t *testing.T) {
		var out strings.Builder
		res, err := tg.Exec(context.Background(), []string{"sh", "-c", "tr a-z A-Z; echo done"}, "", box.IO{Stdin: strings.NewReader("hello\nworld\n"), Stdout: &out})
		if err != nil || res.ExitCode != 0 || out.String() != "HELLO\nWORLD\ndone\n" {
			t.Errorf("stdin: %q, exit %d, %v", out.String(), res.ExitCode, err)
		}
	})
	t.Run("cli", func(t *testing.T) {
		// The same through `hutch project exec`, a process of its own on
		// the warm path.
		out, errOut, code := f.hutch(t, append([]string{"exec", "--", "printf", `[%s]\n`}, quoting...)...)
		if diff := cmp.Diff(quotingWant(), out); diff != "" || code != 0 {
			t.Errorf("hutch project exec: exit %d, stderr %q, arguments changed on the way (-want +got):\n%s", code, errOut, diff)
		}
		out, errOut, code = f.hutch(t, "exec", "--", "sh", "-c", "echo out; echo err >&2; exit 7")
		if out != "out\n" || errOut != "err\n" || code != 7 {
			t.Errorf("hutch project exec: stdout %q stderr %q exit %d; want \"out\\n\", \"err\\n\", 7", out, errOut, code)
		}
		// One argument is a shell string, as for hutch exec; several are
		// the command's argv (the quoting case above).
		if out, errOut, code := f.hutch(t, "exec", "--", "echo one; echo two | tr a-z A-Z"); out != "one\nTWO\n" || code != 0 {
			t.Errorf("hutch project exec -- 'echo one; echo two | tr a-z A-Z': stdout %q stderr %q exit %d; want \"one\\nTWO\\n\", 0", out, errOut, code)
		}
		if out, _, _ := f.hutchIn(t, sub, "exec", "--", "pwd"); out != sub+"\n" {
			t.Errorf("hutch project -C %q exec -- pwd = %q", sub, out)
		}
		cmd := f.command("exec", "--", "sh", "-c", "wc -l")
		cmd.Stdin = strings.NewReader("1\n2\n3\n")
		if out, err := cmd.Output(); err != nil || strings.TrimSpace(string(out)) != "3" {
			t.Errorf("stdin through hutch project exec: %q, %v", out, err)
		}
	})
	t.Run("project_is_shared", func(t *testing.T) {
		mustRun(t, tg, "", "sh", "-c", "echo from inside > inside.txt")
		if data, err := os.ReadFile(filepath.Join(f.project, "inside.txt")); err != nil || string(data) != "from inside\n" {
			t.Errorf("a file written inside reads %q, %v on the host", data, err)
		}
	})
	t.Run("container", func(t *testing.T) {
		in := f.inspect(t, f.name)
		hc, cfg := in.Container.HostConfig, in.Container.Config
		if hc.Memory != 256<<20 || hc.MemorySwap != 256<<20 || hc.NanoCPUs != 1.5e9 || hc.PidsLimit == nil || *hc.PidsLimit != project.DefaultPidsLimit {
			t.Errorf("limits: memory %d swap %d nanocpus %d pids %v; want 256 MiB, 256 MiB, 1.5e9, 4096", hc.Memory, hc.MemorySwap, hc.NanoCPUs, hc.PidsLimit)
		}
		if !slices.Contains(hc.ExtraHosts, "host.docker.internal:host-gateway") && f.eng.Flavor == engine.FlavorDocker {
			t.Errorf("ExtraHosts %q lack host.docker.internal", hc.ExtraHosts)
		}
		want := map[string]string{
			project.LabelSandbox:     project.SandboxProject,
			project.LabelProject:     f.project,
			project.LabelOwner:       project.OwnerHutch,
			project.LabelLocalFolder: f.project,
			project.LabelSpec:        b.Spec().Hash,
		}
		if diff := cmp.Diff(want, cfg.Labels); diff != "" {
			t.Errorf("labels (-want +got):\n%s", diff)
		}
		if cfg.WorkingDir != f.project || cfg.User != "0:0" || !slices.Contains(cfg.Env, "HOME=/sandbox/home") {
			t.Errorf("config: workdir %q user %q env %q", cfg.WorkingDir, cfg.User, cfg.Env)
		}
		mounts := map[string]string{}
		for _, m := range in.Container.Mounts {
			what := string(m.Type) + " " + m.Name + m.Source
			if m.Type == mount.TypeVolume {
				what = string(m.Type) + " " + m.Name
			}
			if !m.RW {
				what += " ro"
			}
			mounts[m.Destination] = what
		}
		for dst, want := range map[string]string{
			f.project:          "bind " + f.project,
			"/sandbox/home":    "volume " + project.HomeVolume(f.name),
			"/sandbox/relay":   "bind " + box.RelayDir(f.state, f.name) + " ro",
			"/hutch/bin/hutch": "",
		} {
			got, ok := mounts[dst]
			switch {
			case !ok:
				t.Errorf("nothing mounted at %s; mounts %q", dst, mounts)
			case want != "" && got != want:
				t.Errorf("mount at %s is %q, want %q", dst, got, want)
			}
		}
		if !strings.HasSuffix(mounts["/hutch/bin/hutch"], " ro") {
			t.Errorf("the agent is mounted read-write: %q", mounts["/hutch/bin/hutch"])
		}
		// The agent is the container's init.
		if out := mustRun(t, tg, "", "cat", "/proc/1/cmdline"); !strings.HasPrefix(out, "/hutch/bin/hutch\x00agent\x00--init") {
			t.Errorf("pid 1 is %q, want the hutch agent", out)
		}
	})
	t.Run("status", func(t *testing.T) {
		s, err := b.Status(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if s.Name != f.name || s.State != "running" || s.Owner != "hutch" || s.Image != f.busybox || s.Limits != "memory 256 MiB, CPUs 1.5, processes 4096" {
			t.Errorf("Status = %+v", s)
		}
	})
	t.Run("attach_without_engine", func(t *testing.T) {
		warm := box.New(box.Options{StateDir: f.state, RunDir: f.run}, f.project, b.Spec())
		at := warm.Attach(context.Background())
		if at == nil {
			t.Fatal("Attach = nil for a running sandbox")
		}
		ag := at.Agent()
		defer func() { _ = ag.Close() }()
		if out := mustRun(t, at, "", "sh", "-c", "echo $HOME"); out != "/sandbox/home\n" {
			t.Errorf("warm exec: %q", out)
		}
	})
}

// TestBox_Lifecycle stops, starts, removes and rebuilds the sandbox: the
// home volume (logins, history) survives down + up and rebuild, and goes
// only with down --volumes.
func TestBox_Lifecycle(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ctx := context.Background()
	b := f.box(t)
	tg := up(t, b)
	mustRun(t, tg, "", "sh", "-c", "echo kept > /sandbox/home/login && ls -ld /sandbox/home")
	firstID := tg.ID

	stopped, err := b.Stop(ctx)
	if err != nil || !stopped {
		t.Fatalf("Stop = %v, %v; want true", stopped, err)
	}
	if exists, running := f.running(t, f.name); !exists || running {
		t.Fatalf("after Stop: exists %v running %v", exists, running)
	}
	if at := b.Attach(ctx); at != nil {
		_ = at.Agent().Close()
		t.Fatal("Attach answered for a stopped sandbox")
	}
	if stopped, err := b.Stop(ctx); err != nil || stopped {
		t.Errorf("second Stop = %v, %v; want false, nil", stopped, err)
	}
	tg = up(t, b) // starts the stopped one
	if tg.ID != firstID {
		t.Errorf("Up after Stop made a new container %s, want %s started again", tg.ID, firstID)
	}
	if out := mustRun(t, tg, "", "cat", "/sandbox/home/login"); out != "kept\n" {
		t.Errorf("after stop + up: %q", out)
	}

	removed, err := b.Down(ctx, false)
	if err != nil || !removed {
		t.Fatalf("Down = %v, %v", removed, err)
	}
	if exists, _ := f.running(t, f.name); exists {
		t.Fatal("the container exists after Down")
	}
	if _, err := f.cli.VolumeInspect(ctx, project.HomeVolume(f.name), client.VolumeInspectOptions{}); err != nil {
		t.Fatalf("the home volume is gone after Down: %v", err)
	}
	tg = up(t, b)
	if tg.ID == firstID {
		t.Error("Up after Down reused the removed container's id")
	}
	if out := mustRun(t, tg, "", "cat", "/sandbox/home/login"); out != "kept\n" {
		t.Errorf("after down + up: %q", out)
	}

	tg, err = b.Rebuild(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tg.Agent().Close() })
	if out := mustRun(t, tg, "", "cat", "/sandbox/home/login"); out != "kept\n" {
		t.Errorf("after rebuild: %q", out)
	}
	// What the event log is told: each container made, stopped, removed.
	want := []string{"created " + f.name, "stopped " + f.name, "removed " + f.name, "created " + f.name, "removed " + f.name, "created " + f.name + " rebuild"}
	if got := f.takeChanges(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("changes %q, want %q", got, want)
	}

	// Changed settings: the running container is reported as stale until
	// rebuilt.
	f.writeSettings(t, map[string]any{project.KeyImage: f.busybox, project.KeyUser: "root", project.KeyMemory: "128m"})
	b2 := f.box(t)
	s, err := b2.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !containsNote(s.Notes, "older settings") {
		t.Errorf("Status notes after a settings change: %q; want one saying to rebuild", s.Notes)
	}
	tg = up(t, b2)
	if !containsNote(tg.Notes, "older settings") {
		t.Errorf("Up notes after a settings change: %q; want one saying to rebuild", tg.Notes)
	}
	tg, err = b2.Rebuild(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tg.Agent().Close() })
	if containsNote(tg.Notes, "older settings") {
		t.Errorf("notes after rebuild: %q", tg.Notes)
	}
	if m := f.inspect(t, f.name).Container.HostConfig.Memory; m != 128<<20 {
		t.Errorf("memory after rebuild = %d, want 128 MiB", m)
	}

	if removed, err := b2.Down(ctx, true); err != nil || !removed {
		t.Fatalf("Down(volumes) = %v, %v", removed, err)
	}
	if _, err := f.cli.VolumeInspect(ctx, project.HomeVolume(f.name), client.VolumeInspectOptions{}); !engine.IsNotFound(err) {
		t.Errorf("the home volume after Down(volumes): %v, want not found", err)
	}
	if removed, err := b2.Down(ctx, true); err != nil || removed {
		t.Errorf("second Down = %v, %v; want false, nil", removed, err)
	}
}

// TestBox_NameTaken: a container with the sandbox's name that hutch did
// not create for the project is neither used, stopped nor removed.
func TestBox_NameTaken(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ctx := context.Background()
	startForeign(t, f, f.name, nil, "") // not labelled for the project
	b := f.box(t)
	if tg, err := b.Up(ctx); err == nil {
		_ = tg.Agent().Close()
		t.Fatal("Up used a container hutch did not create")
	} else if !strings.Contains(err.Error(), "hutch did not create") {
		t.Errorf("Up: %v", err)
	}
	if _, err := b.Stop(ctx); err == nil {
		t.Error("Stop stopped a container hutch did not create")
	}
	if _, err := b.Down(ctx, false); err == nil {
		t.Error("Down removed a container hutch did not create")
	}
	if exists, running := f.running(t, f.name); !exists || !running {
		t.Errorf("the stranger: exists %v running %v; want it left running", exists, running)
	}
}

func containsNote(notes []string, s string) bool {
	return slices.ContainsFunc(notes, func(n string) bool { return strings.Contains(n, s) })
}

// TestBox_Mounts: extra mounts from the settings (source:target:ro, a bare
// path at itself, ~ below the home) reach the container; a missing source
// is refused before anything is created; network none is applied, with a
// note.
func TestBox_Mounts(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	data := filepath.Join(filepath.Dir(f.project), "data")
	bare := filepath.Join(filepath.Dir(f.project), "bare")
	creds := filepath.Join(f.home, "creds")
	for dir, body := range map[string]string{data: "ro data\n", bare: "bare\n", creds: "token\n"} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "file"), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	settings := func(mounts ...string) map[string]any {
		return map[string]any{project.KeyImage: f.busybox, project.KeyUser: "root", project.KeyMount: mounts, project.KeyNetwork: "none"}
	}

	f.writeSettings(t, settings(data+":/data:ro", bare, "~/creds:/creds:ro"))
	b := f.box(t)
	if !containsNote(b.Spec().Notes, "sandbox-network is none") {
		t.Errorf("no note for network none: %q", b.Spec().Notes)
	}
	tg := up(t, b)
	out := mustRun(t, tg, "", "sh", "-c", `cat /data/file `+bare+`/file /creds/file; echo x > /data/new 2>/dev/null && echo WRITABLE || echo READONLY; echo y > `+bare+`/new && echo bare-rw; ls /sys/class/net`)
	if want := "ro data\nbare\ntoken\nREADONLY\nbare-rw\nlo\n"; out != want {
		t.Errorf("mounts and network inside: %q, want %q", out, want)
	}
	if mode := f.inspect(t, f.name).Container.HostConfig.NetworkMode; mode != "none" {
		t.Errorf("network mode %q, want none", mode)
	}
	if _, err := b.Down(context.Background(), true); err != nil {
		t.Fatal(err)
	}

	missing := filepath.Join(filepath.Dir(f.project), "missing")
	f.writeSettings(t, settings(missing+":/missing"))
	b = f.box(t)
	if tg, err := b.Up(context.Background()); err == nil {
		_ = tg.Agent().Close()
		t.Fatal("Up with a missing mount source succeeded")
	} else if !strings.Contains(err.Error(), "Mount source "+missing+" does not exist") {
		t.Errorf("Up with a missing mount source: %v", err)
	}
	if exists, _ := f.running(t, f.name); exists {
		t.Error("a container was created despite the missing mount source")
	}
	if _, err := os.Stat(missing); err == nil {
		t.Error("the missing mount source was created on the host")
	}
}
