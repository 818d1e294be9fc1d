package mcpserver_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/hutchsandbox/hutch/internal/agent"
	"github.com/hutchsandbox/hutch/internal/engine"
	"github.com/hutchsandbox/hutch/internal/mcpserver"
	"github.com/hutchsandbox/hutch/internal/office"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/service"
	"github.com/hutchsandbox/hutch/internal/testenv"
)

// TestTools_ImageMode drives the tools against a managed container (the
// conversation's own, with the default isolated door policy), the sandbox
// tool included.
func TestTools_ImageMode(t *testing.T) {
	svc, img := imageService(t)
	addr, err := office.NewAddress("web", testenv.Name(t))
	if err != nil {
		t.Fatal(err)
	}
	imageSteps(t, svc, img, addr)
}

// imageService is a service whose image mode runs on the real engine.
func imageService(t *testing.T) (*service.Service, string) {
	t.Helper()
	cli := testenv.Docker(t)
	img := testenv.BusyboxImage(t, cli)
	run, err := os.MkdirTemp("", "hm-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = agent.RemoveSocketDir(run) }) // sealed socket dirs included
	layout, err := service.ResolveLayout(service.LayoutOptions{
		StateDir: filepath.Join(t.TempDir(), "state"),
		Getenv: func(k string) string {
			if k == "HUTCH_RUN_DIR" {
				return run
			}
			return ""
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	testenv.CleanupContainers(t, cli, engine.LabelStateDir+"="+layout.StateDir)
	svc := service.New(layout, nil)
	svc.SetAgentBinary(testenv.HutchBinary(t))
	t.Cleanup(func() { _ = svc.Close() })
	return svc, img
}

func imageSteps(t *testing.T, svc *service.Service, img string, addr office.Address) {
	t.Helper()
	cs := connect(t, mcpserver.New(svc, sandbox.Mode{Kind: sandbox.KindImage, Target: img}, addr, "", nil))
	office := "/workspace/" + string(addr.Key())

	steps := []step{
		{name: "image_sandbox_status_missing", tool: "sandbox", args: map[string]any{"action": "status"}, contains: "State: not created yet"},
		{name: "image_sandbox_set_not_running", tool: "sandbox", args: map[string]any{"action": "set", "cpus": "1"}, isError: true, contains: "has not been created yet"},
		{name: "image_write", tool: "write", args: map[string]any{"path": "src/a.txt", "content": "alpha\nbeta\n"}, contains: "Wrote 11 bytes to src/a.txt"},
		{name: "image_edit", tool: "edit", args: map[string]any{"path": "src/a.txt", "oldText": "beta", "newText": "gamma"}, contains: "+gamma"},
		{name: "image_bash", tool: "bash", args: map[string]any{"command": "pwd; cat src/a.txt"}, contains: office + "\nalpha\ngamma"},
		{name: "image_bash_exit", tool: "bash", args: map[string]any{"command": "exit 3"}, isError: true, contains: "Command exited with code 3"},
		{name: "image_read", tool: "read", args: map[string]any{"path": office + "/src/a.txt"}, contains: "alpha\ngamma"},
		{name: "image_read_outside", tool: "read", args: map[string]any{"path": "/etc/passwd"}, isError: true, contains: "is outside the sandbox's workspace"},
		{name: "image_sandbox_status", tool: "sandbox", args: map[string]any{"action": "status"}, contains: "State: running\nLimits: 0.5 CPUs, 1GiB memory, 1024 processes\nBoosted: no\nTemporary limits: no"},
		{name: "image_sandbox_set", tool: "sandbox", args: map[string]any{"action": "set", "cpus": "1", "memory": "512m"}, contains: "Temporary limits set.\nState: running\nLimits: 1 CPU, 512MiB memory"},
		{name: "image_sandbox_set_bad_memory", tool: "sandbox", args: map[string]any{"action": "set", "memory": "lots"}, isError: true, contains: `Memory "lots" must be a positive size such as 512m or 4g`},
		{name: "image_sandbox_set_nothing", tool: "sandbox", args: map[string]any{"action": "set"}, isError: true, contains: "action=set requires cpus and/or memory"},
	}
	for _, st := range steps {
		res := call(t, cs, st.tool, st.args)
		text := textOf(t, res)
		if res.IsError != st.isError {
			t.Errorf("%s: IsError = %v, want %v; text:\n%s", st.name, res.IsError, st.isError, text)
		}
		if !strings.Contains(text, st.contains) {
			t.Errorf("%s: text does not contain %q:\n%s", st.name, st.contains, text)
		}
		got := strings.NewReplacer(office, "<office>", string(addr.Key()), "<office-key>").Replace(render(t, res))
		golden(t, filepath.Join("testdata", "calls", st.name+".golden"), got)
	}
}

// TestHTTPHandler_ImageMode drives the tools over streamable HTTP, as the
// daemon serves them, against a managed container.
func TestHTTPHandler_ImageMode(t *testing.T) {
	svc, img := imageService(t)
	ts := httptest.NewServer(mcpserver.HTTPHandler(svc, sandbox.Mode{Kind: sandbox.KindImage, Target: img}, nil))
	t.Cleanup(ts.Close)
	id := testenv.Name(t)
	addr, err := office.NewAddress("web", id)
	if err != nil {
		t.Fatal(err)
	}
	q := url.Values{"platform": {"web"}, "conversationId": {id}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).
		Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: ts.URL + "/mcp?" + q.Encode()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cs.Close() }()
	if res := call(t, cs, "write", map[string]any{"path": "a.txt", "content": "over http\n"}); res.IsError {
		t.Fatalf("write: %s", textOf(t, res))
	}
	res := call(t, cs, "bash", map[string]any{"command": "pwd; cat a.txt"})
	if want := "/workspace/" + string(addr.Key()) + "\nover http"; res.IsError || textOf(t, res) != want {
		t.Errorf("bash over HTTP in the container: IsError=%v %q, want %q", res.IsError, textOf(t, res), want)
	}
	if res := call(t, cs, "read", map[string]any{"path": "/etc/passwd"}); !res.IsError {
		t.Errorf("read outside the office over HTTP was not refused: %s", textOf(t, res))
	}
}

// TestImageMode_ProgressAndCancel: in a managed container, progress
// comes through the agent as it does on the host, and a cancelled call
// has the agent kill the command's process group inside the container.
func TestImageMode_ProgressAndCancel(t *testing.T) {
	svc, img := imageService(t)
	addr, err := office.NewAddress("web", testenv.Name(t))
	if err != nil {
		t.Fatal(err)
	}
	cs, log := connectRecording(t, mcpserver.New(svc, sandbox.Mode{Kind: sandbox.KindImage, Target: img}, addr, "", nil))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	log.then = func(n *mcp.ProgressNotificationParams) {
		if strings.HasSuffix(n.Message, "; last line: started") {
			cancel()
		}
	}
	params := &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": startChild}}
	params.SetProgressToken("long")
	if _, err := cs.CallTool(ctx, params); !errors.Is(err, context.Canceled) {
		t.Fatalf("call: %v, want it cancelled once progress showed the command started", err)
	}
	if got := log.notifications(); len(got) == 0 || got[0].Progress != float64(len("started\n")) {
		t.Errorf("progress: %+v", got)
	}
	// The agent is the container's init and reaps what it killed.
	res := call(t, cs, "bash", map[string]any{"command": `child=$(cat child.pid); for i in $(seq 100); do [ -e /proc/$child ] || { echo gone; exit 0; }; sleep 0.1; done; echo "child $child still runs"`})
	if res.IsError || textOf(t, res) != "gone" {
		t.Errorf("after the cancel: IsError %v, %q", res.IsError, textOf(t, res))
	}
}
