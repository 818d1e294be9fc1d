package daemon_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	mobyclient "github.com/moby/moby/client"

	"github.com/hutchsandbox/hutch/client"
	"github.com/hutchsandbox/hutch/internal/agent"
	"github.com/hutchsandbox/hutch/internal/api"
	"github.com/hutchsandbox/hutch/internal/daemon"
	"github.com/hutchsandbox/hutch/internal/engine"
	"github.com/hutchsandbox/hutch/internal/office"
	"github.com/hutchsandbox/hutch/internal/projection"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/sandbox/image"
	"github.com/hutchsandbox/hutch/internal/service"
	"github.com/hutchsandbox/hutch/internal/settings"
	"github.com/hutchsandbox/hutch/internal/testenv"
	"github.com/hutchsandbox/hutch/internal/tools"
)

// running is one in-process daemon.
type running struct {
	svc    *service.Service
	sock   string
	out    *testenv.LockedBuffer
	log    *testenv.LockedBuffer
	cancel context.CancelFunc
	done   chan error
	// stopped is set once stop has received Run's result.
	stopped bool
}

// stop cancels the daemon's context and returns what Run returned.
func (r *running) stop(t *testing.T) error {
	t.Helper()
	r.cancel()
	select {
	case err := <-r.done:
		r.stopped = true
		return err
	case <-time.After(60 * time.Second):
		t.Fatal("daemon.Run did not return within 60 s of its context ending")
		return nil
	}
}

// start runs daemon.Run in a goroutine and waits for its Ready callback.
func start(t *testing.T, svc *service.Service, o daemon.Options) *running {
	t.Helper()
	r := &running{svc: svc, out: &testenv.LockedBuffer{}, log: &testenv.LockedBuffer{}, done: make(chan error, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	ready := make(chan string, 1)
	o.Service = svc
	o.Out = r.out
	o.Log = slog.New(slog.NewTextHandler(r.log, &slog.HandlerOptions{Level: slog.LevelInfo}))
	o.Ready = func(sock string) { ready <- sock }
	go func() { r.done <- daemon.Run(ctx, o) }()
	select {
	case r.sock = <-ready:
	case err := <-r.done:
		cancel()
		t.Fatalf("daemon.Run returned before ready: %v", err)
	case <-time.After(60 * time.Second):
		cancel()
		t.Fatal("daemon not ready within 60 s")
	}
	if want := daemon.SocketPath(svc.Layout().StateDir); r.sock != want {
		t.Errorf("Ready socket %q, want %q", r.sock, want)
	}
	t.Cleanup(func() {
		cancel()
		if r.stopped {
			return
		}
		select {
		case err := <-r.done:
			if err != nil {
				t.Errorf("daemon.Run: %v", err)
			}
		case <-time.After(60 * time.Second):
		}
	})
	return r
}

func hostService(t *testing.T) *service.Service {
	t.Helper()
	layout, err := service.ResolveLayout(service.LayoutOptions{StateDir: filepath.Join(t.TempDir(), "state"), Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	return service.New(layout, nil)
}

func conv(i int) api.Conversation {
	return api.Conversation{Platform: "web", ConversationID: fmt.Sprintf("load-%02d", i)}
}

func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// settle polls until f() is within margin of base, for up to 10 s.
func settle(t *testing.T, what string, base, margin int, f func() int) {
	t.Helper()
	var n int
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		n = f()
		if n <= base+margin {
			t.Logf("%s: %d after, %d before", what, n, base)
			return
		}
		if time.Now().After(deadline) {
			break
		}
	}
	if what == "goroutines" {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		t.Logf("goroutines still running:\n%s", buf)
	}
	t.Errorf("%s: %d after the daemon stopped, %d before (margin %d)", what, n, base, margin)
}

// rawClient posts raw bytes over the unix socket.
func rawClient(sock string) *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}}
}

