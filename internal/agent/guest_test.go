package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/sandbox"
)

// fakeGuest records what the guest endpoints ask of it.
type fakeGuest struct {
	err error // Setup's answer

	mu       sync.Mutex
	setups   []GuestSetup
	poweroff chan struct{} // closed by PowerOff
	offs     int
}

func newFakeGuest() *fakeGuest { return &fakeGuest{poweroff: make(chan struct{})} }

func (g *fakeGuest) Setup(_ context.Context, s GuestSetup) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.setups = append(g.setups, s)
	return g.err
}

func (g *fakeGuest) PowerOff() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.offs++
	if g.offs == 1 {
		close(g.poweroff)
	}
}

func (g *fakeGuest) recorded() []GuestSetup {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]GuestSetup(nil), g.setups...)
}

func TestGuestSetup_RoundTrip(t *testing.T) {
	g := newFakeGuest()
	f := newFixture(t, &Server{Guest: g})
	setup := GuestSetup{
		Mounts: []GuestMount{
			{Tag: "workspace", Target: "/workspace/v1-slack-x-0123456789abcdef"},
			{Tag: "shared", Target: "/workspace/shared", ReadOnly: true},
		},
		Files: []GuestFile{
			{Path: "/run/hutch/vault/token", Mode: 0o600, Data: []byte("s3cr=t\x00\xff"), ReadOnly: true},
			{Path: "/etc/hutch/motd", Data: []byte("hello\n")},
		},
		Pids:        512,
		MemoryBytes: 768 << 20,
		TimeZone:    "Europe/Berlin",
	}
	if err := f.client.GuestSetup(context.Background(), setup); err != nil {
		t.Fatalf("GuestSetup: %v", err)
	}
	if diff := cmp.Diff([]GuestSetup{setup}, g.recorded()); diff != "" {
		t.Errorf("setups mismatch (-want +got):\n%s", diff)
	}

	t.Run("guest_error_keeps_class_and_text", func(t *testing.T) {
		g.err = errdefs.New(errdefs.ErrFailedPrecondition, "Guest has no virtiofs share \"nope\" to mount on /x")
		defer func() { g.err = nil }()
		err := f.client.GuestSetup(context.Background(), GuestSetup{Mounts: []GuestMount{{Tag: "nope", Target: "/x"}}})
		if !errdefs.IsFailedPrecondition(err) || err.Error() != g.err.Error() {
			t.Errorf("GuestSetup error got %v, want %v", err, g.err)
		}
	})
}

