package cli

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/hutchsandbox/hutch/internal/agent"
	"github.com/hutchsandbox/hutch/internal/api"
	"github.com/hutchsandbox/hutch/internal/engine"
	"github.com/hutchsandbox/hutch/internal/settings"
	"github.com/hutchsandbox/hutch/internal/testenv"
)

// dockerEnv is an env whose managed runtimes run on the real engine,
// with a static agent and a run dir short enough for unix sockets.
func dockerEnv(t *testing.T) (*env, string) {
	t.Helper()
	cli := testenv.Docker(t)
	img := testenv.BusyboxImage(t, cli)
	bin := testenv.HutchBinary(t)
	e := newEnv(t)
	run, err := os.MkdirTemp("", "hr-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = agent.RemoveSocketDir(run) }) // sealed socket dirs included
	extra := map[string]string{"HUTCH_AGENT_BINARY": bin, "HUTCH_RUN_DIR": run}
	e.extra = extra
	if err := os.MkdirAll(e.state, 0o700); err != nil {
		t.Fatal(err)
	}
	testenv.CleanupContainers(t, cli, engine.LabelStateDir+"="+e.state)
	// A daemon these tests start is killed at their end, before it could
	// remove a warm pool (which would leave its mounts behind): it keeps
	// none. internal/daemon tests the pool.
	if err := settings.SetRuntime(settings.GlobalPath(e.state), "sandbox.pool", "0"); err != nil {
		t.Fatal(err)
	}
	return e, "image:" + img
}

func TestImageMode_EndToEnd(t *testing.T) {
	e, mode := dockerEnv(t)
	conv := "slack/" + strings.ToUpper(strings.ReplaceAll(testenv.Name(t), "-", ""))
	k := key(t, "slack", conv[len("slack/"):])

	// Isolated by default: image mode enforces it.
	out := e.ok("exec", "--sandbox", mode, "--conversation", conv, "--", "pwd; ls /workspace")
	if want := "/workspace/" + k + "\n" + k + "\n"; out != want {
		t.Errorf("isolated exec got %q, want %q", out, want)
	}
	e.ok("vault", "set", conv, "HUTCH_TOKEN=tok-123")
	if out := e.ok("exec", "--sandbox", mode, "--conversation", conv, "--", `echo "$HUTCH_TOKEN"`); out != "tok-123\n" {
		t.Errorf("vault env got %q", out)
	}
	out = e.ok("sandbox", "ls")
	if !strings.Contains(out, conv) || !strings.Contains(out, "running") || !strings.Contains(out, "hutch-"+k) {
		t.Errorf("sandbox ls:\n%s", out)
	}
	var list []api.Status
	if err := json.Unmarshal([]byte(e.ok("sandbox", "ls", "--json")), &list); err != nil || len(list) != 1 ||
		list[0].Mode != "image" || list[0].State != "running" || list[0].Name != "hutch-"+k || list[0].OfficeKey != k {
		t.Errorf("sandbox ls --json: %+v, %v", list, err)
	}
	if out := e.ok("sandbox", "ls", "-q"); out != conv+"\n" {
		t.Errorf("sandbox ls -q: %q, want %q", out, conv+"\n")
	}
	var st api.Status
	if err := json.Unmarshal([]byte(e.ok("sandbox", "status", conv, "--json")), &st); err != nil || st.State != "running" || st.OfficeKey != k || st.MemoryBytes != 1<<30 {
		t.Errorf("sandbox status --json: %+v, %v", st, err)
	}
	out = e.ok("sandbox", "boost", conv)
	if !strings.Contains(out, "State:         running (boosted)") || !strings.Contains(out, "Limits:        2 CPUs, 4GiB memory, 1024 processes") {
		t.Errorf("sandbox boost:\n%s", out)
	}
	out = e.ok("sandbox", "limits", conv, "--pids", "512")
	if !strings.Contains(out, "2 CPUs, 4GiB memory, 512 processes") {
		t.Errorf("sandbox limits:\n%s", out)
	}
	e.ok("sandbox", "stop", conv)
	out = e.ok("sandbox", "status", conv)
	if !strings.Contains(out, "State:         stopped\n") {
		t.Errorf("status after stop:\n%s", out)
	}
	e.ok("sandbox", "limits", "--global", "--cpus", "1")
	if out := e.ok("exec", "--sandbox", mode, "--conversation", conv, "--", "echo again"); out != "again\n" {
		t.Errorf("exec after stop got %q", out)
	}
	out = e.ok("sandbox", "status", conv)
	if !strings.Contains(out, "State:         running\n") || !strings.Contains(out, "Limits:        1 CPU, 1GiB memory, 1024 processes") {
		t.Errorf("status after restart (boost gone, global cpus 1):\n%s", out)
	}
	_, errOut, code := e.run("", "sandbox", "limits", conv, "--memory", "lots")
	if code != 1 || errOut != "hutch: Memory \"lots\" must be a positive size such as 512m or 4g\n" {
		t.Errorf("bad memory: exit %d, %q", code, errOut)
	}
	e.ok("sandbox", "rm", conv)
	out = e.ok("sandbox", "status", conv)
	if !strings.Contains(out, "State:         missing") {
		t.Errorf("status after rm:\n%s", out)
	}
	// The office survives its runtime.
	if _, err := os.Stat(e.state + "/workspace/" + k); err != nil {
		t.Errorf("office gone after rm: %v", err)
	}
}

func TestImageMode_MissingImage(t *testing.T) {
	e, _ := dockerEnv(t)
	_, errOut, code := e.run("", "exec", "--sandbox", "image:hutch-no-such-image:404", "--conversation", "web/x", "--", "true")
	if code != 125 || !strings.HasPrefix(errOut, "hutch: Image 'hutch-no-such-image:404' is not present in the container engine, and pulling it failed (") ||
		!strings.HasSuffix(errOut, "Build or load it locally first (docker build, docker load or docker import).\n") {
		t.Errorf("missing image: exit %d, %q", code, errOut)
	}
}

// TestImageMode_CuratedImageNotBuilt: a missing curated image's error
// names the command that builds it, not docker build.
func TestImageMode_CuratedImageNotBuilt(t *testing.T) {
	e, _ := dockerEnv(t)
	_, errOut, code := e.run("", "exec", "--sandbox", "image:hutch-sandbox:never-built-404", "--conversation", "web/x", "--", "true")
	want := "hutch: Image 'hutch-sandbox:never-built-404' is hutch's curated sandbox image and is not built yet: build it with `hutch image build --tag hutch-sandbox:never-built-404` (a few minutes, once).\n"
	if code != 125 || errOut != want {
		t.Errorf("missing curated image: exit %d, %q; want 125, %q", code, errOut, want)
	}
}

func TestEngineUnreachable(t *testing.T) {
	e := newEnv(t)
	e.extra = map[string]string{"HUTCH_AGENT_BINARY": "/nonexistent"}
	t.Setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
	_, errOut, code := e.run("", "exec", "--sandbox", "image:busybox", "--conversation", "web/x", "--", "true")
	want := "hutch: No container engine answers at unix:///nonexistent/docker.sock ("
	if code != 125 || !strings.HasPrefix(errOut, want) || !strings.Contains(errOut, "Start one: `sudo systemctl start docker`") {
		t.Errorf("unreachable engine: exit %d, %q", code, errOut)
	}
}
