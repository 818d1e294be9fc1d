package admin

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	mobyclient "github.com/moby/moby/client"

	"github.com/hutchsandbox/hutch/internal/agent"
	"github.com/hutchsandbox/hutch/internal/engine"
	"github.com/hutchsandbox/hutch/internal/office"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/sandbox/image"
	"github.com/hutchsandbox/hutch/internal/service"
	"github.com/hutchsandbox/hutch/internal/testenv"
)

// TestBrowser_ImageMode drives the portal over a service in image mode,
// with a real container behind it: a door policy changed on the office
// page gives the next command new mounts, a boost of the size set on the
// limits page changes the container's limits, and a confirmed stop ends
// it. Commands run through the service, as a chat bridge runs them; the
// portal is used only through what its pages offer.
func TestBrowser_ImageMode(t *testing.T) {
	cli := testenv.Docker(t)
	img := testenv.BusyboxImage(t, cli)
	agent := testenv.HutchBinary(t)
	mode := sandbox.Mode{Kind: sandbox.KindImage, Target: img}
	p := newImagePortal(t, mode, agent)
	testenv.CleanupContainers(t, cli, engine.LabelStateDir+"="+p.svc.Layout().StateDir)

	addr, err := office.NewAddress("web", testenv.Name(t))
	if err != nil {
		t.Fatal(err)
	}
	key := string(addr.Key())
	ws := p.svc.Layout().Workspace
	if err := p.svc.SetChannelKind(addr, "im"); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// ls runs a command in the conversation, as a bridge does, and
	// returns the entries of /workspace it sees.
	ls := func() []string {
		t.Helper()
		var out, errOut bytes.Buffer
		res, err := p.svc.Exec(ctx, service.ExecOptions{
			Address: addr, Mode: mode, Argv: []string{"ls", "/workspace"},
			Timeout: 30 * time.Second, Stdout: &out, Stderr: &errOut,
		})
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("ls /workspace: %+v, %v\nstdout: %s\nstderr: %s", res, err, out.String(), errOut.String())
		}
		return strings.Fields(out.String())
	}
	inspect := func() mobyclient.ContainerInspectResult {
		t.Helper()
		res, err := cli.ContainerInspect(ctx, image.ContainerName(key), mobyclient.ContainerInspectOptions{})
		if err != nil {
			t.Fatalf("inspecting the conversation's container: %v", err)
		}
		return res
	}

	// The first command: an isolated office sees only itself.
	if got := ls(); !slices.Equal(got, []string{key}) {
		t.Fatalf("an isolated office's ls /workspace: %q, want only %q", got, key)
	}
	first := inspect().Container.ID
	// A sibling of the office in the workspace, which only a wider door
	// policy shows.
	if err := os.Mkdir(filepath.Join(ws, "sibling"), 0o700); err != nil {
		t.Fatal(err)
	}

	link, _, err := p.srv.Link("ada (browser)", 0)
	if err != nil {
		t.Fatal(err)
	}
	b := &tab{t: t, ctx: testenv.Browser(t)}
	const runtimeRow = "section[aria-labelledby=runtimes-h] tbody tr"
	// cell is the text of the runtime row's cell under the column header.
	cell := func(header string) string {
		t.Helper()
		return eval[string](b, `(() => {
			const s = document.querySelector("section[aria-labelledby=runtimes-h]");
			const i = Array.from(s.querySelectorAll("thead th"), h => h.textContent.trim()).indexOf(`+strconv.Quote(header)+`);
			return i < 0 ? "(no such column)" : s.querySelector("tbody tr").cells[i].textContent.trim();
		})()`)
	}

	// 1. Sign in; home lists the running runtime.
	if code := b.open(link); code != http.StatusOK {
		t.Fatalf("link: %d", code)
	}
	if code := b.press("button", "Sign in"); code != http.StatusOK {
		t.Fatalf("sign in: %d\n%s", code, b.text("body"))
	}
	if h := b.text("h1"); h != "Offices and runtimes" {
		t.Fatalf("after signing in: %q", h)
	}
	if row := b.text(runtimeRow); !strings.Contains(row, image.ContainerName(key)) || !strings.Contains(row, addr.String()) || !strings.Contains(row, "running") || strings.Contains(row, "boosted") {
		t.Errorf("home's runtime row: %q, want %s of %s running", row, image.ContainerName(key), addr)
	}
	testenv.Screenshot(t, b.ctx, "image-home")

	// 2. The office page: door policy full. The next command runs with
	// the new mounts (the container is re-created) and sees the whole
	// workspace.
	if code := b.press("link", addr.String()); code != http.StatusOK {
		t.Fatalf("office page: %d", code)
	}
	const door = "Door policy of this conversation"
	if sel := b.value("combobox", door); sel != "isolated" {
		t.Errorf("the door policy select shows %q, want isolated", sel)
	}
	b.run("choosing full", chromedp.SetValue(door, "full", testenv.ByRole("combobox", door)))
	if code := b.press("button", "Set the door policy"); code != http.StatusOK {
		t.Fatalf("setting the door policy: %d\n%s", code, b.text("main"))
	}
	if flash := b.text("[role=status]"); flash != "Door policy set to full; the next command runs with it." {
		t.Errorf("flash %q", flash)
	}
	if got, want := ls(), slices.Sorted(slices.Values([]string{key, "sibling"})); !slices.Equal(got, want) {
		t.Errorf("after the door policy became full, ls /workspace: %q, want %q", got, want)
	}
	if second := inspect().Container.ID; second == first {
		t.Errorf("the container %s was not re-created for the new mounts", first)
	}

	// 3. The boost size, on the limits page the office page links to;
	// then the office page's Boost.
	if code := b.press("link", "boost size"); code != http.StatusOK {
		t.Fatalf("limits page: %d", code)
	}
	if h := b.text("h1"); h != "Global limits and boost size" {
		t.Errorf("limits page heading %q", h)
	}
	boostCPUs, boostMemory := "CPUs of a boost sandbox.boost.cpus", "Memory of a boost sandbox.boost.memory"
	b.run("typing the boost size",
		chromedp.SendKeys(boostCPUs, "1", testenv.ByRole("textbox", boostCPUs)),
		chromedp.SendKeys(boostMemory, "1536m", testenv.ByRole("textbox", boostMemory)))
	if code := b.press("button", "Save"); code != http.StatusOK {
		t.Fatalf("saving the boost size: %d\n%s", code, b.text("main"))
	}
	if flash := b.text("[role=status]"); !strings.HasPrefix(flash, "Saved: set sandbox.boost.cpus to 1, set sandbox.boost.memory to 1536m.") {
		t.Errorf("limits flash %q", flash)
	}
	if code := b.press("link", "Offices and runtimes"); code != http.StatusOK {
		t.Fatalf("home: %d", code)
	}
	if code := b.press("link", addr.String()); code != http.StatusOK {
		t.Fatalf("office page: %d", code)
	}
	if code := b.press("button", "Boost "+addr.String()); code != http.StatusOK {
		t.Fatalf("boost: %d\n%s", code, b.text("main"))
	}
	if flash, want := b.text("[role=status]"), "Boosted "+addr.String()+" until its runtime stops: 1 CPU, 1.5 GiB."; flash != want {
		t.Errorf("boost flash %q, want %q (the boost size saved on the limits page)", flash, want)
	}
	if hc := inspect().Container.HostConfig; hc.NanoCPUs != 1e9 || hc.Memory != 1536<<20 {
		t.Errorf("the boosted container has %d nano-CPUs and %d bytes of memory, want 1e9 and %d", hc.NanoCPUs, hc.Memory, 1536<<20)
	}
	if code := b.press("link", "Offices and runtimes"); code != http.StatusOK {
		t.Fatalf("home: %d", code)
	}
	if row := b.text(runtimeRow); !strings.Contains(row, "running (boosted)") {
		t.Errorf("home's runtime row after the boost: %q", row)
	}
	if limits, want := cell("Limits"), "1 CPU, 1.5 GiB of memory, 1024 processes"; limits != want {
		t.Errorf("home shows the boosted runtime's limits as %q, want %q", limits, want)
	}
	testenv.Screenshot(t, b.ctx, "image-boosted")

	// 4. Stop, from the runtime's row, confirmed.
	if code := b.press("link", "Stop "+addr.String()); code != http.StatusOK {
		t.Fatalf("stop's confirmation: %d", code)
	}
	if h := b.text("h1"); h != "Stop the runtime of "+addr.String()+"?" {
		t.Errorf("confirmation heading %q", h)
	}
	if c, want := b.text("#consequence"), "The runtime of "+addr.String()+" stops; its running commands are killed; the next command starts it again."; c != want {
		t.Errorf("confirmation says %q, want %q", c, want)
	}
	if st := inspect().Container.State; st == nil || !st.Running {
		t.Fatalf("the confirmation page alone stopped the container: %+v", st)
	}
	testenv.Screenshot(t, b.ctx, "image-confirm")
	if code := b.press("button", "Stop the runtime of "+addr.String()); code != http.StatusOK {
		t.Fatalf("stop: %d\n%s", code, b.text("main"))
	}
	if flash, want := b.text("[role=status]"), "Stopped the runtime of "+addr.String()+"; the next command starts it again."; flash != want {
		t.Errorf("stop flash %q, want %q", flash, want)
	}
	if st := inspect().Container.State; st == nil || st.Running {
		t.Errorf("the container still runs after the stop: %+v", st)
	}
	if code := b.press("link", "Offices and runtimes"); code != http.StatusOK {
		t.Fatalf("home: %d", code)
	}
	if row := b.text(runtimeRow); !strings.Contains(row, "stopped") || strings.Contains(row, "boosted") || strings.Contains(row, "Boost") {
		t.Errorf("home's runtime row after the stop: %q, want stopped, no boost", row)
	}
	testenv.Screenshot(t, b.ctx, "image-stopped")

	// 5. The audit log, newest first, says who did what.
	if code := b.press("link", "Audit log"); code != http.StatusOK {
		t.Fatalf("audit page: %d", code)
	}
	rows := eval[[]string](b, `Array.from(document.querySelectorAll("tbody tr"), r => Array.from(r.cells, c => c.textContent.trim()).slice(1).join(" | "))`)
	want := []string{
		"portal | ada (browser) | runtime.stopped | " + key + " | ",
		"portal | ada (browser) | limits.boost | " + key + " | cpus=1 memory=1536MiB pids=1024",
		"portal | ada (browser) | setting.set | global | sandbox.boost.memory=1536m",
		"portal | ada (browser) | setting.set | global | sandbox.boost.cpus=1",
		// The door's new mount re-creates the runtime at the next command.
		"cli |  | runtime.recreated | " + key + " | what it was built from changed (mounts)",
		"portal | ada (browser) | door.set | " + addr.String() + " | trusted/full",
		"portal | ada (browser) | portal.signin |  | ",
		// The test's first command (no surface named: the service's).
		"cli |  | runtime.created | " + key + " | ",
	}
	if !slices.Equal(rows, want) {
		t.Errorf("the audit log lists:\n%s\nwant:\n%s", strings.Join(rows, "\n"), strings.Join(want, "\n"))
	}
}