func TestGuestSetup_Validate(t *testing.T) {
	tests := []struct {
		name  string
		setup GuestSetup
		want  string // "" is valid
	}{
		{"empty", GuestSetup{}, ""},
		{"relative_target", GuestSetup{Mounts: []GuestMount{{Tag: "w", Target: "workspace"}}}, `Guest mount target must be absolute: "workspace"`},
		{"dotdot_target", GuestSetup{Mounts: []GuestMount{{Tag: "w", Target: "/workspace/../etc"}}}, `Guest mount target must be clean (no .., . or //): "/workspace/../etc"`},
		{"root_target", GuestSetup{Mounts: []GuestMount{{Tag: "w", Target: "/"}}}, "Guest mount target must not be /"},
		{"double_slash", GuestSetup{Mounts: []GuestMount{{Tag: "w", Target: "/a//b"}}}, `Guest mount target must be clean (no .., . or //): "/a//b"`},
		{"empty_tag", GuestSetup{Mounts: []GuestMount{{Target: "/w"}}}, `Guest mount tag "" is not valid (1 to 36 bytes, no slash, comma or space)`},
		{"comma_tag", GuestSetup{Mounts: []GuestMount{{Tag: "a,b", Target: "/w"}}}, `Guest mount tag "a,b" is not valid (1 to 36 bytes, no slash, comma or space)`},
		{"target_twice", GuestSetup{Mounts: []GuestMount{{Tag: "a", Target: "/w"}, {Tag: "b", Target: "/w"}}}, "Guest mount target /w is named twice"},
		{"relative_file", GuestSetup{Files: []GuestFile{{Path: "etc/x"}}}, `Guest file path must be absolute: "etc/x"`},
		{"dotdot_file", GuestSetup{Files: []GuestFile{{Path: "/root/../../etc/shadow"}}}, `Guest file path must be clean (no .., . or //): "/root/../../etc/shadow"`},
		{"nul_file", GuestSetup{Files: []GuestFile{{Path: "/etc/x\x00y"}}}, `Guest file path contains a NUL byte: "/etc/x\x00y"`},
		{"file_twice", GuestSetup{Files: []GuestFile{{Path: "/a"}, {Path: "/a"}}}, "Guest file /a is named twice"},
		{"setuid_mode", GuestSetup{Files: []GuestFile{{Path: "/a", Mode: 0o4755}}}, "Guest file /a: mode 04755 has more than permission bits"},
		{"negative_pids", GuestSetup{Pids: -1}, "Guest pids limit must not be negative: -1"},
		{"negative_memory", GuestSetup{MemoryBytes: -1}, "Guest memory limit must not be negative: -1"},
		{"zone_path", GuestSetup{TimeZone: "/etc/localtime"}, `Time zone "/etc/localtime" is not a zone name like Europe/Berlin`},
		{"zone_dotdot", GuestSetup{TimeZone: "Europe/../../x"}, `Time zone "Europe/../../x" is not a zone name like Europe/Berlin`},
		{"zone_ok", GuestSetup{TimeZone: "America/Port-au-Prince"}, ""},
		{"network_ok", GuestSetup{Network: &GuestNetwork{Address: "10.0.2.15/24", Proxy: "http://10.0.2.100:3128"}}, ""},
		{"network_without_proxy", GuestSetup{Network: &GuestNetwork{Address: "10.0.2.15/24"}}, ""},
		{"network_no_prefix", GuestSetup{Network: &GuestNetwork{Address: "10.0.2.15"}}, `Guest network address "10.0.2.15" is not an IPv4 address with a prefix like 10.0.2.15/24`},
		{"network_ipv6", GuestSetup{Network: &GuestNetwork{Address: "fd00::2/64"}}, `Guest network address "fd00::2/64" is not an IPv4 address with a prefix like 10.0.2.15/24`},
		{"proxy_https", GuestSetup{Network: &GuestNetwork{Address: "10.0.2.15/24", Proxy: "https://10.0.2.100:3128"}}, `Guest proxy "https://10.0.2.100:3128" is not a URL like http://10.0.2.100:3128 (http, a port, no credentials, no path)`},
		{"proxy_credentials", GuestSetup{Network: &GuestNetwork{Address: "10.0.2.15/24", Proxy: "http://u:p@10.0.2.100:3128"}}, `Guest proxy "http://u:p@10.0.2.100:3128" is not a URL like http://10.0.2.100:3128 (http, a port, no credentials, no path)`},
		{"proxy_no_port", GuestSetup{Network: &GuestNetwork{Address: "10.0.2.15/24", Proxy: "http://proxy"}}, `Guest proxy "http://proxy" is not a URL like http://10.0.2.100:3128 (http, a port, no credentials, no path)`},
		{"zone_gmt_offset", GuestSetup{TimeZone: "Etc/GMT+5"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.setup.Validate()
			if tt.want == "" {
				if err != nil {
					t.Errorf("Validate: %v, want nil", err)
				}
				return
			}
			if !errdefs.IsInvalid(err) || err.Error() != tt.want {
				t.Errorf("Validate got %v, want invalid %q", err, tt.want)
			}
		})
	}
}

// rawPost sends body to target as is, past the client's own checks.
func rawPost(t *testing.T, c *Client, target string, body []byte) error {
	t.Helper()
	resp, _, err := c.roundTrip(context.Background(), http.MethodPost, target, func() *lazyBody { return newLazyBody(body, nil) })
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode/100 != 2 {
		return responseError(resp)
	}
	return nil
}

