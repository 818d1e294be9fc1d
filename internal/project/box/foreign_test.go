package box_test

import (
	"context"
	"strings"
	"testing"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/project"
	"github.com/hutchsandbox/hutch/internal/project/box"
)

// startForeign starts a busybox container named name that sleeps, with
// labels, mounting the project at mountAt (none when ""), as an editor
// would; it is removed when the test ends.
func startForeign(t *testing.T, f *fixture, name string, labels map[string]string, mountAt string) string {
	t.Helper()
	ctx := context.Background()
	hc := &container.HostConfig{}
	if mountAt != "" {
		hc.Mounts = []mount.Mount{{Type: mount.TypeBind, Source: f.project, Target: mountAt}}
	}
	c, err := f.cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Name:       name,
		Config:     &container.Config{Image: f.busybox, Cmd: []string{"sleep", "3600"}, Labels: labels, WorkingDir: mountAt},
		HostConfig: hc,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := f.cli.ContainerRemove(context.Background(), c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true}); err != nil && !strings.Contains(err.Error(), "No such container") {
			t.Errorf("removing %s: %v", name, err)
		}
	})
	if _, err := f.cli.ContainerStart(ctx, c.ID, client.ContainerStartOptions{}); err != nil {
		t.Fatal(err)
	}
	return c.ID
}

// TestBox_Foreign: a running container labelled
// devcontainer.local_folder=<project> that hutch did not create (an
// editor's) is entered, with the agent copied in, and is never stopped,
// removed or rebuilt, from the Box or from the CLI.
func TestBox_Foreign(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ctx := context.Background()
	foreign := "editor-" + f.name
	id := startForeign(t, f, foreign, map[string]string{project.LabelLocalFolder: f.project, "editor": "yes"}, f.project)
	b := f.box(t)
	tg := up(t, b)
	if !tg.Foreign || tg.Name != foreign || tg.ID != id || tg.Workdir != f.project {
		t.Fatalf("target: foreign %v name %q id %q workdir %q; want the editor's container %s at the project", tg.Foreign, tg.Name, tg.ID, tg.Workdir, foreign)
	}
	if !containsNote(tg.Notes, "a container hutch did not create") || containsNote(tg.Notes, "not at its own path") {
		t.Errorf("notes: %q", tg.Notes)
	}
	if out := mustRun(t, tg, "", "sh", "-c", "pwd; echo hi"); out != f.project+"\nhi\n" {
		t.Errorf("exec in the editor's container: %q", out)
	}
	if out := mustRun(t, tg, "", append([]string{"printf", `[%s]\n`}, quoting...)...); out != quotingWant() {
		t.Errorf("quoting in the editor's container: %q", out)
	}
	if out := mustRun(t, tg, "", "sh", "-c", "ls /.hutch/"); !strings.HasPrefix(out, "hutch-") {
		t.Errorf("the agent was not copied in: ls /.hutch/ = %q", out)
	}
	if exists, _ := f.running(t, f.name); exists {
		t.Errorf("hutch created its own container %s beside the editor's", f.name)
	}

	refuse := func(what string, err error) {
		t.Helper()
		if !errdefs.IsFailedPrecondition(err) || !strings.Contains(err.Error(), foreign) {
			t.Errorf("%s: %v; want a refusal naming %s", what, err, foreign)
		}
	}
	_, err := b.Stop(ctx)
	refuse("Stop", err)
	_, err = b.Down(ctx, true)
	refuse("Down", err)
	rt, err := b.Rebuild(ctx)
	if rt != nil {
		_ = rt.Agent().Close()
	}
	refuse("Rebuild", err)
	s, err := b.Status(ctx)
	if err != nil || s.Name != foreign || s.State != "running" || s.Owner != box.OwnerExternal {
		t.Errorf("Status = %+v, %v; want the editor's container, running, external", s, err)
	}

	// The CLI, in other processes, the same.
	for _, cmd := range []string{"stop", "down", "rebuild"} {
		_, errOut, code := f.hutch(t, cmd)
		if code == 0 || !strings.Contains(errOut, "was not created by hutch") {
			t.Errorf("hutch project %s: exit %d, stderr %q; want a refusal", cmd, code, errOut)
		}
	}
	if out, _ := f.mustHutch(t, "exec", "--", "echo", "via cli"); out != "via cli\n" {
		t.Errorf("hutch project exec in the editor's container: %q", out)
	}
	if exists, running := f.running(t, foreign); !exists || !running {
		t.Errorf("the editor's container: exists %v running %v; want it left running", exists, running)
	}
	if in := f.inspect(t, foreign); in.Container.Config.Labels["editor"] != "yes" || in.Container.Config.Labels[project.LabelOwner] != "" {
		t.Errorf("the editor's container's labels changed: %v", in.Container.Config.Labels)
	}
	// With persist off, the last session leaving does not stop it either.
	f.writeSettings(t, map[string]any{project.KeyImage: f.busybox, project.KeyUser: "root", project.KeyPersist: false})
	f.mustHutch(t, "exec", "--", "true")
	if _, running := f.running(t, foreign); !running {
		t.Error("the editor's container was stopped when the last session left")
	}
}

