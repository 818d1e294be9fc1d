package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hutchsandbox/hutch/client"
	"github.com/hutchsandbox/hutch/internal/daemon"
	"github.com/hutchsandbox/hutch/internal/sandbox"
)

// TestPackage_ImportsNothingInternal: a program outside the module can
// import the client, so it must not import hutch's internal packages.
func TestPackage_ImportsNothingInternal(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	for _, p := range strings.Fields(string(out)) {
		if strings.Contains(p, "/internal/") && strings.HasPrefix(p, "github.com/hutchsandbox/hutch") {
			t.Errorf("the client imports %s", p)
		}
	}
}

// TestSocketName_IsTheDaemons: Local finds the socket the daemon listens on.
func TestSocketName_IsTheDaemons(t *testing.T) {
	if client.SocketName != daemon.SocketName {
		t.Errorf("client.SocketName %q, daemon.SocketName %q", client.SocketName, daemon.SocketName)
	}
	if got, want := client.Local("/s").Socket, daemon.SocketPath("/s"); got != want {
		t.Errorf("Local(/s).Socket = %q, want %q", got, want)
	}
}

// TestFileInfo_SameJSONAsSandbox: client.FileInfo mirrors sandbox.FileInfo
// (the daemon converts one to the other), so their JSON must not differ,
// names that are not UTF-8 included.
func TestFileInfo_SameJSONAsSandbox(t *testing.T) {
	for _, fi := range []sandbox.FileInfo{
		{Name: "a.txt", Size: 3, Mode: 0o644, ModTime: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)},
		{Name: "d", Mode: fs.ModeDir | 0o755, IsDir: true},
		{Name: "bad\xff", Link: "to\xfe", Mode: fs.ModeSymlink | 0o777},
	} {
		want, err := json.Marshal(fi)
		if err != nil {
			t.Fatal(err)
		}
		got, err := json.Marshal(client.FileInfo(fi))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("client.FileInfo %s, sandbox.FileInfo %s", got, want)
		}
		var back client.FileInfo
		if err := json.Unmarshal(want, &back); err != nil || sandbox.FileInfo(back) != fi {
			t.Errorf("decoding %s: %+v, %v; want %+v", want, back, err, fi)
		}
	}
}

var errBroken = errors.New("broken pipe")

// brokenWriter fails every write and counts them.
type brokenWriter struct{ writes int }

func (w *brokenWriter) Write(p []byte) (int, error) {
	w.writes++
	return 0, errBroken
}

// frames is a server that answers every request with frames.
func frames(t *testing.T, fs ...client.Frame) *client.Client {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		enc := json.NewEncoder(w)
		for _, f := range fs {
			if err := enc.Encode(f); err != nil {
				t.Errorf("sending a frame: %v", err)
				return
			}
		}
	}))
	t.Cleanup(srv.Close)
	return &client.Client{BaseURL: srv.URL}
}

// TestExec_WriterFails: a writer that fails is given nothing more, the
// answer is read to its end (the other stream still written) and Exec
// returns the command's result with the writer's error.
func TestExec_WriterFails(t *testing.T) {
	c := frames(t,
		client.Frame{Stream: "stdout", Data: []byte("one\n")},
		client.Frame{Stream: "stdout", Data: []byte("two\n")},
		client.Frame{Stream: "stderr", Data: []byte("warn\n")},
		client.Frame{Result: &client.ExecResult{ExitCode: 3}},
	)
	stdout := &brokenWriter{}
	var stderr bytes.Buffer
	res, err := c.Exec(context.Background(), client.ExecRequest{Command: "x"}, nil, stdout, &stderr)
	if res.ExitCode != 3 {
		t.Errorf("exit code %d, want the command's 3", res.ExitCode)
	}
	if !errors.Is(err, errBroken) || err.Error() != "writing the command's standard output: broken pipe" {
		t.Errorf("error %v, want the stdout writer's", err)
	}
	if stdout.writes != 1 {
		t.Errorf("the failed writer was given %d writes, want 1", stdout.writes)
	}
	if stderr.String() != "warn\n" {
		t.Errorf("stderr %q, want %q", stderr.String(), "warn\n")
	}
}