func TestGuestSetup_ServerRefuses(t *testing.T) {
	g := newFakeGuest()
	f := newFixture(t, &Server{Guest: g})
	tests := []struct {
		name string
		body []byte
		want string
	}{
		{"not_json", []byte("{"), "Guest setup request is not valid JSON: unexpected EOF"},
		{"bad_path", []byte(`{"files":[{"path":"../x","data":""}]}`), `Guest file path must be absolute: "../x"`},
		{"too_large", []byte(`{"files":[{"path":"/x","data":"` + strings.Repeat("A", maxGuestSetupBody) + `"}]}`), "Guest setup request is larger than 64 MiB"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := rawPost(t, f.client, pathGuestSetup, tt.body)
			if !errdefs.IsInvalid(err) || err.Error() != tt.want {
				t.Errorf("setup error got %v, want invalid %q", err, tt.want)
			}
		})
	}
	if got := g.recorded(); len(got) != 0 {
		t.Errorf("the guest was asked %d setups, want none", len(got))
	}
}

func TestGuest_NotServedWithoutGuest(t *testing.T) {
	f := newFixture(t, nil)
	want := "This agent is not a microVM guest: it serves no /v1/guest endpoints"
	if err := f.client.GuestSetup(context.Background(), GuestSetup{}); !errdefs.IsNotFound(err) || err.Error() != want {
		t.Errorf("GuestSetup error got %v, want not found %q", err, want)
	}
	if err := f.client.GuestPowerOff(context.Background()); !errdefs.IsNotFound(err) || err.Error() != want {
		t.Errorf("GuestPowerOff error got %v, want not found %q", err, want)
	}
}

func TestGuestPowerOff_KillsCommandsThenPowersOff(t *testing.T) {
	g := newFakeGuest()
	f := newFixture(t, &Server{Guest: g})
	pidfile := filepath.Join(t.TempDir(), "pid")
	done := make(chan sandbox.ExecResult, 1)
	go func() {
		res, err := f.client.Exec(context.Background(), sandbox.ExecRequest{Argv: []string{backgroundCommand(pidfile)}})
		if err != nil {
			t.Errorf("Exec: %v", err)
		}
		done <- res
	}()
	pid := readPid(t, pidfile)
	if err := f.client.GuestPowerOff(context.Background()); err != nil {
		t.Fatalf("GuestPowerOff: %v", err)
	}
	waitDead(t, pid)
	if res := <-done; res.Signal != "SIGKILL" {
		t.Errorf("the running command ended with %+v, want SIGKILL", res)
	}
	select {
	case <-g.poweroff:
	case <-time.After(waitFor):
		t.Fatal("PowerOff was not called")
	}
	// A second request (the host retrying) answers again but powers off
	// only once.
	if err := f.client.GuestPowerOff(context.Background()); err != nil {
		t.Errorf("second GuestPowerOff: %v", err)
	}
	time.Sleep(2 * powerOffDelay)
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.offs != 1 {
		t.Errorf("PowerOff called %d times, want 1", g.offs)
	}
}

// TestGuestPowerOff_ConnectionDrops: a guest that goes before its answer
// leaves is a poweroff done; one that cannot be reached is an error.
func TestGuestPowerOff_ConnectionDrops(t *testing.T) {
	path := socketPath(t)
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			// Read the preface and the request's first frames, then go.
			buf := make([]byte, 4096)
			_, _ = c.Read(buf)
			_ = c.Close()
		}
	}()
	if err := unixClient(t, path).GuestPowerOff(context.Background()); err != nil {
		t.Errorf("GuestPowerOff over a dropped connection: %v, want nil", err)
	}
	_ = l.Close()
	if err := unixClient(t, path).GuestPowerOff(context.Background()); !errdefs.IsUnavailable(err) {
		t.Errorf("GuestPowerOff with nobody there: %v, want unavailable", err)
	}
}

