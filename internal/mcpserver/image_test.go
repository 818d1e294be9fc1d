package mcpserver_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

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
	cli := testenv.Docker(t)
	img := testenv.BusyboxImage(t, cli)
	run, err := os.MkdirTemp("", "hm-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(run) })
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
	t.Cleanup(func() { svc.Close() })
	addr, err := office.NewAddress("web", testenv.Name(t))
	if err != nil {
		t.Fatal(err)
	}
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
		{name: "image_sandbox_set", tool: "sandbox", args: map[string]any{"action": "set", "cpus": "1", "memory": "512m"}, contains: "Temporary limits set.\nState: running\nLimits: 1 CPUs, 512MiB memory"},
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
