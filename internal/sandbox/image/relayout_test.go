package image

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"

	"github.com/hutchsandbox/hutch/internal/agent"
	"github.com/hutchsandbox/hutch/internal/agentbin"
	"github.com/hutchsandbox/hutch/internal/engine"
	"github.com/hutchsandbox/hutch/internal/office"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/testenv"
)

func TestRelayout_Translate(t *testing.T) {
	mv := LayoutMove{
		RawID: "C1", Platform: "slack", OfficeKey: "K",
		HostPaths: map[string]string{
			"/ws/C1":              "/ws/K",
			"/s/vaults/v1/":       "/s/vaults/K",
			"/s/vaults/v1/nested": "/s/elsewhere",
		},
		GuestPaths: map[string]string{"/workspace/C1": "/workspace/K"},
	}
	bind := func(src, dst string, ro bool) mount.Mount {
		return mount.Mount{Type: mount.TypeBind, Source: src, Target: dst, ReadOnly: ro}
	}
	for _, tt := range []struct {
		name        string
		workdir     string
		mounts      []mount.Mount
		binds       []string
		wantWorkdir string
		wantMounts  []mount.Mount
		wantBinds   []string
		wantChanged bool
	}{
		{
			name:        "exact_path_and_guest",
			workdir:     "/workspace/C1",
			mounts:      []mount.Mount{bind("/ws/C1", "/workspace/C1", false)},
			wantWorkdir: "/workspace/K",
			wantMounts:  []mount.Mount{bind("/ws/K", "/workspace/K", false)},
			wantChanged: true,
		},
		{
			name:        "below_a_prefix",
			workdir:     "/workspace/C1/src",
			mounts:      []mount.Mount{bind("/ws/C1/notes.md", "/workspace/C1/notes.md", true)},
			wantWorkdir: "/workspace/K/src",
			wantMounts:  []mount.Mount{bind("/ws/K/notes.md", "/workspace/K/notes.md", true)},
			wantChanged: true,
		},
		{
			name:        "component_boundary",
			workdir:     "/workspace/C10",
			mounts:      []mount.Mount{bind("/ws/C10", "/workspace/C10", false), bind("/ws/C1x/a", "/workspace/C1.bak", false)},
			wantWorkdir: "/workspace/C10",
			wantMounts:  []mount.Mount{bind("/ws/C10", "/workspace/C10", false), bind("/ws/C1x/a", "/workspace/C1.bak", false)},
		},
		{
			name:        "longest_prefix_wins_and_read_only_kept",
			mounts:      []mount.Mount{bind("/s/vaults/v1/nested/token", "/root/token", true), bind("/s/vaults/v1/.netrc", "/root/.netrc", true)},
			wantMounts:  []mount.Mount{bind("/s/elsewhere/token", "/root/token", true), bind("/s/vaults/K/.netrc", "/root/.netrc", true)},
			wantChanged: true,
		},
		{
			name: "binds",
			binds: []string{
				"/ws/C1:/workspace/C1",
				"/s/vaults/v1/.netrc:/root/.netrc:ro",
				"/ws/C1:/workspace/C1:rw,rprivate,rbind",
				"cache:/workspace/C1/cache",
				"/ws/C10:/workspace/C10:ro",
			},
			wantBinds: []string{
				"/ws/K:/workspace/K",
				"/s/vaults/K/.netrc:/root/.netrc:ro",
				"/ws/K:/workspace/K:rw,rprivate,rbind",
				"cache:/workspace/K/cache",
				"/ws/C10:/workspace/C10:ro",
			},
			wantChanged: true,
		},
		{
			name:        "on_office_paths_already",
			workdir:     "/workspace/K",
			mounts:      []mount.Mount{bind("/ws/K", "/workspace/K", false), bind("/run/hutch/bin/hutch", "/hutch/bin/hutch", true)},
			binds:       []string{"/ws/K:/workspace/K"},
			wantWorkdir: "/workspace/K",
			wantMounts:  []mount.Mount{bind("/ws/K", "/workspace/K", false), bind("/run/hutch/bin/hutch", "/hutch/bin/hutch", true)},
			wantBinds:   []string{"/ws/K:/workspace/K"},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := &container.Config{WorkingDir: tt.workdir}
			hc := &container.HostConfig{Mounts: tt.mounts, Binds: tt.binds}
			before := []any{cfg.WorkingDir, append([]mount.Mount(nil), tt.mounts...), append([]string(nil), tt.binds...)}
			gotCfg, gotHC, changed := relocate(cfg, hc, mv)
			if changed != tt.wantChanged {
				t.Errorf("changed = %v, want %v", changed, tt.wantChanged)
			}
			if gotCfg.WorkingDir != tt.wantWorkdir {
				t.Errorf("working dir %q, want %q", gotCfg.WorkingDir, tt.wantWorkdir)
			}
			if !reflect.DeepEqual(gotHC.Mounts, tt.wantMounts) {
				t.Errorf("mounts\n got %+v\nwant %+v", gotHC.Mounts, tt.wantMounts)
			}
			if !reflect.DeepEqual(gotHC.Binds, tt.wantBinds) {
				t.Errorf("binds\n got %q\nwant %q", gotHC.Binds, tt.wantBinds)
			}
			if after := []any{cfg.WorkingDir, hc.Mounts, hc.Binds}; !reflect.DeepEqual(before[0], after[0]) ||
				len(tt.mounts) > 0 && !reflect.DeepEqual(before[1], after[1]) || len(tt.binds) > 0 && !reflect.DeepEqual(before[2], after[2]) {
				t.Error("relocate modified its arguments")
			}
		})
	}
}

