package mcpserver_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/hutchsandbox/hutch/internal/mcpserver"
	"github.com/hutchsandbox/hutch/internal/sandbox"
)

// progressLog records the progress notifications a client receives, and
// whether any came after the call's result.
type progressLog struct {
	mu    sync.Mutex
	got   []*mcp.ProgressNotificationParams
	ended bool
	late  int
	// then, when set, is called with each notification.
	then func(*mcp.ProgressNotificationParams)
}

func (l *progressLog) handle(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.got = append(l.got, req.Params)
	if l.ended {
		l.late++
	}
	if l.then != nil {
		l.then(req.Params)
	}
}

func (l *progressLog) end() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ended = true
}

func (l *progressLog) notifications() []*mcp.ProgressNotificationParams {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]*mcp.ProgressNotificationParams(nil), l.got...)
}

// connectRecording joins a client that records progress to srv.
func connectRecording(t *testing.T, srv *mcp.Server) (*mcp.ClientSession, *progressLog) {
	t.Helper()
	ctx := context.Background()
	log := &progressLog{}
	st, ct := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, &mcp.ClientOptions{ProgressNotificationHandler: log.handle}).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.Close()
		_ = ss.Wait()
	})
	return cs, log
}

// callWithToken calls bash with a progress token (none when token is nil).
func callWithToken(t *testing.T, cs *mcp.ClientSession, log *progressLog, token any, command string) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	params := &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": command}}
	if token != nil {
		params.SetProgressToken(token)
	}
	res, err := cs.CallTool(ctx, params)
	log.end()
	if err != nil {
		t.Fatalf("bash: protocol error: %v", err)
	}
	return res
}

var progressMessage = regexp.MustCompile(`^\d+(\.\d)? (B|KiB|MiB|GiB) of output(; last line: .{1,110})?$`)

func TestBash_Progress(t *testing.T) {
	e := newHostEnv(t)
	cs, log := connectRecording(t, mcpserver.New(e.svc, sandbox.DefaultMode, e.addr, "", nil))
	res := callWithToken(t, cs, log, "bash-1", `for i in 1 2 3 4 5 6; do echo "step $i of 6"; sleep 0.5; done`)
	if res.IsError {
		t.Fatalf("bash: %s", textOf(t, res))
	}
	got := log.notifications()
	if len(got) < 2 {
		t.Fatalf("%d progress notifications in a 3 s command, want one a second", len(got))
	}
	var last float64
	for i, n := range got {
		if n.ProgressToken != "bash-1" {
			t.Errorf("notification %d: token %v, want the request's", i, n.ProgressToken)
		}
		if n.Progress <= last {
			t.Errorf("notification %d: progress %v after %v, want it to grow", i, n.Progress, last)
		}
		last = n.Progress
		if !progressMessage.MatchString(n.Message) || !strings.Contains(n.Message, "; last line: step ") {
			t.Errorf("notification %d: message %q", i, n.Message)
		}
		if n.Total != 0 {
			t.Errorf("notification %d: total %v, want none (unknown)", i, n.Total)
		}
	}
	if last > float64(len("step 1 of 6\n")*6) {
		t.Errorf("progress %v is more than the output's bytes", last)
	}
	if log.late != 0 {
		t.Errorf("%d notifications came after the result", log.late)
	}
}

func TestBash_NoProgressWithoutToken(t *testing.T) {
	e := newHostEnv(t)
	cs, log := connectRecording(t, mcpserver.New(e.svc, sandbox.DefaultMode, e.addr, "", nil))
	res := callWithToken(t, cs, log, nil, `for i in 1 2 3; do echo "step $i"; sleep 0.5; done`)
	if res.IsError || textOf(t, res) != "step 1\nstep 2\nstep 3" {
		t.Fatalf("bash: IsError %v, %q", res.IsError, textOf(t, res))
	}
	if got := log.notifications(); len(got) != 0 {
		t.Errorf("%d progress notifications for a call without a token: %+v", len(got), got[0])
	}
}

// TestBash_ProgressOfSilentCommand: progress counts output, so a command
// that writes nothing sends no notification (progress must grow).
func TestBash_ProgressOfSilentCommand(t *testing.T) {
	e := newHostEnv(t)
	cs, log := connectRecording(t, mcpserver.New(e.svc, sandbox.DefaultMode, e.addr, "", nil))
	if res := callWithToken(t, cs, log, 7, `sleep 2.5`); res.IsError {
		t.Fatalf("bash: %s", textOf(t, res))
	}
	if got := log.notifications(); len(got) != 0 {
		t.Errorf("%d progress notifications for a silent command", len(got))
	}
}

// startChild is a command that starts a background child in its process
// group, writes the child's pid to child.pid in the office, and waits.
const startChild = `sleep 600 & echo $! > child.pid; echo started; wait`

// childPID waits for the pid startChild writes in dir.
func childPID(t *testing.T, dir string) int {
	t.Helper()
	for range 600 {
		data, err := os.ReadFile(filepath.Join(dir, "child.pid"))
		if pid, perr := strconv.Atoi(strings.TrimSpace(string(data))); err == nil && perr == nil {
			return pid
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("the command wrote no child.pid")
	return 0
}

// alive says whether process pid is still running (a zombie waiting to
// be reaped is not).
func alive(pid int) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(data)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(fields) > 0 && fields[0] != "Z"
}

// waitGone fails the test unless pid is gone within a minute.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	for range 1200 {
		if !alive(pid) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Errorf("process %d still runs", pid)
}

