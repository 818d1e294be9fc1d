package container_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	ctypes "github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"

	"github.com/hutchsandbox/hutch/internal/agentbin"
	"github.com/hutchsandbox/hutch/internal/engine"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/sandbox/container"
	"github.com/hutchsandbox/hutch/internal/testenv"
)

// testLabel marks every container these tests create; its value is the
// container's name, so that each test sweeps only its own.
const testLabel = "org.hutchsandbox.test"

// apiTimeout bounds one Engine API call (or a short sequence of them) made
// by a test directly, not through hutch.
const apiTimeout = 2 * time.Minute

// env is what a test needs to talk to the engine and build runtimes.
type env struct {
	cli *client.Client // the test's own client, for setting up and checking
	eng *engine.Engine // what hutch is given
	bin agentbin.Binary
}

func newEnv(t *testing.T) *env {
	t.Helper()
	cli := testenv.Docker(t)
	ctx, cancel := context.WithTimeout(context.Background(), apiTimeout)
	defer cancel()
	eng, err := engine.Connect(ctx)
	if err != nil {
		t.Fatalf("engine.Connect: %v", err)
	}
	t.Cleanup(func() { _ = eng.Close() })
	bin, err := agentbin.Locate(testenv.HutchBinary(t))
	if err != nil {
		t.Fatalf("agentbin.Locate: %v", err)
	}
	return &env{cli: cli, eng: eng, bin: bin}
}

// box is an operator's container: busybox with `sleep 2147483647` as pid 1
// and a host directory mounted at /workspace.
type box struct {
	name      string
	id        string
	workspace string // the host directory mounted at /workspace
}

// boxOptions tweak newBox.
type boxOptions struct {
	noStart     bool // leave it created, not running
	noWorkspace bool // mount nothing at /workspace
}

// newBox creates (via the Engine API) and starts a container named after
// the test, removed when the test ends.
func (e *env) newBox(t *testing.T, o boxOptions) *box {
	t.Helper()
	name := testenv.Name(t)
	testenv.CleanupContainers(t, e.cli, testLabel+"="+name)
	b := &box{name: name}
	var binds []string
	if !o.noWorkspace {
		b.workspace = t.TempDir()
		binds = []string{b.workspace + ":/workspace"}
	}
	b.id = e.create(t, name, binds)
	if !o.noStart {
		ctx, cancel := context.WithTimeout(context.Background(), apiTimeout)
		defer cancel()
		if _, err := e.cli.ContainerStart(ctx, b.id, client.ContainerStartOptions{}); err != nil {
			t.Fatalf("ContainerStart %s: %v", name, err)
		}
	}
	return b
}

// create creates the container name (not started) and returns its id.
func (e *env) create(t *testing.T, name string, binds []string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), apiTimeout)
	defer cancel()
	c, err := e.cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Name: name,
		Config: &ctypes.Config{
			Image:  testenv.BusyboxImage(t, e.cli),
			Cmd:    []string{"sleep", "2147483647"},
			Labels: map[string]string{testLabel: name},
		},
		HostConfig: &ctypes.HostConfig{NetworkMode: network.NetworkNone, Binds: binds},
	})
	if err != nil {
		t.Fatalf("ContainerCreate %s: %v", name, err)
	}
	return c.ID
}

