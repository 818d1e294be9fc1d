package mcpserver_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/moby/moby/client"

	"github.com/hutchsandbox/hutch/internal/events"
	"github.com/hutchsandbox/hutch/internal/mcpserver"
	"github.com/hutchsandbox/hutch/internal/mcptools"
	"github.com/hutchsandbox/hutch/internal/office"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/sandbox/image"
	"github.com/hutchsandbox/hutch/internal/testenv"
	"github.com/hutchsandbox/hutch/internal/tools"
)

// TestAttack_LimitsAboveCeiling: the agent asks its sandbox tool for most
// of the host (20 GiB of memory, 16 CPUs). It is refused with the
// ceiling (by default the boost size) and the container keeps its
// limits; up to the ceiling it may raise them, and past it once the
// operator raised the ceiling.
func TestAttack_LimitsAboveCeiling(t *testing.T) {
	svc, img := imageService(t)
	addr, err := office.NewAddress("web", testenv.Name(t))
	if err != nil {
		t.Fatal(err)
	}
	cs := connect(t, mcpserver.New(svc, sandbox.Mode{Kind: sandbox.KindImage, Target: img}, addr, "", nil))
	if res := call(t, cs, "bash", map[string]any{"command": "true"}); res.IsError {
		t.Fatalf("bash: %s", textOf(t, res))
	}
	cli := testenv.Docker(t)
	memory := func() int64 {
		t.Helper()
		res, err := cli.ContainerInspect(context.Background(), image.ContainerName(string(addr.Key())), client.ContainerInspectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return res.Container.HostConfig.Memory
	}
	for _, tc := range []struct {
		args map[string]any
		want string
	}{
		{map[string]any{"action": "set", "memory": "20g"}, "Memory 20GiB is above this installation's ceiling of 4GiB; nothing was changed. The operator can raise it: hutch sandbox settings sandbox.ceiling.memory <value>"},
		{map[string]any{"action": "set", "cpus": "16"}, "CPUs 16 is above this installation's ceiling of 2; nothing was changed. The operator can raise it: hutch sandbox settings sandbox.ceiling.cpus <value>"},
		{map[string]any{"action": "set", "cpus": "1", "memory": "4097m"}, "Memory 4.001GiB is above this installation's ceiling of 4GiB"},
	} {
		res := call(t, cs, "sandbox", tc.args)
		if text := textOf(t, res); !res.IsError || !strings.Contains(text, tc.want) {
			t.Errorf("sandbox %v: isError %v, %q; want the refusal %q", tc.args, res.IsError, text, tc.want)
		}
	}
	if got := memory(); got != 1<<30 {
		t.Errorf("container memory after the refused raises: %d, want the default 1 GiB", got)
	}
	if res := call(t, cs, "sandbox", map[string]any{"action": "set", "memory": "4g"}); res.IsError {
		t.Errorf("a raise to the ceiling was refused: %s", textOf(t, res))
	}
	if got := memory(); got != 4<<30 {
		t.Errorf("container memory after a raise to the ceiling: %d, want 4 GiB", got)
	}
	if err := svc.SetRuntimeSetting("sandbox.ceiling.memory", "6g"); err != nil {
		t.Fatal(err)
	}
	if res := call(t, cs, "sandbox", map[string]any{"action": "set", "memory": "6g"}); res.IsError {
		t.Errorf("a raise to the raised ceiling was refused: %s", textOf(t, res))
	}
	if got := memory(); got != 6<<30 {
		t.Errorf("container memory after the operator raised the ceiling: %d, want 6 GiB", got)
	}
	// The event log has each of it: the runtime the agent's first command
	// made, the refusals, the raises, under MCP; the operator's setting
	// under the CLI (the service's own surface).
	evs, err := svc.Events().Last(20)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range evs {
		d := e.Detail
		if e.Action == events.Refused {
			d, _, _ = strings.Cut(d, ";")
		}
		got = append(got, e.Surface+" "+e.Action+" "+e.Target+" "+d)
	}
	key := string(addr.Key())
	want := []string{
		"mcp runtime.created " + key + " ",
		"mcp refused " + addr.String() + " ceiling: Memory 20GiB is above this installation's ceiling of 4GiB",
		"mcp refused " + addr.String() + " ceiling: CPUs 16 is above this installation's ceiling of 2",
		"mcp refused " + addr.String() + " ceiling: Memory 4.001GiB is above this installation's ceiling of 4GiB",
		"mcp limits.set " + key + " memory=4096MiB",
		"cli setting.set global sandbox.ceiling.memory=6g",
		"mcp limits.set " + key + " memory=6144MiB",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestAttack_OutputFlood: the agent's command writes as fast as it can
// for three seconds (gigabytes, in any pieces). The client that asked for
// progress still gets at most one notification a second, each a short
// message, and the count goes on past the capture limit.
func TestAttack_OutputFlood(t *testing.T) {
	e := newHostEnv(t)
	cs, log := connectRecording(t, mcpserver.New(e.svc, sandbox.DefaultMode, e.addr, "", nil))
	start := time.Now()
	res := callWithToken(t, cs, log, "flood", `end=$(($(date +%s)+3)); while [ "$(date +%s)" -lt "$end" ]; do head -c 4000000 /dev/zero | tr '\0' 'x'; echo; echo "to stderr" >&2; done`)
	elapsed := time.Since(start)
	if !res.IsError && !strings.Contains(textOf(t, res), "Full output:") {
		t.Errorf("the flood's result does not say it was cut: %.200q", textOf(t, res))
	}
	got := log.notifications()
	if max := int(elapsed/mcptools.ProgressInterval) + 1; len(got) > max {
		t.Errorf("%d progress notifications in %v, want at most %d", len(got), elapsed, max)
	}
	if len(got) == 0 {
		t.Fatal("no progress notification for a 3 s flood")
	}
	for i, n := range got {
		if len(n.Message) > 200 || !progressMessage.MatchString(n.Message) {
			t.Errorf("notification %d: message of %d bytes: %.300q", i, len(n.Message), n.Message)
		}
	}
	last := got[len(got)-1].Progress
	t.Logf("%d notifications in %v; the last counted %.0f bytes", len(got), elapsed.Round(time.Millisecond), last)
	if last <= tools.CaptureLimit {
		t.Errorf("the last notification counted %.0f bytes, not past the %d bash keeps: the count stopped with the capture", last, tools.CaptureLimit)
	}
}

// rawStdio serves srv on StdioTransport over pipes, for a client that
// writes its JSON-RPC lines itself.
type rawStdio struct {
	t     *testing.T
	in    *io.PipeWriter
	lines chan map[string]any
}

func newRawStdio(t *testing.T, srv *mcp.Server) *rawStdio {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Run(ctx, &mcpserver.StdioTransport{Reader: inR, Writer: outW})
	}()
	r := &rawStdio{t: t, in: inW, lines: make(chan map[string]any, 100)}
	go func() {
		sc := bufio.NewScanner(outR)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) == nil {
				r.lines <- m
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		_ = inW.Close()
		_ = outW.Close()
		<-done
	})
	r.send(`{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	r.response("init")
	r.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return r
}

func (r *rawStdio) send(line string) {
	r.t.Helper()
	if _, err := io.WriteString(r.in, line+"\n"); err != nil {
		r.t.Fatal(err)
	}
}

// response waits for the response to request id (JSON-encoded as given:
// "7" and 7 are different ids), skipping notifications.
func (r *rawStdio) response(id any) map[string]any {
	r.t.Helper()
	timeout := time.After(2 * time.Minute)
	for {
		select {
		case m := <-r.lines:
			if m["id"] == id {
				return m
			}
		case <-timeout:
			r.t.Fatalf("no response to %v", id)
			return nil
		}
	}
}

func bashCall(id, command string) string {
	args, _ := json.Marshal(map[string]any{"command": command})
	return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"bash","arguments":` + string(args) + `}}`
}

func cancelled(id string) string {
	return `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":` + id + `,"reason":"test"}}`
}

// resultText is the text of a tools/call response, and whether it is a
// tool error.
func resultText(t *testing.T, m map[string]any) (string, bool) {
	t.Helper()
	res, ok := m["result"].(map[string]any)
	if !ok {
		t.Fatalf("not a result: %v", m)
	}
	content, _ := res["content"].([]any)
	if len(content) == 0 {
		t.Fatalf("no content: %v", m)
	}
	text, _ := content[0].(map[string]any)["text"].(string)
	isError, _ := res["isError"].(bool)
	return text, isError
}

// TestAttack_CancelOtherRequest: notifications/cancelled names one
// request of its own session. Cancels naming a request that is not
// running, the same id as a string rather than a number, or the id of a
// request of another session (another conversation, here) kill nothing;
// the cancel naming the request kills it.
func TestAttack_CancelOtherRequest(t *testing.T) {
	e := newHostEnv(t, "other")
	other := e.addr
	other.ConversationID = "other"
	a := newRawStdio(t, mcpserver.New(e.svc, sandbox.DefaultMode, e.addr, "", nil))
	b := newRawStdio(t, mcpserver.New(e.svc, sandbox.DefaultMode, other, "", nil))

	a.send(bashCall("7", startChild+"; echo done"))
	b.send(bashCall("7", startChild))
	pidA, pidB := childPID(t, e.officeDir(e.addr)), childPID(t, e.officeDir(other))

	a.send(cancelled("8"))
	a.send(cancelled(`"7"`))
	a.send(cancelled("null"))
	a.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{}}`)
	a.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":{"id":7}}}`)
	// A read, answered after the cancels, shows they were all handled.
	a.send(`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"read","arguments":{"path":"child.pid"}}}`)
	if text, isErr := resultText(t, a.response(float64(9))); isErr || strings.TrimSpace(text) != strconv.Itoa(pidA) {
		t.Fatalf("read after the cancels: IsError %v, %q", isErr, text)
	}
	if !alive(pidA) {
		t.Fatal("a cancel naming another request killed the command")
	}

	// b's request 7 is cancelled: a's, of the same id, runs on.
	b.send(cancelled("7"))
	waitGone(t, pidB)
	if !alive(pidA) {
		t.Fatal("cancelling request 7 of one session killed request 7 of another")
	}
	b.send(bashCall("10", "echo next"))
	if text, isErr := resultText(t, b.response(float64(10))); isErr || text != "next" {
		t.Errorf("the call after the cancelled one: IsError %v, %q", isErr, text)
	}

	// a's own command ends normally once its child does.
	if err := syscall.Kill(pidA, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if text, isErr := resultText(t, a.response(float64(7))); isErr || text != "started\ndone" {
		t.Errorf("request 7 of a: IsError %v, %q; want it to have run to its end", isErr, text)
	}
}