// newImagePortal serves a portal over a service in mode (image:), with a
// fresh state dir and workspace and agent as the runtimes' agent. The
// run dir is short: it holds Unix sockets.
func newImagePortal(t *testing.T, mode sandbox.Mode, agentBin string) *portal {
	t.Helper()
	root := t.TempDir()
	run, err := os.MkdirTemp("", "hr-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = agent.RemoveSocketDir(run) }) // sealed socket dirs included
	layout := service.Layout{StateDir: filepath.Join(root, "state"), Workspace: filepath.Join(root, "ws"), RunDir: run}
	for _, d := range []string{layout.StateDir, layout.Workspace} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	svc := service.New(layout, nil)
	svc.SetAgentBinary(agentBin)
	t.Cleanup(func() { _ = svc.Close() })
	p := &portal{svc: svc}
	p.ts = httptest.NewServer(nil)
	t.Cleanup(p.ts.Close)
	srv, err := New(Options{Service: svc, Mode: mode, BaseURL: p.ts.URL})
	if err != nil {
		t.Fatal(err)
	}
	p.srv = srv
	p.ts.Config.Handler = srv.Handler()
	// The home page starts the resource sampler; it stops with the test.
	t.Cleanup(func() {
		samplers.Lock()
		u := samplers.m[srv]
		delete(samplers.m, srv)
		samplers.Unlock()
		if u != nil {
			u.stop()
		}
	})
	return p
}
