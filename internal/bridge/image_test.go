package bridge_test

import (
	"os"
	"path"
	"strings"
	"testing"

	"github.com/hutchsandbox/hutch/internal/agent"
	"github.com/hutchsandbox/hutch/internal/bridge/protocol"
	"github.com/hutchsandbox/hutch/internal/engine"
	"github.com/hutchsandbox/hutch/internal/office"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/testenv"
)

// TestImageMode: the default kind of bridge, image mode, on the real
// engine: each sandbox id gets a runtime and office of its own, env
// reaches the command and no log, and streaming, argv and stdin work
// through the agent.
func TestImageMode(t *testing.T) {
	cli := testenv.Docker(t)
	img := testenv.BusyboxImage(t, cli)
	run, err := os.MkdirTemp("", "hb-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = agent.RemoveSocketDir(run) }) // sealed socket dirs included
	logs := &logBuffer{}
	svc := newService(t, logs, func(k string) string {
		if k == "HUTCH_RUN_DIR" {
			return run
		}
		return ""
	})
	testenv.CleanupContainers(t, cli, engine.LabelStateDir+"="+svc.Layout().StateDir)
	svc.SetAgentBinary(testenv.HutchBinary(t))
	f := newFixture(t, sandbox.Mode{Kind: sandbox.KindImage, Target: img}, svc)
	f.logs = logs

	const secret = "s3cret-in-image-4b1d"
	ids := []string{"img-a-" + testenv.Name(t), "img-b-" + testenv.Name(t)}
	seen := map[string]bool{}
	for _, id := range ids {
		res := f.exec(protocol.ExecRequest{SandboxID: id, Command: `pwd; hostname; printf '%s\n' "$HUTCH_T"`, Cwd: "/workspace", Env: map[string]string{"HUTCH_T": secret}})
		lines := strings.Split(strings.TrimSuffix(res.Stdout, "\n"), "\n")
		addr, err := office.NewAddress("web", id)
		if err != nil {
			t.Fatal(err)
		}
		if res.Code != 0 || len(lines) != 3 || lines[0] != path.Join("/workspace", string(addr.Key())) || lines[2] != secret {
			t.Fatalf("exec in %s: %+v; want pwd /workspace/%s, a hostname and the env value", id, res, addr.Key())
		}
		if seen[lines[1]] {
			t.Errorf("sandbox %s runs on host %s, as another sandbox id does", id, lines[1])
		}
		seen[lines[1]] = true
		if _, err := os.Stat(f.officeDir(id)); err != nil {
			t.Errorf("office of %s on the host: %v", id, err)
		}
	}
	if strings.Contains(f.logs.String(), secret) {
		t.Errorf("the log holds the env value:\n%s", f.logs.String())
	}

	arg := "\xff\xfe-not-utf8"
	s := f.openStream(protocol.ExecRequest{SandboxID: ids[0], ArgvBase64: []string{b64("sh"), b64("-c"), b64(`printf %s "$1"; cat >&2`), b64("sh"), b64(arg)}, Stdin: b64("from stdin")})
	out, errb, exit := s.rest()
	if string(out) != arg || string(errb) != "from stdin" || exit.Code != 0 {
		t.Errorf("streamed argvBase64 with stdin: %q, %q, %+v", out, errb, exit)
	}
	res := f.exec(protocol.ExecRequest{SandboxID: ids[1], Command: "sleep 30", TimeoutSeconds: 1})
	if res.Code != -1 || res.Error != "Command timed out after 1 second" {
		t.Errorf("timeout in image mode: %+v", res)
	}

	// A memory hog: the exit line says the runtime's limit killed it.
	if err := svc.SetRuntimeSetting("sandbox.memory", "64m"); err != nil {
		t.Fatal(err)
	}
	oom := f.openStream(protocol.ExecRequest{SandboxID: ids[1], Command: "dd if=/dev/zero of=/dev/null bs=200M count=1"})
	if _, _, exit := oom.rest(); !exit.OOMKilled {
		t.Errorf("memory hog under a 64m limit: exit %+v, want oomKilled", exit)
	}
}
