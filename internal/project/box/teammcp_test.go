package box_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/internal/project"
	"github.com/hutchsandbox/hutch/internal/project/box"
	"github.com/hutchsandbox/hutch/internal/project/teammcp"
	"github.com/hutchsandbox/hutch/internal/testenv"
)

// mcpServer is a running `hutch project mcp` of a fixture's project.
type mcpServer struct {
	// listen is the address it listens on; url the one the config names.
	listen, url string
	// rest is what it printed after that line (--print-config).
	rest, stderr *syncBuffer
}

// serveLine is the line hutch project mcp prints once it serves.
var serveLine = regexp.MustCompile(`^Serving MCP tools for the sandbox (\S+) on (\S+); agents inside find the client config at /sandbox/relay/hutch\.mcp\.json \((http://\S+/mcp)\)\.$`)

// startMCP runs `hutch project mcp` as the fixture's user and waits for
// the line saying it serves. When the test ends it is interrupted, and
// must exit 0 having removed the client config.
func (f *fixture) startMCP(t *testing.T, args ...string) *mcpServer {
	t.Helper()
	cmd := f.command(append([]string{"mcp"}, args...)...)
	s := &mcpServer{rest: &syncBuffer{}, stderr: &syncBuffer{}}
	cmd.Stderr = s.stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	done := make(chan error, 1)
	stop := func() {
		once.Do(func() {
			_ = cmd.Process.Signal(syscall.SIGINT)
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("hutch project mcp after SIGINT: %v\nstderr: %s", err, s.stderr.String())
				}
			case <-time.After(time.Minute):
				_ = cmd.Process.Kill()
				t.Errorf("hutch project mcp did not exit within a minute of SIGINT\nstderr: %s", s.stderr.String())
				t.Logf("killed: %v", <-done)
			}
		})
	}
	t.Cleanup(stop)

	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		done <- cmd.Wait()
	}()
	select {
	case line, ok := <-lines:
		if !ok {
			t.Fatalf("hutch project mcp ended before serving\nstderr: %s", s.stderr.String())
		}
		m := serveLine.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("hutch project mcp printed %q, want a line matching %s", line, serveLine)
		}
		if m[1] != f.name {
			t.Errorf("hutch project mcp serves the sandbox %s, want %s", m[1], f.name)
		}
		s.listen, s.url = m[2], m[3]
	case <-time.After(3 * time.Minute):
		t.Fatalf("hutch project mcp did not start serving within 3 minutes\nstderr: %s", s.stderr.String())
	}
	go func() {
		for line := range lines {
			_, _ = s.rest.Write([]byte(line + "\n"))
		}
	}()
	t.Cleanup(func() {
		stop()
		if _, err := os.Stat(filepath.Join(box.RelayDir(f.state, f.name), teammcp.ConfigName)); !os.IsNotExist(err) {
			t.Errorf("%s is left after hutch project mcp stopped: %v", teammcp.ConfigName, err)
		}
	})
	return s
}