// badInput sends one malformed or oversized request and checks the answer
// is a JSON error of the expected status.
func badInput(hc *http.Client, k int) error {
	var body io.Reader
	path, want := "/v1/exec", http.StatusBadRequest
	switch k % 6 {
	case 0:
		body = strings.NewReader(`{"conversation":`)
	case 1:
		body = strings.NewReader(`not json at all`)
		path = "/v1/tools/write"
	case 2:
		body = strings.NewReader(`{"conversation":{"platform":"web","conversationId":"x"},"bogus":1}`)
		path = "/v1/policy"
	case 3: // oversized: 9 MiB of stdin, over the 8 MiB limit
		body = strings.NewReader(`{"conversation":{"platform":"web","conversationId":"x"},"command":"true","stdin":"` + strings.Repeat("a", 9<<20) + `"}`)
	case 4:
		body = strings.NewReader(`{"conversation":{"platform":"web","conversationId":"../etc"},"command":"true"}`)
	case 5:
		body = bytes.NewReader(bytes.Repeat([]byte{0xff, 0x00, '{'}, 1000))
		path = "/v1/vault/list"
	}
	resp, err := hc.Post("http://hutch"+path, "application/json", body)
	if err != nil && k%6 == 3 && (errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET)) {
		// The daemon reads no further than the limit: it answers 400 and,
		// 500 ms later, closes a connection whose sender is still writing
		// (net/http's rule for a large unread body). A client stalled for
		// those 500 ms (50 clients under -race on two CPUs) sees its write
		// fail before it reads the answer: the refusal, delivered the only
		// way HTTP/1.1 can to a client that does not wait for 100-continue.
		return nil
	}
	if err != nil {
		return fmt.Errorf("bad input %d: %w", k%6, err)
	}
	defer func() { _ = resp.Body.Close() }()
	var eb api.ErrorBody
	if err := json.NewDecoder(resp.Body).Decode(&eb); err != nil {
		return fmt.Errorf("bad input %d: status %d, undecodable body: %v", k%6, resp.StatusCode, err)
	}
	if resp.StatusCode != want || eb.Error == "" || eb.Code != "invalid" {
		return fmt.Errorf("bad input %d: status %d, body %+v; want %d invalid", k%6, resp.StatusCode, eb, want)
	}
	return nil
}