func TestRelayout_LegacyLayoutMove(t *testing.T) {
	mv := LegacyLayoutMove("/srv/ws", "/var/lib/hutch", "C0123", "slack-U42", "slack", "v1-slack-c0123-0123456789abcdef")
	want := LayoutMove{
		RawID: "C0123", Platform: "slack", OfficeKey: "v1-slack-c0123-0123456789abcdef",
		HostPaths: map[string]string{
			"/srv/ws/C0123":                      "/srv/ws/v1-slack-c0123-0123456789abcdef",
			"/var/lib/hutch/vaults/slack-U42":    "/var/lib/hutch/vaults/v1-slack-c0123-0123456789abcdef",
			"/var/lib/hutch/conversations/C0123": "/var/lib/hutch/conversations/v1-slack-c0123-0123456789abcdef",
		},
		GuestPaths: map[string]string{"/workspace/C0123": "/workspace/v1-slack-c0123-0123456789abcdef"},
	}
	if !reflect.DeepEqual(mv, want) {
		t.Errorf("LegacyLayoutMove\n got %+v\nwant %+v", mv, want)
	}
	if mv := LegacyLayoutMove("/srv/ws", "/var/lib/hutch", "C0123", "", "slack", "K"); len(mv.HostPaths) != 2 {
		t.Errorf("without a vault key: host paths %v, want the office and conversation state only", mv.HostPaths)
	}
}

func TestRelayout_PlanLabel(t *testing.T) {
	p := relayoutPlan{V: relayoutVersion, StateDir: "/s", OfficeKey: "K", Name: "hutch-K", OldName: "old", OldID: "abc", Running: true,
		Config:     &container.Config{Cmd: []string{"it's", `"quoted" $x`}, Labels: map[string]string{"a b": "c=d"}},
		HostConfig: &container.HostConfig{Binds: []string{"/a b:/c:ro"}}}
	v, err := encodePlan(p)
	if err != nil {
		t.Fatal(err)
	}
	if strings.ContainsAny(v, " \"'=\\$") {
		t.Errorf("label value %q needs quoting in a LABEL change", v)
	}
	got, ok := decodePlan(v)
	if !ok || !reflect.DeepEqual(got, p) {
		t.Errorf("round trip: %+v %v", got, ok)
	}
	// The empty value a migrated container carries, and anything else,
	// is no plan.
	for _, v := range []string{"", "not base64!", "e30"} {
		if _, ok := decodePlan(v); ok {
			t.Errorf("decodePlan(%q) is a plan", v)
		}
	}
}

func TestRelayout_CarryNetworks(t *testing.T) {
	eps := func(names ...string) *container.NetworkSettings {
		ns := &container.NetworkSettings{Networks: map[string]*network.EndpointSettings{}}
		for _, n := range names {
			ns.Networks[n] = &network.EndpointSettings{NetworkID: "id-" + n}
		}
		return ns
	}
	for _, tt := range []struct {
		name      string
		mode      string
		ns        *container.NetworkSettings
		wantMode  string
		wantExtra []string
	}{
		{"docker_runtime_created_on_none_then_attached", "none", eps("hutch-net-a"), "hutch-net-a", nil},
		{"podman_reads_bridge_for_a_user_network", "bridge", eps("hutch-net-a"), "hutch-net-a", nil},
		{"mode_by_id", "id-b", eps("a", "b"), "b", []string{"a"}},
		{"no_network", "none", eps(), "none", nil},
		{"host", "host", eps("host"), "host", nil},
		{"default_bridge", "default", eps("bridge"), "bridge", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			mode, extra := carryNetworks(container.InspectResponse{HostConfig: &container.HostConfig{NetworkMode: container.NetworkMode(tt.mode)}, NetworkSettings: tt.ns})
			if string(mode) != tt.wantMode || !reflect.DeepEqual(extra, tt.wantExtra) {
				t.Errorf("got %q %v, want %q %v", mode, extra, tt.wantMode, tt.wantExtra)
			}
		})
	}
}