// callResult is what a supervisor reads back from a tools/call.
type callResult struct {
	Result struct {
		Content []struct {
			Type, Text string
		} `json:"content"`
		StructuredContent json.RawMessage `json:"structuredContent"`
		IsError           bool            `json:"isError"`
	} `json:"result"`
	Error *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func (r callResult) text() string {
	var b strings.Builder
	for _, c := range r.Result.Content {
		b.WriteString(c.Text)
	}
	return b.String()
}

// toolCall is the JSON-RPC request of one tools/call.
func toolCall(t *testing.T, tool string, args map[string]any) string {
	t.Helper()
	data, err := json.Marshal(map[string]any{
		"jsonrpc": "2.0", "id": 1, "method": "tools/call",
		"params": map[string]any{"name": tool, "arguments": args},
	})
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// wgetSupervisor is a supervisor made of busybox's sh and wget: it reads
// the server's URL and Authorization header from the relay config, and
// POSTs its first argument there. With NOAUTH set it sends no
// Authorization header; with AUTH, that one.
const wgetSupervisor = `
cfg=/sandbox/relay/hutch.mcp.json
url=$(sed -n 's/.*"url": "\(.*\)".*/\1/p' "$cfg")
auth=$(sed -n 's/.*"Authorization": "\(.*\)".*/\1/p' "$cfg")
if [ -n "$AUTH" ]; then auth=$AUTH; fi
if [ -n "$NOAUTH" ]; then
  exec wget -qO- --header 'Content-Type: application/json' --header 'Accept: application/json, text/event-stream' --post-data "$1" "$url"
fi
exec wget -qO- --header "Authorization: $auth" --header 'Content-Type: application/json' --header 'Accept: application/json, text/event-stream' --post-data "$1" "$url"
`

// supervisor is a program that POSTs its argument to the server named in
// the relay config and prints the answer's body.
type supervisor []string

var (
	wget = supervisor{"sh", "-c", wgetSupervisor, "sh"}
	bash = supervisor{"bash", "-c", bashSupervisor, "bash"}
)

// supervise runs sup with arg inside the sandbox, through `hutch project
// exec` as an agent would run, with env set, and returns its stdout,
// stderr and exit code.
//
// A connect that timed out is tried again, once, with a log line: the
// subject is the server's answer, not the host's network, and under
// Podman in CI a connect to the gateway once timed out while the calls
// before and after it went through. Only a failed connect: then nothing
// reached the server, so the call cannot have run twice.
func (f *fixture) supervise(t *testing.T, sup supervisor, arg string, env ...string) (string, string, int) {
	t.Helper()
	argv := append([]string{"exec", "--", "env"}, env...)
	argv = append(argv, sup...)
	out, errOut, code := f.hutch(t, append(argv, arg)...)
	if code != 0 && connectTimedOut(errOut) {
		t.Logf("the supervisor's connection timed out (%s); trying once more", strings.TrimSpace(errOut))
		out, errOut, code = f.hutch(t, append(argv, arg)...)
	}
	return out, errOut, code
}

// connectTimedOut reports whether a supervisor's stderr says its connect
// to the server timed out: busybox wget's "can't connect to remote host
// (...): Connection timed out", bash's "connect: Connection timed out".
func connectTimedOut(stderr string) bool {
	return strings.Contains(stderr, "can't connect to remote host") && strings.Contains(stderr, "Connection timed out") ||
		strings.Contains(stderr, "connect: Connection timed out")
}

// call is one tools/call by the supervisor, which must get an answer.
func (f *fixture) call(t *testing.T, sup supervisor, tool string, args map[string]any) callResult {
	t.Helper()
	out, errOut, code := f.supervise(t, sup, toolCall(t, tool, args))
	if code != 0 {
		t.Fatalf("%s %v from inside: exit %d\nstdout: %s\nstderr: %s", tool, args, code, out, errOut)
	}
	var r callResult
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%s %v from inside: %v\n%s", tool, args, err, out)
	}
	if r.Error != nil {
		t.Fatalf("%s %v from inside: JSON-RPC error %d %s", tool, args, r.Error.Code, r.Error.Message)
	}
	return r
}

// TestTeamMCP_Busybox drives `hutch project mcp` from inside a busybox
// sandbox, as a supervisor made of sh and wget: the relay config is there,
// read-only, naming the gateway host and the project's token; a command
// runs in the container, in the project; requests without the token are
// refused; files outside the project cannot be read or written, through
// symlinks neither. Member worktrees need git, which busybox lacks: the
// call says so (TestTeamMCP_Worktree has them).
func TestTeamMCP_Busybox(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	srv := f.startMCP(t, "--print-config")

	// The server listens on the host's address on the container's
	// network, and the config names it by the gateway host name.
	res := f.inspect(t, f.name)
	var gateway string
	for _, ep := range res.Container.NetworkSettings.Networks {
		if ep != nil && ep.Gateway.IsValid() {
			gateway = ep.Gateway.String()
		}
	}
	host, port, err := net.SplitHostPort(srv.listen)
	if err != nil || host != gateway {
		t.Errorf("hutch project mcp listens on %s, want the gateway %s (%v)", srv.listen, gateway, err)
	}
	if want := "http://" + project.GatewayHost(string(f.eng.Flavor)) + ":" + port + "/mcp"; srv.url != want {
		t.Errorf("URL %s, want %s", srv.url, want)
	}

	// The token: made once, 0600, in the state dir; the config in the
	// relay dir, 0644, and read-only inside.
	tokenPath := filepath.Join(f.state, "projects", f.name, teammcp.TokenName)
	tok, err := os.ReadFile(tokenPath)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(tokenPath); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("token file: %v %v, want mode 0600", fi.Mode(), err)
	}
	hostCfg := filepath.Join(box.RelayDir(f.state, f.name), teammcp.ConfigName)
	if fi, err := os.Stat(hostCfg); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("config file on the host: %v, want mode 0644", err)
	}
	written, err := os.ReadFile(hostCfg)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "--print-config to print the config", func() bool { return srv.rest.String() == string(written) })
	out, _ := f.mustHutch(t, "exec", "--", "cat", "/sandbox/relay/hutch.mcp.json")
	var cfg struct {
		MCPServers map[string]struct {
			Type, URL string
			Headers   map[string]string
		} `json:"mcpServers"`
	}
	if err := json.Unmarshal([]byte(out), &cfg); err != nil {
		t.Fatalf("the config inside: %v\n%s", err, out)
	}
	h := cfg.MCPServers["hutch"]
	if h.Type != "http" || h.URL != srv.url || h.Headers["Authorization"] != "Bearer "+strings.TrimSpace(string(tok)) {
		t.Errorf("the config inside: %+v, want type http, URL %s and the token of %s", h, srv.url, tokenPath)
	}
	if _, errOut, code := f.hutch(t, "exec", "--", "sh", "-c", "echo x > /sandbox/relay/hutch.mcp.json"); code == 0 {
		t.Errorf("the config is writable inside (%s)", errOut)
	}

	// A command runs inside the container, in the project.
	ownHost, _ := f.mustHutch(t, "exec", "--", "hostname")
	r := f.call(t, wget, "bash", map[string]any{"command": "hostname; pwd"})
	if want := ownHost + f.project; r.Result.IsError || r.text() != want {
		t.Errorf("bash from inside: IsError=%v %q, want %q", r.Result.IsError, r.text(), want)
	}
	if hostName, _ := os.Hostname(); strings.TrimSpace(ownHost) == hostName {
		t.Errorf("the sandbox's hostname %q is the host's: the check proves nothing", hostName)
	}
	r = f.call(t, wget, "bash", map[string]any{"command": "exit 3"})
	if !r.Result.IsError || r.text() != "(no output)\n\nCommand exited with code 3" {
		t.Errorf("bash exit 3: IsError=%v %q", r.Result.IsError, r.text())
	}

	// No token, a wrong one: 401 before any tool runs.
	for _, env := range [][]string{{"NOAUTH=1"}, {"AUTH=Bearer " + strings.Repeat("0", 64)}, {"AUTH=" + strings.TrimSpace(string(tok))}} {
		out, errOut, code := f.supervise(t, wget, toolCall(t, "bash", map[string]any{"command": "touch " + f.project + "/pwned"}), env...)
		if code == 0 || !strings.Contains(errOut, "401") {
			t.Errorf("a call with %s: exit %d, stdout %q, stderr %q; want 401", env[0][:6], code, out, errOut)
		}
	}
	if _, err := os.Stat(filepath.Join(f.project, "pwned")); err == nil {
		t.Error("a call without the token ran")
	}

	// Files: in the project, yes; outside it, no.
	if err := os.Symlink("/etc/passwd", filepath.Join(f.project, "passwd")); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name, tool string
		args       map[string]any
		isError    bool
		text       string
	}{
		{"write", "write", map[string]any{"path": "notes/a.txt", "content": "alpha\nbeta\n"}, false, "Wrote 11 bytes to notes/a.txt"},
		{"edit", "edit", map[string]any{"path": "notes/a.txt", "oldText": "beta", "newText": "gamma"}, false, "+gamma"},
		{"read", "read", map[string]any{"path": f.project + "/notes/a.txt"}, false, "alpha\ngamma"},
		{"read_outside", "read", map[string]any{"path": "/etc/hostname"}, true, "Path /etc/hostname is outside the sandbox's workspace"},
		{"read_dotdot", "read", map[string]any{"path": "../x"}, true, "is outside the sandbox's workspace"},
		{"read_symlink_out", "read", map[string]any{"path": "passwd"}, true, "passwd is outside the sandbox's workspace"},
		{"write_outside", "write", map[string]any{"path": "/tmp/x", "content": "x"}, true, "Path /tmp/x is outside the sandbox's workspace"},
		{"write_symlink_out", "write", map[string]any{"path": "passwd", "content": "x"}, true, "passwd is outside the sandbox's workspace"},
		{"bad_member", "bash", map[string]any{"member": "../x", "command": "pwd"}, true, `Member name "../x" must be 1-64 letters`},
		{"member_without_git", "bash", map[string]any{"member": "bob", "command": "pwd"}, true, "git worktree add .worktrees/bob failed in the sandbox"},
		{"members_none", "members", map[string]any{}, false, "No members yet"},
	}
	for _, st := range steps {
		r := f.call(t, wget, st.tool, st.args)
		if r.Result.IsError != st.isError || !strings.Contains(r.text(), st.text) {
			t.Errorf("%s: IsError=%v %q; want IsError=%v and %q", st.name, r.Result.IsError, r.text(), st.isError, st.text)
		}
	}
	if data, err := os.ReadFile(filepath.Join(f.project, "notes", "a.txt")); err != nil || string(data) != "alpha\ngamma\n" {
		t.Errorf("notes/a.txt on the host: %q %v", data, err)
	}
	if data, err := os.ReadFile("/etc/passwd"); err != nil || string(data) == "x" {
		t.Errorf("/etc/passwd was written through the symlink: %v", err)
	}
}