// TestDaemon_Load: 50 concurrent clients make mixed calls across 20
// conversations (exec, write/read/edit tools, policy, vault list) with a
// burst of malformed and oversized bodies in between, for 30 s (3 s with
// -short): no error; after shutdown no goroutine or fd growth.
func TestDaemon_Load(t *testing.T) {
	const clients, convs = 50, 20
	dur := 30 * time.Second
	if testing.Short() {
		dur = 3 * time.Second
	}
	svc := hostService(t)
	for i := range convs {
		c := conv(i)
		addr, err := office.NewAddress(c.Platform, c.ConversationID)
		if err != nil {
			t.Fatal(err)
		}
		shared, err := projection.ParseDoorWord("shared")
		if err != nil {
			t.Fatal(err)
		}
		if err := svc.SetDoor(t.Context(), addr, shared); err != nil {
			t.Fatal(err)
		}
	}
	runtime.GC()
	baseG, baseFD := runtime.NumGoroutine(), openFDs(t)

	d := start(t, svc, daemon.Options{Mode: sandbox.Mode{Kind: sandbox.KindHost}, Grace: 5 * time.Second})
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var dl net.Dialer
		return dl.DialContext(ctx, "unix", d.sock)
	}}
	cl := &client.Client{Socket: d.sock, Transport: tr}
	ctx := context.Background()

	var calls, errs atomic.Int64
	var firstErr atomic.Pointer[error]
	fail := func(err error) {
		errs.Add(1)
		firstErr.CompareAndSwap(nil, &err)
	}
	deadline := time.Now().Add(dur)
	var wg sync.WaitGroup
	for w := range clients {
		wg.Go(func() {
			c := conv(w % convs)
			file := fmt.Sprintf("w%02d/notes.txt", w)
			for i := 0; time.Now().Before(deadline); i++ {
				calls.Add(1)
				var err error
				switch i % 5 {
				case 0:
					var out, serr bytes.Buffer
					var res api.ExecResult
					res, err = cl.Exec(ctx, api.ExecRequest{Conversation: c, Command: fmt.Sprintf("echo %d", i)}, nil, &out, &serr)
					if err == nil && (res.ExitCode != 0 || out.String() != fmt.Sprintf("%d\n", i)) {
						err = fmt.Errorf("exec echo %d: exit %d, stdout %q, stderr %q", i, res.ExitCode, out.String(), serr.String())
					}
				case 1:
					content := fmt.Sprintf("worker %d round %d\nold line\n", w, i)
					in, _ := json.Marshal(tools.WriteInput{Path: file, Content: content})
					var ans api.ToolAnswer
					if err = cl.Call(ctx, "/v1/tools/write", api.ToolRequest{Conversation: c, Input: in}, &ans); err == nil && ans.IsError {
						err = fmt.Errorf("write: %s", ans.Text)
					}
					if err == nil {
						in, _ = json.Marshal(tools.EditInput{Path: file, OldText: "old line", NewText: "new line"})
						ans = api.ToolAnswer{}
						if err = cl.Call(ctx, "/v1/tools/edit", api.ToolRequest{Conversation: c, Input: in}, &ans); err == nil && ans.IsError {
							err = fmt.Errorf("edit: %s", ans.Text)
						}
					}
					if err == nil {
						in, _ = json.Marshal(tools.ReadInput{Path: file})
						var rd struct {
							Output  tools.ReadOutput `json:"output"`
							IsError bool             `json:"isError"`
							Text    string           `json:"text"`
						}
						err = cl.Call(ctx, "/v1/tools/read", api.ToolRequest{Conversation: c, Input: in}, &rd)
						want := fmt.Sprintf("worker %d round %d\nnew line", w, i)
						if err == nil && (rd.IsError || !strings.Contains(rd.Output.Text, want)) {
							err = fmt.Errorf("read %s: %q (isError %v %s), want it to contain %q", file, rd.Output.Text, rd.IsError, rd.Text, want)
						}
					}
				case 2:
					var pol api.PolicyAnswer
					err = cl.Call(ctx, "/v1/policy", api.ConversationRequest{Conversation: c}, &pol)
					if err == nil && (pol.Origin != "conversation setting" || pol.Refusal != "" || len(pol.Mounts) == 0) {
						err = fmt.Errorf("policy: %+v", pol)
					}
				case 3:
					var ents []api.VaultEntry
					err = cl.Call(ctx, "/v1/vault/list", api.VaultRequest{Conversation: &c}, &ents)
					if err == nil && len(ents) != 0 {
						err = fmt.Errorf("vault list: %+v", ents)
					}
				case 4:
					var h api.Health
					h, err = cl.Health(ctx)
					if err == nil && h.Status != "ok" {
						err = fmt.Errorf("health: %+v", h)
					}
				}
				if err != nil {
					fail(fmt.Errorf("client %d call %d: %w", w, i, err))
				}
			}
		})
	}
	// Bad input at scale, in between: 4 more clients sending malformed
	// and oversized bodies throughout.
	var bad atomic.Int64
	for b := range 4 {
		wg.Go(func() {
			hc := rawClient(d.sock)
			defer hc.CloseIdleConnections()
			for k := b; time.Now().Before(deadline); k += 4 {
				bad.Add(1)
				if err := badInput(hc, k); err != nil {
					fail(err)
				}
			}
		})
	}
	wg.Wait()
	t.Logf("load done after %s", time.Since(deadline.Add(-dur)))
	t.Logf("%d calls and %d bad requests in %s, %d errors", calls.Load(), bad.Load(), dur, errs.Load())
	if n := errs.Load(); n > 0 {
		t.Errorf("%d of %d calls failed; first: %v", n, calls.Load()+bad.Load(), *firstErr.Load())
	}
	if h, err := cl.Health(ctx); err != nil || h.Status != "ok" {
		t.Errorf("after the load: health %+v, %v", h, err)
	}
	t0 := time.Now()
	if err := d.stop(t); err != nil {
		t.Errorf("daemon.Run returned %v, want nil", err)
	}
	t.Logf("daemon stopped in %s", time.Since(t0))
	tr.CloseIdleConnections()
	if _, err := os.Stat(d.sock); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket left behind: %v", err)
	}
	settle(t, "goroutines", baseG, 5, runtime.NumGoroutine)
	settle(t, "open fds", baseFD, 3, func() int { return openFDs(t) })
}