func TestExec_GuestTimeZone(t *testing.T) {
	g := newFakeGuest()
	f := newFixture(t, &Server{Guest: g})
	printTZ := func(env map[string]string) string {
		var out bytes.Buffer
		mustExec(t, f.client, sandbox.ExecRequest{Argv: []string{`printf '%s' "$TZ"`}, Env: env, Stdout: &out})
		return out.String()
	}
	if got, want := printTZ(nil), os.Getenv("TZ"); got != want {
		t.Errorf("before setup TZ got %q, want the agent's %q", got, want)
	}
	if err := f.client.GuestSetup(context.Background(), GuestSetup{TimeZone: "Europe/Berlin"}); err != nil {
		t.Fatal(err)
	}
	if got, want := printTZ(nil), "Europe/Berlin"; got != want {
		t.Errorf("after setup TZ got %q, want %q", got, want)
	}
	if got, want := printTZ(map[string]string{"TZ": "UTC"}), "UTC"; got != want {
		t.Errorf("request TZ got %q, want %q (the request wins)", got, want)
	}
	if err := f.client.GuestSetup(context.Background(), GuestSetup{Pids: 10}); err != nil {
		t.Fatal(err)
	}
	if got, want := printTZ(nil), "Europe/Berlin"; got != want {
		t.Errorf("after a setup without a zone TZ got %q, want %q (kept)", got, want)
	}
}

func TestExec_GuestProxy(t *testing.T) {
	g := newFakeGuest()
	f := newFixture(t, &Server{Guest: g})
	const show = `printf '%s|%s|%s|%s|%s|%s' "$HTTP_PROXY" "$HTTPS_PROXY" "$http_proxy" "$https_proxy" "$NO_PROXY" "$no_proxy"`
	if err := f.client.GuestSetup(context.Background(), GuestSetup{Network: &GuestNetwork{Address: "10.0.2.15/24", Proxy: "http://10.0.2.100:3128"}}); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	mustExec(t, f.client, sandbox.ExecRequest{Argv: []string{show}, Stdout: &out})
	p, no := "http://10.0.2.100:3128", "localhost,127.0.0.1,::1"
	if got, want := out.String(), strings.Join([]string{p, p, p, p, no, no}, "|"); got != want {
		t.Errorf("proxy env got %q, want %q", got, want)
	}
	out.Reset()
	mustExec(t, f.client, sandbox.ExecRequest{Argv: []string{`printf '%s' "$https_proxy"`}, Env: map[string]string{"https_proxy": ""}, Stdout: &out})
	if out.String() != "" {
		t.Errorf("a request's own https_proxy got %q, want it to win", out.String())
	}
}

func TestExec_CommandCgroupUnusable(t *testing.T) {
	plain := t.TempDir()
	missing := filepath.Join(plain, "missing")
	tests := []struct {
		name, dir, want string
	}{
		{"plain_directory", plain, "Commands' cgroup is not a cgroup v2 directory: " + plain},
		{"missing", missing, fmt.Sprintf("Commands' cgroup %s cannot be opened: no such file or directory", missing)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, &Server{CommandCgroup: tt.dir})
			_, err := f.client.Exec(context.Background(), sandbox.ExecRequest{Argv: []string{"true"}})
			if !errdefs.IsFailedPrecondition(err) || err.Error() != tt.want {
				t.Errorf("Exec error got %v, want failed precondition %q", err, tt.want)
			}
		})
	}
}