// TestBox_ForeignElsewhere: an editor's container that mounts the project
// somewhere else is entered there, with a note that worktrees will not
// work on both sides.
func TestBox_ForeignElsewhere(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	foreign := "editor-" + f.name
	startForeign(t, f, foreign, map[string]string{project.LabelLocalFolder: f.project}, "/workspaces/proj")
	tg := up(t, f.box(t))
	if !tg.Foreign || tg.Workdir != "/workspaces/proj" {
		t.Fatalf("target: foreign %v workdir %q", tg.Foreign, tg.Workdir)
	}
	if !containsNote(tg.Notes, "not at its own path") {
		t.Errorf("notes lack the identity-mount advisory: %q", tg.Notes)
	}
	if out := mustRun(t, tg, "", "pwd"); out != "/workspaces/proj\n" {
		t.Errorf("pwd = %q", out)
	}
}

// TestBox_ForeignStopped: a stopped editor's container is not adopted
// (hutch would have to start it); hutch makes its own instead and leaves
// the editor's alone.
func TestBox_ForeignStopped(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ctx := context.Background()
	foreign := "editor-" + f.name
	id := startForeign(t, f, foreign, map[string]string{project.LabelLocalFolder: f.project}, f.project)
	now := 0
	if _, err := f.cli.ContainerStop(ctx, id, client.ContainerStopOptions{Timeout: &now}); err != nil {
		t.Fatal(err)
	}
	b := f.box(t)
	tg := up(t, b)
	if tg.Foreign || tg.Name != f.name {
		t.Fatalf("target: foreign %v name %q; want hutch's own %s", tg.Foreign, tg.Name, f.name)
	}
	if _, err := b.Down(ctx, false); err != nil {
		t.Fatalf("Down of hutch's own beside a stopped editor's container: %v", err)
	}
	if exists, _ := f.running(t, foreign); !exists {
		t.Error("the editor's stopped container was removed")
	}
}

// TestBox_ForeignDevcontainerOff: with sandbox-devcontainer false, an
// editor's running devcontainer for the project is not entered (off is
// neither read nor adopted): hutch brings up its own container beside it,
// status, stop and down act on hutch's own, and the editor's container
// is left running and unchanged.
func TestBox_ForeignDevcontainerOff(t *testing.T) {
	t.Parallel()
	f := newFixture(t, map[string]any{project.KeyDevcontainer: false})
	ctx := context.Background()
	foreign := "editor-" + f.name
	startForeign(t, f, foreign, map[string]string{project.LabelLocalFolder: f.project, "editor": "yes"}, f.project)
	b := f.box(t)
	tg := up(t, b)
	if tg.Foreign || tg.Name != f.name || containsNote(tg.Notes, "a container hutch did not create") {
		t.Fatalf("target: foreign %v name %q notes %q; want hutch's own %s", tg.Foreign, tg.Name, tg.Notes, f.name)
	}
	s, err := b.Status(ctx)
	if err != nil || s.Name != f.name || s.Owner != "hutch" || s.State != "running" {
		t.Errorf("Status = %+v, %v; want hutch's own, running", s, err)
	}
	if out, errOut := f.mustHutch(t, "status"); !strings.Contains(out, f.name+" (running)") || strings.Contains(out, "external") {
		t.Errorf("hutch project status:\n%s%s", out, errOut)
	}
	if out, _ := f.mustHutch(t, "exec", "--", "hostname"); strings.TrimSpace(out) != tg.ID[:12] {
		t.Errorf("hutch project exec ran in %q, not in hutch's own container %s", out, tg.ID[:12])
	}
	if stopped, err := b.Stop(ctx); err != nil || !stopped {
		t.Errorf("Stop = %v, %v; want hutch's own stopped", stopped, err)
	}
	if removed, err := b.Down(ctx, false); err != nil || !removed {
		t.Errorf("Down = %v, %v; want hutch's own removed", removed, err)
	}
	if exists, running := f.running(t, foreign); !exists || !running {
		t.Errorf("the editor's container: exists %v running %v; want it left running", exists, running)
	}
}

// TestBox_ForeignRunsAsTheEditor: in an editor's container, commands run
// as the editor runs them: as the remoteUser and with the remoteEnv its
// devcontainer.metadata label records, not as the container's root.
func TestBox_ForeignRunsAsTheEditor(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	label := `[{"containerUser": "root"}, {"remoteUser": "nobody", "remoteEnv": {"EDITOR_SET": "yes", "P": "${containerEnv:PATH}:/x"}}]`
	startForeign(t, f, "editor-"+f.name, map[string]string{project.LabelLocalFolder: f.project, "devcontainer.metadata": label}, f.project)
	tg := up(t, f.box(t))
	if !tg.Foreign {
		t.Fatal("the editor's container was not entered")
	}
	out := mustRun(t, tg, "", "sh", "-c", `id -un; echo "[$EDITOR_SET]"; echo "$P"`)
	want := "nobody\n[yes]\n/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/x\n"
	if out != want {
		t.Errorf("a command in the editor's container:\n got %q\nwant %q", out, want)
	}
}
