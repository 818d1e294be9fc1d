package cloudflare_test

import (
	"bufio"
	"bytes"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/projection"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/sandbox/cloudflare"
	"github.com/hutchsandbox/hutch/internal/service"
	"github.com/hutchsandbox/hutch/internal/testenv"
)

// bridgeProcess is a `hutch bridge serve --sandbox host` process on loopback.
type bridgeProcess struct {
	cmd *exec.Cmd
	url string
}

var servingLine = regexp.MustCompile(`serving \S+ on (https?://\S+)`)

// startBridge starts hutch bridge serve on listen over the layout and
// waits until it serves.
func startBridge(t *testing.T, layout service.Layout, listen, token string) *bridgeProcess {
	t.Helper()
	cmd := exec.Command(testenv.HutchBinary(t),
		"--state-dir", layout.StateDir, "--workspace", layout.Workspace,
		"bridge", "serve", "--listen", listen, "--sandbox", "host")
	cmd.Env = append(os.Environ(), "HUTCH_BRIDGE_TOKEN="+token)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if m := servingLine.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case urls <- m[1]:
				default:
				}
			}
		}
	}()
	select {
	case u := <-urls:
		return &bridgeProcess{cmd: cmd, url: u}
	case <-time.After(time.Minute):
		t.Fatalf("hutch bridge serve did not start serving within a minute; stderr:\n%s", stderr.String())
	}
	return nil
}

// TestBridgeProcess runs commands through a real `hutch bridge serve`:
// two conversations get two remote runtimes; the bridge killed while a
// command runs ends that command with the clear error long before its
// timeout; the bridge started again serves the next command; a wrong
// token is refused.
func TestBridgeProcess(t *testing.T) {
	t.Parallel()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	layout, err := service.ResolveLayout(service.LayoutOptions{
		StateDir: filepath.Join(root, "state"), Workspace: filepath.Join(root, "workspace"),
		Getenv: func(string) string { return "" },
	})
	if err != nil {
		t.Fatal(err)
	}
	// The bridge runs in host mode, which needs a trusted door policy.
	if err := service.New(layout, nil).SetGlobalDoor(t.Context(), &projection.Setting{DoorPolicy: string(projection.DoorTrusted), Layout: string(projection.LayoutFull)}); err != nil {
		t.Fatal(err)
	}
	const token = "process-test-token"
	first := startBridge(t, layout, "127.0.0.1:0", token)
	rt, err := cloudflare.New(cloudflare.Config{SandboxID: "proc", URL: first.url, Token: token})
	if err != nil {
		t.Fatal(err)
	}
	h, err := rt.Health(t.Context())
	if err != nil || h.Bridge != "hutch" || !h.Has("stream") || !h.Has("cancel") || !h.Has("execId") {
		t.Fatalf("Health of hutch bridge serve: %+v, %v; want hutch with stream, cancel and execId", h, err)
	}

	t.Run("two_conversations_two_runtimes", func(t *testing.T) {
		specs := []sandbox.Spec{{OfficeKey: "v1-slack-a-0000000000000001"}, {OfficeKey: "v1-slack-b-0000000000000002"}}
		for _, s := range specs {
			res, stdout, _, err := execSpec(t, rt, s, sandbox.ExecRequest{Argv: []string{"pwd; echo mine > owner"}})
			if want := bridgeOffice(layout, "proc", s.OfficeKey) + "\n"; err != nil || res.ExitCode != 0 || stdout != want {
				t.Errorf("pwd for office %s: %+v, %q, %v; want %q", s.OfficeKey, res, stdout, err, want)
			}
		}
		if a, b := bridgeOffice(layout, "proc", specs[0].OfficeKey), bridgeOffice(layout, "proc", specs[1].OfficeKey); a == b {
			t.Errorf("two conversations share the bridge office %s", a)
		}
	})

	t.Run("wrong_token", func(t *testing.T) {
		wrong, err := cloudflare.New(cloudflare.Config{SandboxID: "proc", URL: first.url, Token: "not-the-token"})
		if err != nil {
			t.Fatal(err)
		}
		_, err = wrong.Health(t.Context())
		if want := "The bridge at " + first.url + " refused the token"; !errdefs.IsUnavailable(err) || !strings.HasPrefix(fmtErr(err), want) || strings.Contains(fmtErr(err), token) {
			t.Errorf("Health with a wrong token: %v; want ErrUnavailable starting %q", err, want)
		}
	})

	t.Run("killed_mid_command_then_restarted", func(t *testing.T) {
		s := sandbox.Spec{OfficeKey: "v1-slack-kill-0000000000000003"}
		const timeout = 2 * time.Minute
		stdout := newSignalWriter("\n")
		type outcome struct {
			res sandbox.ExecResult
			err error
		}
		done := make(chan outcome, 1)
		go func() {
			res, err := rt.Exec(t.Context(), s, sandbox.ExecRequest{Argv: []string{"echo $$; exec sleep 30"}, Timeout: timeout, Stdout: stdout})
			done <- outcome{res, err}
		}()
		select {
		case <-stdout.got:
		case <-time.After(time.Minute):
			t.Fatal("the command did not start")
		}
		// The command outlives the bridge (its end is unknown to us):
		// kill it when the test ends.
		if pid, err := strconv.Atoi(strings.TrimSpace(stdout.String())); err == nil {
			t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
		}
		if err := first.cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		var o outcome
		select {
		case o = <-done:
		case <-time.After(25 * time.Second):
			// sleep 30 would end on its own later; the timeout later still.
			t.Fatal("Exec did not return within 25 s of the bridge being killed")
		}
		want := "The bridge at " + first.url + " went away while the command ran; its end is unknown (it may still run there)"
		if !errdefs.IsUnavailable(o.err) || fmtErr(o.err) != want {
			t.Errorf("Exec when the bridge was killed: %+v, %v; want %q of class ErrUnavailable", o.res, o.err, want)
		}

		u, err := url.Parse(first.url)
		if err != nil {
			t.Fatal(err)
		}
		_ = first.cmd.Wait()
		startBridge(t, layout, u.Host, token)
		res, out, _, err := execSpec(t, rt, s, sandbox.ExecRequest{Argv: []string{"echo back"}})
		if err != nil || res.ExitCode != 0 || out != "back\n" {
			t.Errorf("the next command, once the bridge is back: %+v, %q, %v; want exit 0 and %q", res, out, err, "back\n")
		}
	})
}

// execSpec runs req for spec, capturing both streams.
func execSpec(t *testing.T, rt sandbox.Runtime, s sandbox.Spec, req sandbox.ExecRequest) (sandbox.ExecResult, string, string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	req.Stdout, req.Stderr = &out, &errb
	res, err := rt.Exec(t.Context(), s, req)
	return res, out.String(), errb.String(), err
}