func TestRelayout_CarryHostConfig(t *testing.T) {
	swap := int64(-1)
	pids := int64(64)
	hc := carryHostConfig(&container.HostConfig{
		CapDrop: []string{"ALL"}, CapAdd: []string{"CHOWN"}, SecurityOpt: []string{"no-new-privileges"},
		IpcMode: "shareable", PidMode: "private", Runtime: "oci",
		Resources: container.Resources{NanoCPUs: 5e8, CPUPeriod: 100000, CPUQuota: 50000, Memory: 1 << 30, PidsLimit: &pids, MemorySwappiness: &swap,
			Ulimits: []*container.Ulimit{{Name: "RLIMIT_NOFILE", Soft: 10, Hard: 20}, {Name: "nproc", Soft: 1, Hard: 2}}},
	})
	if hc.IpcMode != "" || hc.PidMode != "" || hc.Runtime != "" || hc.MemorySwappiness != nil || hc.CPUPeriod != 0 || hc.CPUQuota != 0 {
		t.Errorf("engine read-outs carried: %+v", hc)
	}
	if hc.NanoCPUs != 5e8 || hc.Memory != 1<<30 || *hc.PidsLimit != 64 || hc.CapDrop[0] != "ALL" || hc.CapAdd[0] != "CHOWN" || hc.SecurityOpt[0] != "no-new-privileges" {
		t.Errorf("limits or hardening not carried: %+v", hc)
	}
	if hc.Ulimits[0].Name != "nofile" || hc.Ulimits[0].Hard != 20 || hc.Ulimits[1].Name != "nproc" {
		t.Errorf("ulimits %+v %+v", *hc.Ulimits[0], *hc.Ulimits[1])
	}
}

// relayoutEnv is one hutch installation with containers of the raw-id
// layout, against the real engine.
type relayoutEnv struct {
	cli       *client.Client
	eng       *engine.Engine
	img       string
	imgID     string
	state, ws string
	net       string
}

func newRelayoutEnv(t *testing.T) *relayoutEnv {
	t.Helper()
	cli := testenv.Docker(t)
	e := &relayoutEnv{cli: cli, img: testenv.BusyboxImage(t, cli)}
	eng, err := engine.Connect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = eng.Close() })
	e.eng = eng
	ins, err := cli.ImageInspect(context.Background(), e.img)
	if err != nil {
		t.Fatal(err)
	}
	e.imgID = ins.ID
	e.state = filepath.Join(t.TempDir(), "state")
	e.ws = filepath.Join(t.TempDir(), "ws")
	// Registered before the container sweep, so it runs after it: the
	// snapshot images outlive their containers otherwise.
	t.Cleanup(func() { removeRelayoutImages(t, cli, e.state) })
	testenv.CleanupContainers(t, cli, engine.LabelStateDir+"="+e.state)
	// The legacy containers sit on a network of their own, as the image
	// runtime's do; the sweep removes it.
	e.net = testenv.Name(t)
	if _, err := cli.NetworkCreate(context.Background(), e.net, client.NetworkCreateOptions{
		Driver: "bridge", Labels: map[string]string{engine.LabelStateDir: e.state}}); err != nil {
		t.Fatal(err)
	}
	return e
}

// removeRelayoutImages removes the snapshot images a test left, tagged
// or not, by the state dir in their plan.
func removeRelayoutImages(t *testing.T, cli *client.Client, state string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := cli.ImageList(ctx, client.ImageListOptions{All: true, Filters: make(client.Filters).Add("label", LabelRelayout)})
	if err != nil {
		t.Errorf("cleanup: list snapshot images: %v", err)
		return
	}
	for _, img := range res.Items {
		if p, ok := decodePlan(img.Labels[LabelRelayout]); ok && p.StateDir == state {
			if _, err := cli.ImageRemove(ctx, img.ID, client.ImageRemoveOptions{Force: true, PruneChildren: true}); err != nil && !engine.IsNotFound(err) {
				t.Errorf("cleanup: remove snapshot image %s: %v", shortID(img.ID), err)
			}
		}
	}
}