// TestExec_CommandCgroup starts a command in a real cgroup v2 directory
// when this process may make one (root, a writable cgroup2 mount); the
// microVM integration test covers it everywhere else.
func TestExec_CommandCgroup(t *testing.T) {
	own, mount := ownCgroup2(t)
	dir, err := os.MkdirTemp(filepath.Join(mount, own), "hutch-agent-test-")
	if err != nil {
		t.Skipf("cannot create a cgroup here: %v", err)
	}
	t.Cleanup(func() {
		// The command has been reaped; the cgroup is empty again.
		if err := os.Remove(dir); err != nil {
			t.Errorf("remove the test cgroup: %v", err)
		}
	})
	f := newFixture(t, &Server{CommandCgroup: dir})
	var out bytes.Buffer
	mustExec(t, f.client, sandbox.ExecRequest{Argv: []string{"cat /proc/self/cgroup"}, Stdout: &out})
	want := "0::" + filepath.Join(own, filepath.Base(dir))
	if !slicesContainsLine(out.String(), want) {
		t.Errorf("the command's cgroups are\n%s\nwant the line %q", out.String(), want)
	}
}

// ownCgroup2 returns this process's cgroup v2 path and where cgroup2 is
// mounted, or skips.
func ownCgroup2(t *testing.T) (own, mount string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to create a cgroup")
	}
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Skip(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			own = p
		}
	}
	for _, m := range []string{"/sys/fs/cgroup", "/sys/fs/cgroup/unified"} {
		var st unix.Statfs_t
		if unix.Statfs(m, &st) == nil && st.Type == unix.CGROUP2_SUPER_MAGIC {
			mount = m
			break
		}
	}
	if own == "" || mount == "" {
		t.Skip("no cgroup2 hierarchy here")
	}
	return own, mount
}

func slicesContainsLine(s, line string) bool {
	for _, l := range strings.Split(s, "\n") {
		if l == line {
			return true
		}
	}
	return false
}

func TestServeConns_OneAfterTheOther(t *testing.T) {
	srv := &Server{Log: testLogger(t)}
	conns := make(chan net.Conn)
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() {
		served <- srv.ServeConns(ctx, func(ctx context.Context) (net.Conn, error) {
			select {
			case c := <-conns:
				return c, nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		})
	}()
	session := func() *Client {
		sc, cc := net.Pipe()
		conns <- sc
		var once sync.Once
		return NewClient(func(context.Context) (net.Conn, error) {
			err := errors.New("the pipe was already used")
			var conn net.Conn
			once.Do(func() { conn, err = cc, nil })
			return conn, err
		}, testLogger(t))
	}

	first := session()
	pidfile := filepath.Join(t.TempDir(), "pid")
	go func() {
		_, _ = first.Exec(context.Background(), sandbox.ExecRequest{Argv: []string{backgroundCommand(pidfile)}})
	}()
	pid := readPid(t, pidfile)
	_ = first.Close() // the host goes: its command dies with its session
	waitDead(t, pid)

	second := session()
	defer func() { _ = second.Close() }()
	var out bytes.Buffer
	mustExec(t, second, sandbox.ExecRequest{Argv: []string{"echo again"}, Stdout: &out})
	if out.String() != "again\n" {
		t.Errorf("second session output %q", out.String())
	}
	cancel()
	if err := <-served; err != nil {
		t.Errorf("ServeConns: %v", err)
	}
}

func TestServeConns_NextFails(t *testing.T) {
	srv := &Server{Log: testLogger(t)}
	want := errors.New("port gone")
	err := srv.ServeConns(context.Background(), func(context.Context) (net.Conn, error) { return nil, want })
	if !errors.Is(err, want) {
		t.Errorf("ServeConns got %v, want %v", err, want)
	}
}

func TestStdioConn_OneFileBothWays(t *testing.T) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(fds[0]), "port")
	peer := os.NewFile(uintptr(fds[1]), "host")
	defer func() { _ = peer.Close() }()
	c := NewStdioConn(f, f)
	if _, err := c.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4)
	if _, err := peer.Read(buf); err != nil || string(buf) != "ping" {
		t.Fatalf("peer read %q, %v", buf, err)
	}
	if _, err := peer.Write([]byte("pong")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Read(buf); err != nil || string(buf) != "pong" {
		t.Fatalf("conn read %q, %v", buf, err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("Close of a one-file conn: %v, want nil (closed once)", err)
	}
}