// bashSupervisor is a supervisor with nothing but bash (Debian minbase has
// no wget or curl): it reads the server's URL and Authorization header from
// the relay config and POSTs its first argument with bash's /dev/tcp, as
// HTTP/1.0 so the answer is the body up to the end of the connection.
const bashSupervisor = `
export LC_ALL=C
cfg=/sandbox/relay/hutch.mcp.json
url=$(sed -n 's/.*"url": "\(.*\)".*/\1/p' "$cfg")
auth=$(sed -n 's/.*"Authorization": "\(.*\)".*/\1/p' "$cfg")
hostport=${url#http://}; hostport=${hostport%%/*}
exec 3<>"/dev/tcp/${hostport%:*}/${hostport##*:}"
printf 'POST /mcp HTTP/1.0\r\nHost: %s\r\nAuthorization: %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: %d\r\n\r\n%s' "$hostport" "$auth" "${#1}" "$1" >&3
response=$(cat <&3)
case $response in
"HTTP/1.1 200 "*|"HTTP/1.0 200 "*) ;;
*) printf '%s\n' "$response" >&2; exit 1 ;;
esac
printf '%s' "${response#*$'\r\n\r\n'}"
`

// TestTeamMCP_Worktree: a supervisor inside the sandbox starts a command
// in a member's worktree through hutch project mcp, and that command runs
// inside the same container (same hostname, same cgroup) in
// <project>/.worktrees/<member>, on the member's branch, which the host
// sees too.
//
// Slow the first time on a machine only: testenv.DebianGitImage builds
// its image.
func TestTeamMCP_Worktree(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatalf("git is not installed on the host: %v", err)
	}
	f := newFixture(t, nil)
	img := testenv.DebianGitImage(t, f.cli, f.debianBase)
	f.writeSettings(t, map[string]any{project.KeyEnabled: true, project.KeyImage: img, project.KeyUser: "host"})
	if err := os.RemoveAll(filepath.Join(f.project, ".git")); err != nil {
		t.Fatal(err)
	}
	f.hostGit(t, f.project, "init", "-q", "-b", "main")
	if err := os.WriteFile(filepath.Join(f.project, "README"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f.hostGit(t, f.project, "add", "README")
	f.hostGit(t, f.project, "commit", "-q", "-m", "initial")
	f.startMCP(t)

	probe := "hostname; pwd; cat /proc/self/cgroup"
	own, _ := f.mustHutch(t, "exec", "--", "sh", "-c", probe)
	ownLines := strings.SplitN(own, "\n", 3)
	if len(ownLines) < 3 || ownLines[1] != f.project {
		t.Fatalf("the supervisor's own probe: %q", own)
	}
	r := f.call(t, bash, "bash", map[string]any{"member": "bob", "command": probe})
	if r.Result.IsError {
		t.Fatalf("bash as bob: %s", r.text())
	}
	got := strings.SplitN(r.text(), "\n", 3)
	bob := filepath.Join(f.project, ".worktrees", "bob")
	if len(got) < 3 || got[0] != ownLines[0] || got[1] != bob || got[2] != strings.TrimSuffix(ownLines[2], "\n") {
		t.Errorf("bob's probe:\n%s\nwant hostname %s, cwd %s and the supervisor's cgroup:\n%s", r.text(), ownLines[0], bob, ownLines[2])
	}
	if hostName, _ := os.Hostname(); ownLines[0] == hostName {
		t.Errorf("the sandbox's hostname %q is the host's: the check proves nothing", hostName)
	}
	// Where the engine's cgroups name containers, they name this one.
	if id := f.inspect(t, f.name).Container.ID; strings.Contains(ownLines[2], "/docker/") && !strings.Contains(ownLines[2], "/docker/"+id) {
		t.Errorf("the supervisor's cgroup does not name the sandbox %s:\n%s", id, ownLines[2])
	}

	// Calls of one member take turns: two at once that would trip over
	// each other both succeed.
	var wg sync.WaitGroup
	results := make([][3]any, 2)
	for i := range results {
		wg.Go(func() {
			out, errOut, code := f.supervise(t, bash, toolCall(t, "bash", map[string]any{"member": "bob", "command": "mkdir /tmp/turn && sleep 0.5 && rmdir /tmp/turn"}))
			results[i] = [3]any{out, errOut, code}
		})
	}
	wg.Wait()
	for _, res := range results {
		var r callResult
		if err := json.Unmarshal([]byte(res[0].(string)), &r); err != nil || res[2].(int) != 0 || r.Result.IsError {
			t.Errorf("concurrent calls as bob overlapped or failed: exit %v, %v\nstdout: %s\nstderr: %s", res[2], err, res[0], res[1])
		}
	}

	// The worktree is git's, on branch bob, for the host as well.
	r = f.call(t, bash, "bash", map[string]any{"member": "bob", "command": "git status --short --branch; echo from bob > bob.txt"})
	if r.Result.IsError || r.text() != "## bob" {
		t.Errorf("git status as bob: IsError=%v %q", r.Result.IsError, r.text())
	}
	if out := f.hostGit(t, bob, "rev-parse", "--abbrev-ref", "HEAD"); out != "bob\n" {
		t.Errorf("bob's worktree on the host is on %q", out)
	}
	if data, err := os.ReadFile(filepath.Join(bob, "bob.txt")); err != nil || string(data) != "from bob\n" {
		t.Errorf("bob.txt on the host: %q %v", data, err)
	}
	// Relative paths start in the member's worktree.
	r = f.call(t, bash, "write", map[string]any{"member": "alice", "path": "a.txt", "content": "from alice\n"})
	if r.Result.IsError {
		t.Errorf("write as alice: %s", r.text())
	}
	if data, err := os.ReadFile(filepath.Join(f.project, ".worktrees", "alice", "a.txt")); err != nil || string(data) != "from alice\n" {
		t.Errorf("alice's a.txt on the host: %q %v", data, err)
	}
	r = f.call(t, bash, "read", map[string]any{"member": "bob", "path": "bob.txt"})
	if r.Result.IsError || r.text() != "from bob" {
		t.Errorf("read as bob: IsError=%v %q", r.Result.IsError, r.text())
	}

	r = f.call(t, bash, "members", map[string]any{})
	want := fmt.Sprintf("alice: %[1]s/.worktrees/alice (branch alice)\nbob: %[1]s/.worktrees/bob (branch bob)", f.project)
	if r.Result.IsError || r.text() != want {
		t.Errorf("members: IsError=%v\n%s\nwant\n%s", r.Result.IsError, r.text(), want)
	}
	var structured struct {
		Members []teammcp.Member `json:"members"`
	}
	if err := json.Unmarshal(r.Result.StructuredContent, &structured); err != nil || len(structured.Members) != 2 || structured.Members[1] != (teammcp.Member{Name: "bob", Path: filepath.Join(f.project, ".worktrees", "bob"), Branch: "bob"}) {
		t.Errorf("members' structured content: %s (%v)", r.Result.StructuredContent, err)
	}
}

// TestTeamMCP_Networks: under sandbox-network host the server listens on
// loopback and the config names 127.0.0.1, which the container shares;
// under none hutch refuses to serve, saying why.
func TestTeamMCP_Networks(t *testing.T) {
	t.Parallel()
	t.Run("host", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, map[string]any{project.KeyNetwork: project.NetworkHost})
		srv := f.startMCP(t)
		host, port, err := net.SplitHostPort(srv.listen)
		if err != nil || host != "127.0.0.1" || srv.url != "http://127.0.0.1:"+port+"/mcp" {
			t.Errorf("under host networking: listens on %s, URL %s (%v)", srv.listen, srv.url, err)
		}
		r := f.call(t, wget, "bash", map[string]any{"command": "pwd"})
		if r.Result.IsError || r.text() != f.project {
			t.Errorf("bash from inside: IsError=%v %q", r.Result.IsError, r.text())
		}
	})
	t.Run("none", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, map[string]any{project.KeyNetwork: project.NetworkNone})
		out, errOut, code := f.hutch(t, "mcp")
		// Box.GatewayIP says "has no network (sandbox-network is none)"
		// when the engine lists no network, and "has no gateway" when it
		// lists one without a gateway (Docker's "none" network).
		if code == 0 || !strings.Contains(errOut, "has no network (sandbox-network is none)") && !strings.Contains(errOut, "has no gateway to the host") {
			t.Errorf("hutch project mcp under sandbox-network none: exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
		}
		if _, err := os.Stat(filepath.Join(box.RelayDir(f.state, f.name), teammcp.ConfigName)); !os.IsNotExist(err) {
			t.Errorf("a config was written under sandbox-network none: %v", err)
		}
	})
}

// TestConnectTimedOut pins what counts as a connect that timed out (and
// is tried again): the two supervisors' own texts, not a server's answer
// or a command's output that merely mentions a timeout.
func TestConnectTimedOut(t *testing.T) {
	for _, tt := range []struct {
		stderr string
		want   bool
	}{
		{"wget: can't connect to remote host (10.88.0.1): Connection timed out\n", true},
		{"bash: connect: Connection timed out\nbash: line 6: /dev/tcp/10.88.0.1/41234: Connection timed out\n", true},
		{"wget: server returned error: HTTP/1.1 401 Unauthorized\n", false},
		{"wget: can't connect to remote host (10.88.0.1): Connection refused\n", false},
		{"HTTP/1.1 500 Internal Server Error\r\n\r\nupstream: Connection timed out\n", false},
	} {
		if got := connectTimedOut(tt.stderr); got != tt.want {
			t.Errorf("connectTimedOut(%q) = %v, want %v", tt.stderr, got, tt.want)
		}
	}
}