// conv is one conversation of the raw-id layout.
type conv struct {
	rawID, key string
	mv         LayoutMove
}

// conv makes the dirs of a conversation of the raw-id layout. Its raw id
// is prefix and a random suffix: office container names are global to
// the engine.
func (e *relayoutEnv) conv(t *testing.T, prefix string) conv {
	t.Helper()
	n := testenv.Name(t)
	rawID := prefix + "-" + n[len(n)-6:]
	addr, err := office.NewAddress("web", rawID)
	if err != nil {
		t.Fatal(err)
	}
	c := conv{rawID: rawID, key: string(addr.Key())}
	c.mv = LegacyLayoutMove(e.ws, e.state, rawID, "web-"+rawID, "web", c.key)
	for _, d := range []string{filepath.Join(e.ws, rawID), filepath.Join(e.state, "conversations", rawID)} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "hello"), []byte("from "+filepath.Base(filepath.Dir(d))+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// rename moves the conversation's host dirs as the migration does.
func (e *relayoutEnv) rename(t *testing.T, c conv) {
	t.Helper()
	for _, base := range []string{e.ws, filepath.Join(e.state, "conversations")} {
		if err := os.Rename(filepath.Join(base, c.rawID), filepath.Join(base, c.key)); err != nil {
			t.Fatal(err)
		}
	}
}

// legacy makes a container of the raw-id layout for the conversations
// convs (normally one), labelled as owned by state, writes /opt/keep in
// its writable layer and leaves it running or stopped.
func (e *relayoutEnv) legacy(t *testing.T, state string, running bool, convs ...conv) (id, name string) {
	t.Helper()
	ctx := context.Background()
	name = "hutch-legacy-" + testenv.Name(t)
	c := convs[0]
	mounts := []mount.Mount{}
	for _, c := range convs {
		mounts = append(mounts,
			mount.Mount{Type: mount.TypeBind, Source: filepath.Join(e.ws, c.rawID), Target: "/workspace/" + c.rawID},
			mount.Mount{Type: mount.TypeBind, Source: filepath.Join(e.state, "conversations", c.rawID), Target: "/hutch/state/" + c.rawID, ReadOnly: true})
	}
	pids := int64(256)
	stop := 1
	res, err := e.cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Name: name,
		Config: &container.Config{
			Image:      e.img,
			Entrypoint: []string{"/bin/sleep"},
			Cmd:        []string{"3600"},
			WorkingDir: "/workspace/" + c.rawID,
			Env:        []string{"LEGACY=1"},
			Labels: map[string]string{
				engine.LabelManaged:      "true",
				engine.LabelStateDir:     state,
				engine.LabelMode:         string(sandbox.KindImage),
				engine.LabelConversation: c.rawID,
				engine.LabelImageID:      e.imgID,
				engine.LabelImage:        e.img,
				engine.LabelFingerprint:  "legacy",
			},
			StopTimeout: &stop,
		},
		HostConfig: &container.HostConfig{
			Mounts:      mounts,
			NetworkMode: container.NetworkMode(e.net),
			CapDrop:     []string{"ALL"},
			CapAdd:      []string{"CHOWN", "DAC_OVERRIDE", "FOWNER"},
			SecurityOpt: []string{"no-new-privileges"},
			Resources:   container.Resources{NanoCPUs: 5e8, Memory: 256 << 20, MemorySwap: 256 << 20, PidsLimit: &pids},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.cli.ContainerStart(ctx, res.ID, client.ContainerStartOptions{}); err != nil {
		t.Fatal(err)
	}
	if out, code := e.exec(t, res.ID, "sh", "-c", "mkdir -p /opt && echo kept > /opt/keep"); code != 0 {
		t.Fatalf("write /opt/keep: exit %d %s", code, out)
	}
	if !running {
		if _, err := e.cli.ContainerKill(ctx, res.ID, client.ContainerKillOptions{}); err != nil {
			t.Fatal(err)
		}
		e.waitStopped(t, res.ID)
	}
	return res.ID, name
}

func (e *relayoutEnv) waitStopped(t *testing.T, id string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		ins, err := e.cli.ContainerInspect(context.Background(), id, client.ContainerInspectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !ins.Container.State.Running {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("container did not stop")
		}
	}
}

// exec runs argv in a container through the Engine API and returns its
// output and exit code.
func (e *relayoutEnv) exec(t *testing.T, id string, argv ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ex, err := e.cli.ExecCreate(ctx, id, client.ExecCreateOptions{Cmd: argv, AttachStdout: true, AttachStderr: true})
	if err != nil {
		t.Fatalf("exec %q: %v", argv, err)
	}
	att, err := e.cli.ExecAttach(ctx, ex.ID, client.ExecAttachOptions{})
	if err != nil {
		t.Fatalf("exec %q: %v", argv, err)
	}
	defer att.Close()
	var out bytes.Buffer
	if _, err := stdcopy.StdCopy(&out, &out, att.Reader); err != nil {
		t.Fatalf("exec %q: %v", argv, err)
	}
	for {
		in, err := e.cli.ExecInspect(ctx, ex.ID, client.ExecInspectOptions{})
		if err != nil {
			t.Fatalf("exec %q: %v", argv, err)
		}
		if !in.Running {
			return out.String(), in.ExitCode
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (e *relayoutEnv) relayout(t *testing.T, moves ...LayoutMove) RelayoutReport {
	t.Helper()
	rep, err := Relayout(context.Background(), e.eng, e.state, moves, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func (e *relayoutEnv) relayouter() *relayouter {
	return &relayouter{eng: e.eng, api: e.cli, stateDir: e.state, log: slog.New(slog.DiscardHandler)}
}

func exists(t *testing.T, cli *client.Client, id string) bool {
	t.Helper()
	_, err := cli.ContainerInspect(context.Background(), id, client.ContainerInspectOptions{})
	if err != nil && !engine.IsNotFound(err) {
		t.Fatal(err)
	}
	return err == nil
}

// checkMoved asserts the end state of a move: the office's container
// exists on the office paths, keeps the old writable layer, runs if the
// old one ran, and the old container and the snapshot tag are gone.
func (e *relayoutEnv) checkMoved(t *testing.T, c conv, oldID string, running bool) {
	t.Helper()
	ctx := context.Background()
	ins, err := e.cli.ContainerInspect(ctx, ContainerName(c.key), client.ContainerInspectOptions{})
	if err != nil {
		t.Fatalf("office container: %v", err)
	}
	ct := ins.Container
	if ct.State.Running != running {
		t.Errorf("office container running = %v, want %v", ct.State.Running, running)
	}
	if exists(t, e.cli, oldID) {
		t.Error("the old container still exists")
	}
	if _, err := e.cli.ImageInspect(ctx, SnapshotRef(c.key)); !engine.IsNotFound(err) {
		t.Errorf("snapshot tag %s left (inspect: %v)", SnapshotRef(c.key), err)
	}
	type mp struct {
		src, dst string
		rw       bool
	}
	var got []mp
	for _, m := range ct.Mounts {
		got = append(got, mp{m.Source, m.Destination, m.RW})
	}
	sort.Slice(got, func(i, j int) bool { return got[i].dst < got[j].dst })
	want := []mp{
		{filepath.Join(e.state, "conversations", c.key), "/hutch/state/" + c.rawID, false},
		{filepath.Join(e.ws, c.key), "/workspace/" + c.key, true},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("mounts\n got %+v\nwant %+v", got, want)
	}
	cfg, hc := ct.Config, ct.HostConfig
	if cfg.WorkingDir != "/workspace/"+c.key {
		t.Errorf("working dir %q", cfg.WorkingDir)
	}
	for k, v := range map[string]string{
		engine.LabelOffice: c.key, engine.LabelPlatform: "web", engine.LabelConversation: c.rawID,
		engine.LabelFingerprint: "legacy", engine.LabelImageID: e.imgID, engine.LabelStateDir: e.state, LabelRelayout: "",
	} {
		if got, ok := cfg.Labels[k]; !ok || got != v {
			t.Errorf("label %s = %q (set %v), want %q", k, got, ok, v)
		}
	}
	if strings.Join(cfg.Entrypoint, " ") != "/bin/sleep" || strings.Join(cfg.Cmd, " ") != "3600" {
		t.Errorf("entrypoint %q cmd %q", cfg.Entrypoint, cfg.Cmd)
	}
	if hc.NanoCPUs != 5e8 || hc.Memory != 256<<20 || hc.PidsLimit == nil || *hc.PidsLimit != 256 {
		t.Errorf("limits: nanocpus %d memory %d pids %v", hc.NanoCPUs, hc.Memory, hc.PidsLimit)
	}
	if !strings.Contains(strings.Join(hc.SecurityOpt, ","), "no-new-privileges") {
		t.Errorf("security opts %v", hc.SecurityOpt)
	}
	if ct.NetworkSettings == nil || ct.NetworkSettings.Networks[e.net] == nil {
		t.Errorf("not on the old container's network %s: %+v", e.net, ct.NetworkSettings)
	}
	if !running {
		if _, err := e.cli.ContainerStart(ctx, ct.ID, client.ContainerStartOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	out, code := e.exec(t, ct.ID, "sh", "-c", "cat /opt/keep hello /hutch/state/"+c.rawID+"/hello; pwd; grep CapBnd /proc/self/status")
	want1 := "kept\nfrom ws\nfrom conversations\n/workspace/" + c.key + "\nCapBnd:\t000000000000000b\n"
	if code != 0 || out != want1 {
		t.Errorf("inside the office container: exit %d\n%s\nwant\n%s", code, out, want1)
	}
}

// TestRelayout_Migrates moves a running container of the raw-id layout
// onto its office paths; a second call does nothing.
func TestRelayout_Migrates(t *testing.T) {
	e := newRelayoutEnv(t)
	c := e.conv(t, "Cmigrates")
	oldID, _ := e.legacy(t, e.state, true, c)
	e.rename(t, c)
	rep := e.relayout(t, c.mv)
	if !reflect.DeepEqual(rep.Migrated, []string{ContainerName(c.key)}) || len(rep.Resumed)+len(rep.Cleaned)+len(rep.Failed) != 0 {
		t.Fatalf("report %+v", rep)
	}
	e.checkMoved(t, c, oldID, true)

	id := ContainerName(c.key)
	before, _ := e.cli.ContainerInspect(context.Background(), id, client.ContainerInspectOptions{})
	rep = e.relayout(t, c.mv)
	if len(rep.Migrated)+len(rep.Resumed)+len(rep.Cleaned)+len(rep.Failed) != 0 {
		t.Errorf("second call: %+v, want nothing done", rep)
	}
	if after, _ := e.cli.ContainerInspect(context.Background(), id, client.ContainerInspectOptions{}); after.Container.ID != before.Container.ID {
		t.Error("second call re-created the office container")
	}
}

// TestRelayout_StoppedStaysStopped: a stopped container is moved and not
// started.
func TestRelayout_StoppedStaysStopped(t *testing.T) {
	e := newRelayoutEnv(t)
	c := e.conv(t, "Cstopped")
	oldID, _ := e.legacy(t, e.state, false, c)
	e.rename(t, c)
	if rep := e.relayout(t, c.mv); len(rep.Migrated) != 1 || len(rep.Failed) != 0 {
		t.Fatalf("report %+v", rep)
	}
	e.checkMoved(t, c, oldID, false)
}

// TestRelayout_Resume simulates a hutch that died after each step of a
// move: the next call finishes it.
func TestRelayout_Resume(t *testing.T) {
	for _, tt := range []struct {
		name  string
		steps int // snapshot; remove old; create new
		want  func(c conv) RelayoutReport
	}{
		{"after_snapshot", 1, func(c conv) RelayoutReport { return RelayoutReport{Resumed: []string{ContainerName(c.key)}} }},
		{"after_remove", 2, func(c conv) RelayoutReport { return RelayoutReport{Resumed: []string{ContainerName(c.key)}} }},
		{"after_create", 3, func(c conv) RelayoutReport { return RelayoutReport{Cleaned: []string{SnapshotRef(c.key)}} }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newRelayoutEnv(t)
			c := e.conv(t, "Cresume"+tt.name)
			oldID, _ := e.legacy(t, e.state, true, c)
			e.rename(t, c)
			rl := e.relayouter()
			ctx := context.Background()
			p, _, err := rl.plan(ctx, oldID, []LayoutMove{c.mv})
			if err != nil || p == nil {
				t.Fatalf("plan: %v %v", p, err)
			}
			if err := rl.snapshot(ctx, *p); err != nil {
				t.Fatal(err)
			}
			if tt.steps >= 2 {
				if err := rl.removeOld(ctx, *p); err != nil {
					t.Fatal(err)
				}
			}
			if tt.steps >= 3 {
				if _, err := rl.createContainer(ctx, *p); err != nil {
					t.Fatal(err)
				}
			}
			rep := e.relayout(t, c.mv)
			if want := tt.want(c); !reflect.DeepEqual(rep, want) {
				t.Errorf("report %+v, want %+v", rep, want)
			}
			e.checkMoved(t, c, oldID, true)
			if rep := e.relayout(t, c.mv); len(rep.Migrated)+len(rep.Resumed)+len(rep.Cleaned)+len(rep.Failed) != 0 {
				t.Errorf("call after the resume: %+v, want nothing done", rep)
			}
		})
	}
}

// TestRelayout_OtherStateDirUntouched: a container another hutch
// installation owns is never moved, even when its paths match.
func TestRelayout_OtherStateDirUntouched(t *testing.T) {
	e := newRelayoutEnv(t)
	other := filepath.Join(t.TempDir(), "other-state")
	testenv.CleanupContainers(t, e.cli, engine.LabelStateDir+"="+other)
	c := e.conv(t, "Cother")
	id, _ := e.legacy(t, other, true, c)
	rep := e.relayout(t, c.mv)
	if len(rep.Migrated)+len(rep.Resumed)+len(rep.Cleaned)+len(rep.Failed) != 0 {
		t.Errorf("report %+v, want nothing done", rep)
	}
	ins, err := e.cli.ContainerInspect(context.Background(), id, client.ContainerInspectOptions{})
	if err != nil || !ins.Container.State.Running || ins.Container.Config.WorkingDir != "/workspace/"+c.rawID {
		t.Errorf("the other installation's container was touched: %v", err)
	}
	if exists(t, e.cli, ContainerName(c.key)) {
		t.Error("an office container was made for another installation's container")
	}
}

// TestRelayout_TwoConversationsFails: a container mounting the legacy
// paths of two conversations belongs to no one office and is left.
func TestRelayout_TwoConversationsFails(t *testing.T) {
	e := newRelayoutEnv(t)
	a, b := e.conv(t, "Ctwo-a"), e.conv(t, "Ctwo-b")
	id, name := e.legacy(t, e.state, true, a, b)
	rep := e.relayout(t, a.mv, b.mv)
	if len(rep.Migrated)+len(rep.Resumed)+len(rep.Cleaned) != 0 || !strings.Contains(rep.Failed[name], "legacy paths of 2 conversations") {
		t.Errorf("report %+v, want %s failed for mounting two conversations", rep, name)
	}
	ins, err := e.cli.ContainerInspect(context.Background(), id, client.ContainerInspectOptions{})
	if err != nil || !ins.Container.State.Running {
		t.Errorf("the container was not left running in place: %v", err)
	}
	for _, c := range []conv{a, b} {
		if exists(t, e.cli, ContainerName(c.key)) {
			t.Errorf("office container %s made", ContainerName(c.key))
		}
		if _, err := e.cli.ImageInspect(context.Background(), SnapshotRef(c.key)); !engine.IsNotFound(err) {
			t.Errorf("snapshot %s made (inspect: %v)", SnapshotRef(c.key), err)
		}
	}
}

// TestRelayout_OfficeNameTaken: when the office's container exists
// already, the legacy one is left and reported.
func TestRelayout_OfficeNameTaken(t *testing.T) {
	e := newRelayoutEnv(t)
	c := e.conv(t, "Ctaken")
	id, name := e.legacy(t, e.state, true, c)
	if _, err := e.cli.ContainerCreate(context.Background(), client.ContainerCreateOptions{Name: ContainerName(c.key),
		Config: &container.Config{Image: e.img, Labels: map[string]string{engine.LabelStateDir: e.state}}}); err != nil {
		t.Fatal(err)
	}
	rep := e.relayout(t, c.mv)
	if len(rep.Migrated) != 0 || !strings.Contains(rep.Failed[name], "exists already") {
		t.Errorf("report %+v", rep)
	}
	if !exists(t, e.cli, id) {
		t.Error("the legacy container was removed")
	}
}

// TestRelayout_ImageRuntimeContainer moves a container the image runtime
// made for the raw-id layout (agent as init, office network, socket dir),
// then serves the office: the runtime sees the drift, re-creates the
// container on its own terms and the writable layer survives both moves.
func TestRelayout_ImageRuntimeContainer(t *testing.T) {
	e := newRelayoutEnv(t)
	bin, err := agentbin.Locate(testenv.HutchBinary(t))
	if err != nil {
		t.Fatal(err)
	}
	run, err := os.MkdirTemp("", "hr-") // unix socket paths are short
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = agent.RemoveSocketDir(run) }) // sealed socket dirs included
	rt, err := New(Config{Engine: e.eng, Image: e.img, StateDir: e.state, RunDir: run, Agent: bin,
		Log: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		t.Fatal(err)
	}
	c := e.conv(t, "Cruntime")
	// What a hutch of the raw-id layout asked for: the office was the
	// raw id's directory.
	legacyKey := "legacy-" + strings.ToLower(c.rawID)
	legacy := sandbox.Spec{
		OfficeKey: legacyKey, Platform: "web", ConversationID: c.rawID,
		OfficeDir: filepath.Join(e.ws, c.rawID), OfficeRuntimePath: "/workspace/" + c.rawID,
		Mounts: []sandbox.Mount{{HostPath: filepath.Join(e.ws, c.rawID), RuntimePath: "/workspace/" + c.rawID}},
	}
	exec := func(spec sandbox.Spec, cmd string) string {
		t.Helper()
		var out bytes.Buffer
		res, err := rt.Exec(context.Background(), spec, sandbox.ExecRequest{Argv: []string{cmd}, Stdout: &out, Stderr: &out, Timeout: time.Minute})
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("Exec(%q): %v, exit %d: %s", cmd, err, res.ExitCode, out.String())
		}
		return out.String()
	}
	exec(legacy, `echo installed > /usr/local/bin/marker`)
	oldID := ""
	if ins, err := e.cli.ContainerInspect(context.Background(), ContainerName(legacyKey), client.ContainerInspectOptions{}); err == nil {
		oldID = ins.Container.ID
	} else {
		t.Fatal(err)
	}

	e.rename(t, c)
	rep := e.relayout(t, c.mv)
	if !reflect.DeepEqual(rep.Migrated, []string{ContainerName(c.key)}) || len(rep.Failed) != 0 {
		t.Fatalf("report %+v", rep)
	}
	if exists(t, e.cli, oldID) {
		t.Error("the old container still exists")
	}
	ins, err := e.cli.ContainerInspect(context.Background(), ContainerName(c.key), client.ContainerInspectOptions{})
	if err != nil {
		t.Fatalf("office container after the move: %v", err)
	}
	if st := ins.Container.State; !st.Running {
		t.Fatalf("office container after the move is not running: %s, exit %d, error %q; its output:\n%s",
			st.Status, st.ExitCode, st.Error, testenv.ContainerOutput(context.Background(), e.cli, ins.Container.ID))
	}
	moved := ins.Container.ID

	office := sandbox.Spec{
		OfficeKey: c.key, Platform: "web", ConversationID: c.rawID,
		OfficeDir: filepath.Join(e.ws, c.key), OfficeRuntimePath: "/workspace/" + c.key,
		Mounts: []sandbox.Mount{{HostPath: filepath.Join(e.ws, c.key), RuntimePath: "/workspace/" + c.key}},
	}
	if out := exec(office, `cat /usr/local/bin/marker hello; pwd`); out != "installed\nfrom ws\n/workspace/"+c.key+"\n" {
		t.Errorf("in the office after the move: %q", out)
	}
	ins, err = e.cli.ContainerInspect(context.Background(), ContainerName(c.key), client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ins.Container.ID == moved {
		t.Error("the runtime did not re-create the moved container on its own terms")
	}
	if _, err := e.cli.ImageInspect(context.Background(), SnapshotRef(c.key)); !engine.IsNotFound(err) {
		t.Errorf("snapshot tag left (inspect: %v)", err)
	}
	if rep := e.relayout(t, c.mv); len(rep.Migrated)+len(rep.Resumed)+len(rep.Cleaned)+len(rep.Failed) != 0 {
		t.Errorf("call after the runtime took over: %+v, want nothing done", rep)
	}
	if err := rt.Remove(context.Background(), legacyKey); err != nil && !strings.Contains(err.Error(), "No runtime") {
		t.Errorf("remove the legacy office's leftovers: %v", err)
	}
	if err := rt.Remove(context.Background(), c.key); err != nil {
		t.Errorf("remove the office's runtime: %v", err)
	}
}

// The socket dir is found however the engine reads the mounts back:
// Podman turns every mount into a bind string, and a missed dir left the
// old agent's socket sealed in it, so the moved container's agent exited.
func TestSocketDirSources(t *testing.T) {
	hc := &container.HostConfig{
		Mounts: []mount.Mount{{Type: mount.TypeBind, Source: "/run/a", Target: runPath}, {Source: "/ws", Target: "/workspace"}},
		Binds:  []string{"/ws:/workspace:rw", "/run/b:" + runPath + ":rw,rprivate,rbind", "/key:/hutch/key:ro"},
	}
	if got := socketDirSources(hc); !reflect.DeepEqual(got, []string{"/run/a", "/run/b"}) {
		t.Errorf("socketDirSources = %q, want [/run/a /run/b]", got)
	}
}