// TestDaemon_TCPToken: on TCP a missing or wrong bearer token gets 401
// with a JSON error, the right one is served.
func TestDaemon_TCPToken(t *testing.T) {
	svc := hostService(t)
	const token = "0123456789abcdef0123456789abcdef-test"
	d := start(t, svc, daemon.Options{Mode: sandbox.Mode{Kind: sandbox.KindHost}, TCP: "127.0.0.1:0", Token: token})
	m := regexp.MustCompile(`TCP:\s+(http://\S+)`).FindStringSubmatch(d.out.String())
	if m == nil {
		t.Fatalf("no TCP address in the daemon's output:\n%s", d.out.String())
	}
	base := m[1]
	hc := &http.Client{Transport: &http.Transport{}}
	defer hc.CloseIdleConnections()
	for _, tc := range []struct {
		name, auth string
		want       int
	}{
		{"missing", "", http.StatusUnauthorized},
		{"wrong", "Bearer wrong-token", http.StatusUnauthorized},
		{"not bearer", "Basic " + token, http.StatusUnauthorized},
		{"prefix", "Bearer " + token[:len(token)-1], http.StatusUnauthorized},
		{"right", "Bearer " + token, http.StatusOK},
	} {
		req, _ := http.NewRequest("GET", base+"/v1/health", nil)
		if tc.auth != "" {
			req.Header.Set("Authorization", tc.auth)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%s token: status %d (%s), want %d", tc.name, resp.StatusCode, body, tc.want)
		}
		if tc.want == http.StatusUnauthorized {
			var eb api.ErrorBody
			if json.Unmarshal(body, &eb) != nil || eb.Code != "unauthorized" || eb.Error == "" {
				t.Errorf("%s token: body %s, want a JSON error with code unauthorized", tc.name, body)
			}
		}
	}
	// The Go client with the right token, and without.
	ok := &client.Client{BaseURL: base, Token: token, Transport: &http.Transport{}}
	if h, err := ok.Health(context.Background()); err != nil || h.Status != "ok" {
		t.Errorf("client with token: %+v, %v", h, err)
	}
	bad := &client.Client{BaseURL: base, Transport: &http.Transport{}}
	if _, err := bad.Health(context.Background()); err == nil || !strings.Contains(err.Error(), "bearer token") {
		t.Errorf("client without token: %v, want the bearer token refusal", err)
	}
	// The unix socket needs no token.
	if h, err := (&client.Client{Socket: d.sock}).Health(context.Background()); err != nil || h.Status != "ok" {
		t.Errorf("unix socket: %+v, %v", h, err)
	}
	if err := d.stop(t); err != nil {
		t.Errorf("daemon.Run returned %v, want nil", err)
	}
}

