package service_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"

	"github.com/hutchsandbox/hutch/internal/agent"
	"github.com/hutchsandbox/hutch/internal/engine"
	"github.com/hutchsandbox/hutch/internal/migrate/legacytest"
	"github.com/hutchsandbox/hutch/internal/office"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/sandbox/image"
	"github.com/hutchsandbox/hutch/internal/service"
	"github.com/hutchsandbox/hutch/internal/testenv"
	"github.com/hutchsandbox/hutch/internal/vault"
)

// TestMigrate_ManagedContainerSurvives migrates a workspace whose
// conversation has a managed container of the raw-id layout, with a file
// written under /opt inside it: after the migration the container runs on
// the office paths with the file, the daemon's reconcile keeps it, and a
// command of the conversation sees both the file and the office.
func TestMigrate_ManagedContainerSurvives(t *testing.T) {
	cli := testenv.Docker(t)
	img := testenv.BusyboxImage(t, cli)
	ctx := context.Background()
	run, err := os.MkdirTemp("", "hr-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = agent.RemoveSocketDir(run) }) // sealed socket dirs included
	root := t.TempDir()
	layout, err := service.ResolveLayout(service.LayoutOptions{StateDir: filepath.Join(root, "state"), Workspace: filepath.Join(root, "ws"),
		Getenv: func(k string) string {
			if k == "HUTCH_RUN_DIR" {
				return run
			}
			return ""
		}})
	if err != nil {
		t.Fatal(err)
	}
	rawID := "C" + strings.ToUpper(strings.ReplaceAll(testenv.Name(t), "-", ""))
	if len(rawID) > 40 {
		rawID = rawID[:40]
	}
	addr := office.Address{Platform: office.PlatformSlack, ConversationID: rawID}
	key := string(addr.Key())
	// Registered first so that it runs after the containers are gone: the
	// snapshots of the re-creates (untagged by then) go too.
	t.Cleanup(func() {
		imgs, err := cli.ImageList(context.Background(), client.ImageListOptions{All: true,
			Filters: make(client.Filters).Add("label", engine.LabelSnapshotOf+"="+image.ContainerName(key))})
		if err != nil {
			t.Error(err)
			return
		}
		// A snapshot made from an earlier one is its child: the engine
		// removes children first, so go round until nothing is left.
		left := imgs.Items
		for pass := 0; len(left) > 0 && pass < 5; pass++ {
			var next = left[:0]
			for _, im := range left {
				_, err := cli.ImageRemove(context.Background(), im.ID, client.ImageRemoveOptions{Force: true, PruneChildren: true})
				switch {
				case err == nil, engine.IsNotFound(err):
				case engine.IsConflict(err) || strings.Contains(err.Error(), "dependent child"):
					next = append(next, im)
				default:
					t.Errorf("remove snapshot %s: %v", im.ID, err)
				}
			}
			left = next
		}
		if len(left) > 0 {
			t.Errorf("%d snapshot image(s) could not be removed", len(left))
		}
	})
	testenv.CleanupContainers(t, cli, engine.LabelStateDir+"="+layout.StateDir)
	if err := legacytest.Populate(layout.Workspace, layout.StateDir, []legacytest.Conversation{{RawID: rawID, Vault: true, State: true}}); err != nil {
		t.Fatal(err)
	}
	legacyKey := vault.ConversationKey(rawID)
	ins, err := cli.ImageInspect(ctx, img)
	if err != nil {
		t.Fatal(err)
	}
	stop := 1
	res, err := cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Name: image.ContainerName(legacyKey),
		Config: &container.Config{
			Image: img, Entrypoint: []string{"/bin/sleep"}, Cmd: []string{"3600"}, WorkingDir: "/workspace/" + rawID, StopTimeout: &stop,
			Labels: map[string]string{
				engine.LabelManaged: "true", engine.LabelMode: string(sandbox.KindImage), engine.LabelStateDir: layout.StateDir,
				engine.LabelOffice: legacyKey, engine.LabelConversation: rawID, engine.LabelImageID: ins.ID, engine.LabelImage: img,
				engine.LabelFingerprint: "raw-id-layout",
			},
		},
		HostConfig: &container.HostConfig{Mounts: []mount.Mount{
			{Type: mount.TypeBind, Source: filepath.Join(layout.Workspace, rawID), Target: "/workspace/" + rawID},
			{Type: mount.TypeBind, Source: filepath.Join(layout.StateDir, "vaults", legacyKey, "env"), Target: "/root/.env", ReadOnly: true},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.ContainerStart(ctx, res.ID, client.ContainerStartOptions{}); err != nil {
		t.Fatal(err)
	}
	if out, code := dockerExec(t, cli, res.ID, "sh", "-c", "mkdir -p /opt && echo kept > /opt/keep"); code != 0 {
		t.Fatalf("write /opt/keep: %d %s", code, out)
	}

	svc := service.New(layout, nil)
	svc.SetAgentBinary(testenv.HutchBinary(t))
	t.Cleanup(func() { _ = svc.Close() })
	rep, err := svc.Migrate(ctx, service.MigrateOptions{Platforms: []office.Platform{office.PlatformSlack}})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Moved != 1 || rep.HostMoved != 2 || rep.RelayoutError != nil || !slices.Equal(rep.Containers.Migrated, []string{image.ContainerName(key)}) {
		t.Fatalf("report %+v (containers %+v)", rep.Report, rep.Containers)
	}
	got, err := cli.ContainerInspect(ctx, image.ContainerName(key), client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !got.Container.State.Running {
		t.Error("the migrated container is not running")
	}
	wantMounts := map[string]string{
		"/workspace/" + key: filepath.Join(layout.Workspace, key),
		"/root/.env":        filepath.Join(layout.StateDir, "vaults", key, "env"),
	}
	for _, m := range got.Container.Mounts {
		if want, ok := wantMounts[m.Destination]; !ok || m.Source != want {
			t.Errorf("mount %s <- %s; want the office paths %v", m.Destination, m.Source, wantMounts)
		}
	}
	if out, code := dockerExec(t, cli, got.Container.ID, "cat", "/opt/keep", "/workspace/"+key+"/log.jsonl"); code != 0 || !strings.HasPrefix(out, "kept\n{") {
		t.Errorf("inside the migrated container: %d %q", code, out)
	}

	// What hutch serve does next: reconcile keeps it, the first command
	// of the conversation runs there (re-created on the runtime's own
	// terms, files kept).
	if rr, err := svc.Reconcile(ctx); err != nil || len(rr.Removed) != 0 {
		t.Fatalf("reconcile: %+v %v", rr, err)
	}
	var out bytes.Buffer
	r, err := svc.Exec(ctx, service.ExecOptions{Address: addr, Mode: sandbox.Mode{Kind: sandbox.KindImage, Target: img},
		Argv: []string{"cat /opt/keep; cat log.jsonl; pwd"}, Stdout: &out, Stderr: &out, Timeout: time.Minute})
	if err != nil || r.ExitCode != 0 {
		t.Fatalf("exec: %v %+v %s", err, r, out.String())
	}
	if want := "kept\n{"; !strings.HasPrefix(out.String(), want) || !strings.HasSuffix(out.String(), "/workspace/"+key+"\n") {
		t.Errorf("exec output %q", out.String())
	}

	rep, err = svc.Migrate(ctx, service.MigrateOptions{Platforms: []office.Platform{office.PlatformSlack}})
	if err != nil || rep.Moved+rep.HostMoved+len(rep.Containers.Migrated)+len(rep.Containers.Resumed) != 0 {
		t.Errorf("second migration: %+v %+v %v", rep.Report, rep.Containers, err)
	}
}

func dockerExec(t *testing.T, cli *client.Client, id string, argv ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ex, err := cli.ExecCreate(ctx, id, client.ExecCreateOptions{Cmd: argv, AttachStdout: true, AttachStderr: true})
	if err != nil {
		t.Fatal(err)
	}
	att, err := cli.ExecAttach(ctx, ex.ID, client.ExecAttachOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer att.Close()
	var out bytes.Buffer
	if _, err := stdcopy.StdCopy(&out, &out, att.Reader); err != nil {
		t.Fatal(err)
	}
	for {
		in, err := cli.ExecInspect(ctx, ex.ID, client.ExecInspectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !in.Running {
			return out.String(), in.ExitCode
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestMigrate_ForeignContainer: a container an earlier installation made
// (no hutch label) that binds a raw-id directory is found and stops the
// migration, named with what to do, and nothing moves from under it; once
// it is removed the migration runs.
func TestMigrate_ForeignContainer(t *testing.T) {
	cli := testenv.Docker(t)
	img := testenv.BusyboxImage(t, cli)
	ctx := context.Background()
	root := t.TempDir()
	layout, err := service.ResolveLayout(service.LayoutOptions{StateDir: filepath.Join(root, "state"), Workspace: filepath.Join(root, "ws"), Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	const rawID = "C0FOREIGN1"
	if err := legacytest.Populate(layout.Workspace, layout.StateDir, []legacytest.Conversation{{RawID: rawID, SanitizedVault: true}}); err != nil {
		t.Fatal(err)
	}
	// testenv.Name differs on every call: take it once, for the name and
	// the label the cleanup finds the container by.
	name, label := testenv.Name(t), "hutchtest.foreign"
	testenv.CleanupContainers(t, cli, label+"="+name)
	stop := 1
	res, err := cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Name: name,
		Config: &container.Config{Image: img, Entrypoint: []string{"/bin/sleep"}, Cmd: []string{"3600"}, StopTimeout: &stop,
			Labels: map[string]string{label: name}},
		HostConfig: &container.HostConfig{Mounts: []mount.Mount{
			{Type: mount.TypeBind, Source: filepath.Join(layout.Workspace, rawID), Target: "/workspace"},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.ContainerStart(ctx, res.ID, client.ContainerStartOptions{}); err != nil {
		t.Fatal(err)
	}

	svc := service.New(layout, nil)
	t.Cleanup(func() { _ = svc.Close() })
	slack := []office.Platform{office.PlatformSlack}
	rep, err := svc.Migrate(ctx, service.MigrateOptions{Platforms: slack, DryRun: true})
	if err != nil || rep.ContainerCheckError != nil {
		t.Fatalf("dry run: %v (containers: %v)", err, rep.ContainerCheckError)
	}
	want := "Container " + name + " (not managed by hutch) binds " + filepath.Join(layout.Workspace, rawID) + ", a raw-id path of " + rawID
	if !slices.Contains(rep.Plan.Blockers(), want) {
		t.Errorf("dry-run blockers %q lack %q", rep.Plan.Blockers(), want)
	}
	_, err = svc.Migrate(ctx, service.MigrateOptions{Platforms: slack})
	if err == nil || !strings.Contains(err.Error(), "  "+name+" ("+res.ID[:12]+"): "+filepath.Join(layout.Workspace, rawID)+"  ("+rawID+")\n") {
		t.Fatalf("migrate with the container there: %v", err)
	}
	if _, err := os.Stat(filepath.Join(layout.Workspace, rawID, "log.jsonl")); err != nil {
		t.Fatalf("the directory moved from under the container: %v", err)
	}

	if _, err := cli.ContainerRemove(ctx, res.ID, client.ContainerRemoveOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	rep, err = svc.Migrate(ctx, service.MigrateOptions{Platforms: slack})
	if err != nil || rep.Moved != 1 || rep.HostMoved != 1 {
		t.Fatalf("migrate once the container is gone: %+v, %v", rep.Report, err)
	}
}