// TestExec_AnswerCutShort: an answer that ends without a result is an
// error of ErrNoAnswer; an error frame is an *Error.
func TestExec_AnswerCutShort(t *testing.T) {
	c := frames(t, client.Frame{Stream: "stdout", Data: []byte("one\n")})
	if _, err := c.Exec(context.Background(), client.ExecRequest{Command: "x"}, nil, nil, nil); !errors.Is(err, client.ErrNoAnswer) {
		t.Errorf("Exec of an answer without a result: %v, want ErrNoAnswer", err)
	}
	c = frames(t, client.Frame{Error: &client.ErrorBody{Error: "The runtime went away", Code: client.CodeUnavailable}})
	_, err := c.Exec(context.Background(), client.ExecRequest{Command: "x"}, nil, nil, nil)
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Code != client.CodeUnavailable || ce.Message != "The runtime went away" || ce.StatusCode != 200 {
		t.Errorf("Exec of an error frame: %#v, want an *Error of code unavailable", err)
	}
}

// TestClient_UnixSocket drives every method through hutch's own daemon
// (daemon.Run in host mode) on the unix socket of its state dir, as
// client.Local reaches it.
func TestClient_UnixSocket(t *testing.T) {
	state, stop, err := unixDaemon(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := stop(); err != nil {
			t.Errorf("daemon.Run: %v", err)
		}
	}()
	ctx := context.Background()
	c := client.Local(state)
	conv := client.Conversation{Platform: "web", ConversationID: "client-1"}

	t.Run("health_and_version", func(t *testing.T) {
		h, err := c.Health(ctx)
		if err != nil || h.Status != "ok" || h.Mode != "host" || h.StateDir != state || h.Version != "test" {
			t.Errorf("Health = %+v, %v", h, err)
		}
		if _, ok := c.Answers(ctx, 5*time.Second); !ok {
			t.Error("Answers = false")
		}
		v, err := c.Version(ctx)
		if err != nil || v.Version != "test" || v.GoVersion == "" {
			t.Errorf("Version = %+v, %v", v, err)
		}
	})

	t.Run("door", func(t *testing.T) {
		p, err := c.Policy(ctx, conv)
		if err != nil || p.OfficeKey == "" || p.Refusal == "" {
			t.Errorf("Policy of a new conversation in host mode = %+v, %v; want isolated, refused", p, err)
		}
		p, err = c.SetDoor(ctx, conv, "shared")
		if err != nil || p.Policy != "trusted / shared-support / public" || p.Origin == "" || p.Refusal != "" || len(p.Mounts) == 0 {
			t.Errorf("SetDoor shared = %+v, %v", p, err)
		}
		if err := c.SetGlobalDoor(ctx, "default"); err != nil {
			t.Errorf("SetGlobalDoor: %v", err)
		}
		other := client.Conversation{Platform: "slack", ConversationID: "C1", ChannelKind: "public_channel"}
		p, err = c.SetChannelKind(ctx, other)
		if err != nil || p.Policy != "trusted / shared-support / public" {
			t.Errorf("SetChannelKind public_channel = %+v, %v", p, err)
		}
	})

	t.Run("exec", func(t *testing.T) {
		var out, errOut bytes.Buffer
		res, err := c.Exec(ctx, client.ExecRequest{Conversation: conv, Command: "cat; echo err >&2; exit 4"}, strings.NewReader("in\n"), &out, &errOut)
		if err != nil || res.ExitCode != 4 || out.String() != "in\n" || errOut.String() != "err\n" || res.StdoutBytes != 3 {
			t.Errorf("Exec = %+v, %v; stdout %q, stderr %q", res, err, out.String(), errOut.String())
		}
		res, err = c.Exec(ctx, client.ExecRequest{Conversation: conv, Argv: []string{"sleep", "30"}, TimeoutSeconds: 0.2}, nil, nil, nil)
		if err != nil || !res.TimedOut || res.Message == "" {
			t.Errorf("Exec past its timeout = %+v, %v; want timedOut", res, err)
		}
		if _, err := c.Exec(ctx, client.ExecRequest{Conversation: conv, Command: "cat", Stdin: "x"}, strings.NewReader("y"), nil, nil); err == nil {
			t.Error("Exec with two stdins: no error")
		}
		if _, err := c.Exec(ctx, client.ExecRequest{Conversation: conv, Command: "cat"}, strings.NewReader("\xff"), nil, nil); err == nil {
			t.Error("Exec with a stdin not UTF-8: no error")
		}
	})

	t.Run("exec_cancelled", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		started := &signalWriter{ch: make(chan struct{})}
		go func() {
			<-started.ch
			cancel()
		}()
		begin := time.Now()
		_, err := c.Exec(cctx, client.ExecRequest{Conversation: conv, Command: "echo go; sleep 30"}, nil, started, nil)
		if !errors.Is(err, context.Canceled) || time.Since(begin) > 20*time.Second {
			t.Errorf("Exec cancelled: %v after %v, want context.Canceled at once", err, time.Since(begin))
		}
	})

	t.Run("files", func(t *testing.T) {
		data := []byte("bytes\x00\xff as they are\n")
		wa, err := c.WriteFile(ctx, conv, "dir/f.bin", bytes.NewReader(data), 0o600)
		if err != nil || wa.Bytes != int64(len(data)) || !strings.HasSuffix(wa.Path, "/dir/f.bin") {
			t.Fatalf("WriteFile = %+v, %v", wa, err)
		}
		fi, err := c.StatFile(ctx, conv, "dir/f.bin")
		if err != nil || fi.Name != "f.bin" || fi.Size != int64(len(data)) || fi.Mode.Perm() != 0o600 || fi.IsDir {
			t.Errorf("StatFile = %+v, %v", fi, err)
		}
		list, err := c.ListFiles(ctx, conv, "dir")
		if err != nil || len(list) != 1 || list[0].Name != "f.bin" {
			t.Errorf("ListFiles = %+v, %v", list, err)
		}
		var got bytes.Buffer
		if err := c.ReadFile(ctx, conv, wa.Path, &got); err != nil || !bytes.Equal(got.Bytes(), data) {
			t.Errorf("ReadFile = %q, %v; want %q", got.Bytes(), err, data)
		}
		if _, err := c.WriteFile(ctx, conv, "dir/g", iotest.ErrReader(errBroken), 0); err == nil {
			t.Error("WriteFile from a failing reader: no error")
		}
		offices, err := c.Offices(ctx)
		if err != nil || len(offices) == 0 {
			t.Errorf("Offices = %+v, %v", offices, err)
		}
		var raw bytes.Buffer
		n, err := c.GetTo(ctx, "/v1/offices", &raw)
		var again []client.OfficeEntry
		if err != nil || n != int64(raw.Len()) || json.Unmarshal(raw.Bytes(), &again) != nil || !cmp.Equal(again, offices) {
			t.Errorf("GetTo /v1/offices = %d bytes %q, %v; want the offices' JSON", n, raw.String(), err)
		}
	})

	t.Run("vault", func(t *testing.T) {
		v := client.VaultRequest{Conversation: &conv}
		list, err := c.VaultSet(ctx, v, map[string]string{"API_KEY": "s3cret", "OTHER": "x"})
		want := []client.VaultEntry{{Name: "API_KEY", Kind: "env"}, {Name: "OTHER", Kind: "env"}}
		if err != nil || !cmp.Equal(list, want) {
			t.Errorf("VaultSet = %+v, %v; want %+v", list, err, want)
		}
		list, err = c.VaultRemove(ctx, v, "OTHER")
		if err != nil || !cmp.Equal(list, want[:1]) {
			t.Errorf("VaultRemove = %+v, %v", list, err)
		}
		list, err = c.VaultList(ctx, v)
		if err != nil || !cmp.Equal(list, want[:1]) {
			t.Errorf("VaultList = %+v, %v", list, err)
		}
	})

	t.Run("sandbox", func(t *testing.T) {
		// Host mode manages no runtime: every call says so, as an
		// *Error of code not_supported.
		calls := map[string]func() error{
			"status": func() error { _, err := c.SandboxStatus(ctx, conv); return err },
			"boost":  func() error { _, err := c.SandboxBoost(ctx, client.LimitsRequest{Conversation: conv}); return err },
			"limits": func() error {
				_, err := c.SandboxLimits(ctx, client.LimitsRequest{Conversation: conv, CPUs: "1"})
				return err
			},
			"stop":     func() error { _, err := c.SandboxStop(ctx, conv); return err },
			"remove":   func() error { _, err := c.SandboxRemove(ctx, conv); return err },
			"runtimes": func() error { _, err := c.Runtimes(ctx); return err },
		}
		for name, call := range calls {
			var ce *client.Error
			if err := call(); !errors.As(err, &ce) || ce.Code != client.CodeNotSupported || ce.StatusCode != 501 || !strings.Contains(ce.Message, "Sandbox 'host'") {
				t.Errorf("%s in host mode: %v, want not_supported", name, err)
			}
		}
	})

	t.Run("chat", func(t *testing.T) {
		text, err := c.Chat(ctx, conv, "/sandbox help")
		if err != nil || !strings.Contains(text, "/sandbox") {
			t.Errorf("Chat = %q, %v", text, err)
		}
	})

	t.Run("admin_link", func(t *testing.T) {
		if _, err := c.AdminLink(ctx, client.AdminLinkRequest{Who: "me"}); !client.IsCode(err, client.CodeNotSupported) {
			t.Errorf("AdminLink with no portal: %v, want not_supported", err)
		}
	})
}