// engineLayout is a layout for daemons on the real engine: a state dir
// of the test's, a run dir short enough for unix sockets, and what the
// state dir labels cleaned up at the end.
func engineLayout(t *testing.T, cli *mobyclient.Client) (service.Layout, string) {
	t.Helper()
	run, err := os.MkdirTemp("", "hr-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = agent.RemoveSocketDir(run) }) // sealed socket dirs included
	layout, err := service.ResolveLayout(service.LayoutOptions{StateDir: filepath.Join(t.TempDir(), "state"), Getenv: func(k string) string {
		if k == "HUTCH_RUN_DIR" {
			return run
		}
		return ""
	}})
	if err != nil {
		t.Fatal(err)
	}
	testenv.CleanupContainers(t, cli, engine.LabelStateDir+"="+layout.StateDir)
	return layout, run
}

// TestDaemon_RestartAdopts: a daemon in image mode runs a command, stops;
// a new daemon on the same state dir adopts the container at reconcile
// and runs the next command in it, not in a new one.
func TestDaemon_RestartAdopts(t *testing.T) {
	cli := testenv.Docker(t)
	img := testenv.BusyboxImage(t, cli)
	layout, _ := engineLayout(t, cli)
	agent := testenv.HutchBinary(t)
	mode := sandbox.Mode{Kind: sandbox.KindImage, Target: img}
	c := api.Conversation{Platform: "web", ConversationID: testenv.Name(t)}
	addr, err := office.NewAddress(c.Platform, c.ConversationID)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	containerID := func() (string, time.Time) {
		t.Helper()
		res, err := cli.ContainerInspect(ctx, image.ContainerName(string(addr.Key())), mobyclient.ContainerInspectOptions{})
		if err != nil {
			t.Fatalf("inspect the conversation's container: %v", err)
		}
		started, _ := time.Parse(time.RFC3339Nano, res.Container.State.StartedAt)
		return res.Container.ID, started
	}
	execEcho := func(cl *client.Client, word string) {
		t.Helper()
		var out bytes.Buffer
		res, err := cl.Exec(ctx, api.ExecRequest{Conversation: c, Command: "echo " + word}, nil, &out, nil)
		if err != nil || res.ExitCode != 0 || out.String() != word+"\n" {
			t.Fatalf("exec echo %s: %+v, %q, %v", word, res, out.String(), err)
		}
	}

	svc1 := service.New(layout, nil)
	svc1.SetAgentBinary(agent)
	d1 := start(t, svc1, daemon.Options{Mode: mode, Grace: 5 * time.Second})
	execEcho(&client.Client{Socket: d1.sock}, "first")
	id1, started1 := containerID()
	if err := d1.stop(t); err != nil {
		t.Fatalf("first daemon: %v", err)
	}

	svc2 := service.New(layout, nil)
	svc2.SetAgentBinary(agent)
	d2 := start(t, svc2, daemon.Options{Mode: mode, Grace: 5 * time.Second})
	if !strings.Contains(d2.log.String(), "adopted=1") {
		t.Errorf("second daemon's reconcile did not adopt one runtime; log:\n%s", d2.log.String())
	}
	cl2 := &client.Client{Socket: d2.sock}
	var st api.Status
	if err := cl2.Call(ctx, "/v1/sandbox/status", api.LimitsRequest{Conversation: c}, &st); err != nil || st.State != string(sandbox.StateRunning) {
		t.Errorf("status after restart: %+v, %v", st, err)
	}
	execEcho(cl2, "second")
	// The container is read as metrics: its engine's stats, under its
	// office key, in an exposition promtool accepts.
	checkRuntimeMetrics(t, d2.sock, string(addr.Key()))
	id2, started2 := containerID()
	if id2 != id1 || !started2.Equal(started1) {
		t.Errorf("container after restart: %s started %s; before: %s started %s (want the same, not re-created or restarted)", id2, started2, id1, started1)
	}
	if err := d2.stop(t); err != nil {
		t.Errorf("second daemon: %v", err)
	}
}

// TestDaemon_WarmPool: a daemon in image mode keeps sandbox.pool
// runtimes ready; a new conversation's first command runs in one, the
// daemon refills the pool, and at shutdown it removes the ready members
// while the conversation's runtime stays.
func TestDaemon_WarmPool(t *testing.T) {
	cli := testenv.Docker(t)
	img := testenv.BusyboxImage(t, cli)
	if os.Geteuid() != 0 {
		t.Skip("the warm pool needs root")
	}
	layout, run := engineLayout(t, cli)
	if err := settings.SetRuntime(settings.GlobalPath(layout.StateDir), "sandbox.pool", "1"); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ready := func() []string {
		t.Helper()
		var ids []string
		for deadline := time.Now().Add(90 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
			res, err := cli.ContainerList(ctx, mobyclient.ContainerListOptions{Filters: make(mobyclient.Filters).
				Add("label", "hutch.pool.member").Add("label", engine.LabelStateDir+"="+layout.StateDir)})
			if err != nil {
				t.Fatal(err)
			}
			ids = ids[:0]
			for _, c := range res.Items {
				// Ready: its agent answered (the filler marks it so).
				name := strings.TrimPrefix(c.Names[0], "/")
				if _, err := os.Stat(filepath.Join(run, "pool", name, "ready")); err == nil && strings.HasPrefix(name, "hutch-pool-") {
					ids = append(ids, c.ID)
				}
			}
			if len(ids) == 1 {
				return ids
			}
		}
		t.Fatalf("the daemon keeps %d ready runtimes; want 1", len(ids))
		return nil
	}
	svc := service.New(layout, nil)
	svc.SetAgentBinary(testenv.HutchBinary(t))
	d := start(t, svc, daemon.Options{Mode: sandbox.Mode{Kind: sandbox.KindImage, Target: img}, Grace: 5 * time.Second})
	if want := "  Warm pool:   1 started runtime(s) ready per image in use (sandbox.pool)\n"; !strings.Contains(d.out.String(), want) {
		t.Errorf("banner:\n%s\nwant the line %q", d.out.String(), want)
	}
	member := ready()[0]
	c := api.Conversation{Platform: "web", ConversationID: testenv.Name(t)}
	addr, err := office.NewAddress(c.Platform, c.ConversationID)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	res, err := (&client.Client{Socket: d.sock}).Exec(ctx, api.ExecRequest{Conversation: c, Command: "ls /workspace"}, nil, &out, nil)
	if err != nil || res.ExitCode != 0 || out.String() != string(addr.Key())+"\n" {
		t.Fatalf("first command: %+v, %q, %v", res, out.String(), err)
	}
	ins, err := cli.ContainerInspect(ctx, image.ContainerName(string(addr.Key())), mobyclient.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ins.Container.ID != member {
		t.Errorf("the first command ran in %s; want the ready member %s", ins.Container.ID, member)
	}
	if next := ready()[0]; next == member {
		t.Error("the pool was not refilled")
	}
	if err := d.stop(t); err != nil {
		t.Fatal(err)
	}
	left, err := cli.ContainerList(ctx, mobyclient.ContainerListOptions{All: true, Filters: make(mobyclient.Filters).
		Add("label", "hutch.pool.member").Add("label", engine.LabelStateDir+"="+layout.StateDir)})
	if err != nil {
		t.Fatal(err)
	}
	if len(left.Items) != 1 || left.Items[0].ID != member {
		t.Errorf("after shutdown %d pool containers are left; want only the conversation's", len(left.Items))
	}
	// The conversation's runtime is removed with its mounts, so the run
	// dir goes without reaching through one.
	ir, err := svc.Managed(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := ir.Remove(ctx, string(addr.Key())); err != nil {
		t.Fatal(err)
	}
}

// TestDaemon_AdminPortal: the daemon serves the admin portal on its own
// TCP address; a link from the API opens its sign-in page; without the
// portal the API says so.
func TestDaemon_AdminPortal(t *testing.T) {
	svc := hostService(t)
	d := start(t, svc, daemon.Options{Mode: sandbox.Mode{Kind: sandbox.KindHost}, Admin: "127.0.0.1:0"})
	m := regexp.MustCompile(`Admin:\s+(http://\S+)/admin/`).FindStringSubmatch(d.out.String())
	if m == nil {
		t.Fatalf("no admin address in the daemon's output:\n%s", d.out.String())
	}
	c := &client.Client{Socket: d.sock}
	var res api.AdminLinkResponse
	if err := c.Call(context.Background(), "/v1/admin/link", api.AdminLinkRequest{Who: "slack:U1 in C1", TTL: "10m"}, &res); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(res.URL, m[1]+"/admin/login?token=") || time.Until(res.Expires) > 10*time.Minute {
		t.Errorf("link %+v", res)
	}
	hc := &http.Client{Transport: &http.Transport{}}
	defer hc.CloseIdleConnections()
	resp, err := hc.Get(res.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "Sign in") {
		t.Errorf("sign-in page: %d\n%s", resp.StatusCode, body)
	}
	if err := c.Call(context.Background(), "/v1/admin/link", api.AdminLinkRequest{}, &res); err == nil || !strings.Contains(err.Error(), "Say who the link is for") {
		t.Errorf("a link for nobody: %v", err)
	}
	if err := d.stop(t); err != nil {
		t.Errorf("daemon.Run returned %v, want nil", err)
	}

	off := start(t, hostService(t), daemon.Options{Mode: sandbox.Mode{Kind: sandbox.KindHost}})
	err = (&client.Client{Socket: off.sock}).Call(context.Background(), "/v1/admin/link", api.AdminLinkRequest{Who: "x"}, &res)
	if err == nil || !strings.Contains(err.Error(), "serves no admin portal") {
		t.Errorf("link from a daemon without the portal: %v", err)
	}
}