// TestBash_CancelKillsGroup: a client that gives up on a call sends
// notifications/cancelled; the command's process group is killed (a
// background child included) and the tool call ends, so the next one runs.
func TestBash_CancelKillsGroup(t *testing.T) {
	e := newHostEnv(t)
	cs := connect(t, mcpserver.New(e.svc, sandbox.DefaultMode, e.addr, "", nil))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": startChild}})
		errc <- err
	}()
	pid := childPID(t, e.officeDir(e.addr))
	if !alive(pid) {
		t.Fatalf("child %d is not running", pid)
	}
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled call: %v, want context.Canceled", err)
	}
	waitGone(t, pid)
	// bash runs one command of a conversation at a time: this one runs
	// only once the cancelled call has ended.
	if res := call(t, cs, "bash", map[string]any{"command": "echo next"}); res.IsError || textOf(t, res) != "next" {
		t.Errorf("the call after the cancelled one: IsError %v, %q", res.IsError, textOf(t, res))
	}
}

// TestBash_ProgressPastCaptureLimit: bash keeps 16 MiB of each stream;
// progress counts all of the output, and the result still says the
// capture was cut.
func TestBash_ProgressPastCaptureLimit(t *testing.T) {
	e := newHostEnv(t)
	cs, log := connectRecording(t, mcpserver.New(e.svc, sandbox.DefaultMode, e.addr, "", nil))
	res := callWithToken(t, cs, log, "big", `head -c 20000000 /dev/zero | tr '\0' 'z'; sleep 1.5`)
	if text := textOf(t, res); res.IsError || !strings.Contains(text, "only the first 16.0 MiB") {
		t.Errorf("bash: IsError %v, %.300q; want the capture limit's notice", res.IsError, text[max(0, len(text)-300):])
	}
	got := log.notifications()
	if len(got) == 0 {
		t.Fatal("no progress notification")
	}
	if last := got[len(got)-1]; last.Progress != 20000000 || last.Message != "19.1 MiB of output; last line: …"+strings.Repeat("z", 100) {
		t.Errorf("last notification: progress %.0f, %q; want 20000000 bytes", last.Progress, last.Message)
	}
}

// TestProxy_ProgressAndCancel: hutch mcp serving a daemon's tools passes
// the daemon's progress on under the client's own token, and a call the
// client cancels kills the command in the daemon.
func TestProxy_ProgressAndCancel(t *testing.T) {
	e := newHostEnv(t)
	ts := httptest.NewServer(mcpserver.HTTPHandler(e.svc, sandbox.DefaultMode, nil))
	t.Cleanup(ts.Close)
	q := url.Values{"platform": {"web"}, "conversationId": {e.addr.ConversationID}}
	ctx := context.Background()
	p, err := mcpserver.DialProxy(ctx, ts.URL+"/mcp?"+q.Encode(), ts.Client(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	srv, err := p.Server(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cs, log := connectRecording(t, srv)

	res := callWithToken(t, cs, log, 42, `for i in 1 2 3 4 5; do echo "step $i"; sleep 0.5; done`)
	if res.IsError {
		t.Fatalf("bash: %s", textOf(t, res))
	}
	got := log.notifications()
	if len(got) < 2 {
		t.Fatalf("%d progress notifications through the proxy, want one a second", len(got))
	}
	for i, n := range got {
		if fmt.Sprint(n.ProgressToken) != "42" || !strings.Contains(n.Message, "; last line: step ") || (i > 0 && n.Progress <= got[i-1].Progress) {
			t.Errorf("notification %d: %+v", i, n)
		}
	}
	if log.late != 0 {
		t.Errorf("%d notifications came after the result", log.late)
	}

	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(cctx, &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": startChild}})
		errc <- err
	}()
	pid := childPID(t, e.officeDir(e.addr))
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled call: %v", err)
	}
	waitGone(t, pid)
	if res := call(t, cs, "bash", map[string]any{"command": "echo next"}); res.IsError || textOf(t, res) != "next" {
		t.Errorf("the call after the cancelled one: IsError %v, %q", res.IsError, textOf(t, res))
	}
}

// TestBash_CancelWhileWaiting: a call cancelled while it waits for its
// conversation's turn (another command runs) never runs, and the running
// command is left alone.
func TestBash_CancelWhileWaiting(t *testing.T) {
	e := newHostEnv(t)
	cs := connect(t, mcpserver.New(e.svc, sandbox.DefaultMode, e.addr, "", nil))
	first := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, _ := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": startChild + "; echo done"}})
		first <- res
	}()
	pid := childPID(t, e.officeDir(e.addr))

	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": "touch waited"}}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the waiting call: %v, want it to give up", err)
	}
	if !alive(pid) {
		t.Fatal("cancelling the waiting call killed the running command")
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if res := <-first; res == nil || res.IsError || textOf(t, res) != "started\ndone" {
		t.Fatalf("the running command: %+v", res)
	}
	if res := call(t, cs, "bash", map[string]any{"command": "sleep 0.5; ls"}); res.IsError || strings.Contains(textOf(t, res), "waited") {
		t.Errorf("the cancelled call ran: IsError %v, %q", res.IsError, textOf(t, res))
	}
}