// signalWriter closes ch at its first write.
type signalWriter struct {
	ch   chan struct{}
	done bool
}

func (w *signalWriter) Write(p []byte) (int, error) {
	if !w.done {
		w.done = true
		close(w.ch)
	}
	return len(p), nil
}

// TestClient_Errors: what the daemon refuses is an *Error with its code
// and status; a daemon that is not there is ErrNoAnswer.
func TestClient_Errors(t *testing.T) {
	c, stop, err := tcpDaemon("the-token")
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	ctx := context.Background()
	conv := client.Conversation{Platform: "web", ConversationID: "errors"}
	if _, err := c.SetDoor(ctx, conv, "shared"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		call   func() error
		code   string
		status int
		text   string
	}{
		{"unauthorized", func() error {
			_, err := client.Remote(c.BaseURL, "wrong").Health(ctx)
			return err
		}, client.CodeUnauthorized, 401, "Missing or wrong bearer token"},
		{"no_token", func() error {
			_, err := (&client.Client{BaseURL: c.BaseURL}).Health(ctx)
			return err
		}, client.CodeUnauthorized, 401, "Missing or wrong bearer token"},
		{"file_not_found", func() error {
			_, err := c.StatFile(ctx, conv, "missing.txt")
			return err
		}, client.CodeNotFound, 404, "File not found"},
		{"read_not_found", func() error {
			return c.ReadFile(ctx, conv, "missing.txt", &bytes.Buffer{})
		}, client.CodeNotFound, 404, "File not found"},
		{"route_not_found", func() error {
			return c.Get(ctx, "/v1/nothing", nil)
		}, client.CodeNotFound, 404, "No such endpoint"},
		{"no_command", func() error {
			_, err := c.Exec(ctx, client.ExecRequest{Conversation: conv}, nil, nil, nil)
			return err
		}, client.CodeInvalid, 400, "No command given"},
		{"no_conversation", func() error {
			_, err := c.Policy(ctx, client.Conversation{})
			return err
		}, client.CodeInvalid, 400, "The request names no conversation"},
		{"bad_door", func() error {
			_, err := c.SetDoor(ctx, conv, "wide-open")
			return err
		}, client.CodeInvalid, 400, "wide-open"},
		{"bad_vault_name", func() error {
			_, err := c.VaultSet(ctx, client.VaultRequest{Conversation: &conv}, map[string]string{"1BAD": "x"})
			return err
		}, client.CodeInvalid, 400, "1BAD"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			var ce *client.Error
			if !errors.As(err, &ce) {
				t.Fatalf("error %v (%T), want an *Error", err, err)
			}
			if ce.Code != tc.code || ce.StatusCode != tc.status || !strings.Contains(ce.Message, tc.text) || ce.Error() != ce.Message {
				t.Errorf("error %+v, want code %s, status %d, text with %q", ce, tc.code, tc.status, tc.text)
			}
			if !client.IsCode(err, tc.code) {
				t.Errorf("IsCode(%v, %s) = false", err, tc.code)
			}
		})
	}

	t.Run("no_daemon", func(t *testing.T) {
		_, err := client.Local(filepath.Join(t.TempDir(), "none")).Health(ctx)
		var ce *client.Error
		if !errors.Is(err, client.ErrNoAnswer) || errors.As(err, &ce) || !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("Health of no daemon: %v, want ErrNoAnswer wrapping the dial's error", err)
		}
	})

	t.Run("cancelled", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := c.Health(cctx); !errors.Is(err, context.Canceled) {
			t.Errorf("Health with a cancelled context: %v", err)
		}
	})
}

// TestError_NotTheAPIsShape: an error answer that is not the API's (a
// proxy's page) is still an *Error, its code from its status.
func TestError_NotTheAPIsShape(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "<html>bad gateway</html>", http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	_, err := (&client.Client{BaseURL: srv.URL}).Health(context.Background())
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Code != client.CodeUnavailable || ce.StatusCode != 503 || ce.Message != "hutch daemon answered 503 Service Unavailable" {
		t.Errorf("error %#v, want an *Error of code unavailable", err)
	}
}

// TestDefaultStateDir: $HUTCH_STATE_DIR, else ~/.hutch, as hutch itself.
func TestDefaultStateDir(t *testing.T) {
	t.Setenv("HUTCH_STATE_DIR", "/srv/hutch")
	if got := client.DefaultStateDir(); got != "/srv/hutch" {
		t.Errorf("DefaultStateDir with HUTCH_STATE_DIR = %q", got)
	}
	t.Setenv("HUTCH_STATE_DIR", "")
	home, _ := os.UserHomeDir()
	if got := client.DefaultStateDir(); got != filepath.Join(home, ".hutch") {
		t.Errorf("DefaultStateDir = %q, want ~/.hutch", got)
	}
}