// runtime returns a fresh container mode for b, as one hutch process
// would hold it. logw, when not nil, receives its log at debug level.
func (e *env) runtime(t *testing.T, b *box, logw io.Writer) *container.Runtime {
	t.Helper()
	cfg := container.Config{Engine: e.eng, Name: b.name, Agent: e.bin, Workspace: b.workspace}
	if logw != nil {
		cfg.Log = slog.New(slog.NewTextHandler(logw, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	rt, err := container.New(cfg)
	if err != nil {
		t.Fatalf("container.New: %v", err)
	}
	t.Cleanup(func() {
		// Close the agent session, if there is one, before the container goes.
		ctx, cancel := context.WithTimeout(context.Background(), apiTimeout)
		defer cancel()
		if _, err := rt.Validate(ctx); err != nil {
			return
		}
		if cl, err := rt.Agent(ctx); err == nil {
			_ = cl.Close()
		}
	})
	return rt
}

// office makes a fresh office in b's workspace and returns its spec.
func (b *box) office(t *testing.T, key string) sandbox.Spec {
	t.Helper()
	dir := filepath.Join(b.workspace, key)
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return sandbox.Spec{OfficeKey: key, OfficeDir: dir, OfficeRuntimePath: "/workspace/" + key}
}

// output is what one Exec through hutch printed and how it ended.
type output struct {
	res            sandbox.ExecResult
	err            error
	stdout, stderr string
}

func execRT(ctx context.Context, rt sandbox.Runtime, spec sandbox.Spec, req sandbox.ExecRequest) output {
	var out, errb bytes.Buffer
	req.Stdout, req.Stderr = &out, &errb
	res, err := rt.Exec(ctx, spec, req)
	return output{res: res, err: err, stdout: out.String(), stderr: errb.String()}
}

// mustExec runs req through hutch and fails the test unless it ran and
// exited 0.
func mustExec(t *testing.T, rt sandbox.Runtime, spec sandbox.Spec, req sandbox.ExecRequest) output {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), apiTimeout)
	defer cancel()
	o := execRT(ctx, rt, spec, req)
	if o.err != nil || o.res.ExitCode != 0 {
		t.Fatalf("Exec(%q): error %v, exit %d, stdout %q, stderr %q; want exit 0", req.Argv, o.err, o.res.ExitCode, o.stdout, o.stderr)
	}
	return o
}

// dockerExec runs argv in the container through the Engine API alone (not
// through hutch) and returns its stdout, stderr and exit code.
func (e *env) dockerExec(t *testing.T, id string, stdin string, argv ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), apiTimeout)
	defer cancel()
	ex, err := e.cli.ExecCreate(ctx, id, client.ExecCreateOptions{
		Cmd: argv, AttachStdin: stdin != "", AttachStdout: true, AttachStderr: true,
	})
	if err != nil {
		t.Fatalf("ExecCreate %q: %v", argv, err)
	}
	att, err := e.cli.ExecAttach(ctx, ex.ID, client.ExecAttachOptions{})
	if err != nil {
		t.Fatalf("ExecAttach %q: %v", argv, err)
	}
	defer att.Close()
	if stdin != "" {
		if _, err := io.WriteString(att.Conn, stdin); err != nil {
			t.Fatalf("exec %q: writing stdin: %v", argv, err)
		}
		_ = att.CloseWrite()
	}
	var out, errb bytes.Buffer
	if _, err := stdcopy.StdCopy(&out, &errb, att.Reader); err != nil {
		t.Fatalf("exec %q: reading output: %v", argv, err)
	}
	for {
		in, err := e.cli.ExecInspect(ctx, ex.ID, client.ExecInspectOptions{})
		if err != nil {
			t.Fatalf("ExecInspect %q: %v", argv, err)
		}
		if !in.Running {
			return out.String(), errb.String(), in.ExitCode
		}
		select {
		case <-ctx.Done():
			t.Fatalf("exec %q still running after its output ended", argv)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// rawGet returns the engine's raw answer to GET path (e.g. /exec/<id>/json).
func (e *env) rawGet(t *testing.T, path string) []byte {
	t.Helper()
	dial := e.cli.Dialer()
	hc := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) { return dial(ctx) },
	}}
	defer hc.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), apiTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://docker/v"+e.cli.ClientVersion()+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s, %v: %s", path, resp.Status, err, b)
	}
	return b
}

// inspect returns the container's state.
func (e *env) inspect(t *testing.T, name string) client.ContainerInspectResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), apiTimeout)
	defer cancel()
	res, err := e.cli.ContainerInspect(ctx, name, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatalf("ContainerInspect %s: %v", name, err)
	}
	return res
}

// agentFiles lists /.hutch inside the container (via the Engine API).
func (e *env) agentFiles(t *testing.T, id string) []string {
	t.Helper()
	out, errOut, code := e.dockerExec(t, id, "", "ls", "-A", "/.hutch")
	if code != 0 {
		t.Fatalf("ls /.hutch: exit %d, stderr %q", code, errOut)
	}
	return strings.Fields(out)
}

// syncBuffer is a bytes.Buffer safe for concurrent writers (a log).
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
