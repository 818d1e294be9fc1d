package cli

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/hutchsandbox/hutch/internal/office"
)

var update = flag.Bool("update", false, "rewrite golden files")

// env is a hermetic environment for one CLI test: its own state dir.
type env struct {
	t     *testing.T
	state string
	extra map[string]string // more variables the CLI sees
}

func newEnv(t *testing.T) *env {
	t.Helper()
	return &env{t: t, state: filepath.Join(t.TempDir(), "state")}
}

func (e *env) getenv(k string) string {
	if k == "HUTCH_STATE_DIR" {
		return e.state
	}
	return e.extra[k]
}

// run runs hutch in-process and returns stdout, stderr and the exit code.
func (e *env) run(stdin string, args ...string) (string, string, int) {
	e.t.Helper()
	var out, errb bytes.Buffer
	code := run(args, strings.NewReader(stdin), &out, &errb, e.getenv)
	return out.String(), errb.String(), code
}

// ok runs hutch and fails the test unless it exits 0.
func (e *env) ok(args ...string) string {
	e.t.Helper()
	out, errOut, code := e.run("", args...)
	if code != 0 {
		e.t.Fatalf("hutch %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, out, errOut)
	}
	return out
}

func key(t *testing.T, platform, id string) string {
	t.Helper()
	a, err := office.NewAddress(platform, id)
	if err != nil {
		t.Fatal(err)
	}
	return string(a.Key())
}

func TestHelp_Golden(t *testing.T) {
	commands := [][]string{
		{}, {"office"}, {"office", "key"}, {"office", "list"}, {"office", "show"}, {"office", "channel-kind"}, {"office", "claim"}, {"office", "platforms"}, {"migrate"},
		{"project"}, {"project", "up"}, {"project", "shell"}, {"project", "exec"}, {"project", "status"}, {"project", "stop"}, {"project", "rebuild"}, {"project", "down"}, {"project", "settings"}, {"project", "settings", "set"}, {"project", "settings", "unset"}, {"project", "config"}, {"project", "trust"}, {"project", "worktree"}, {"project", "enable"}, {"project", "disable"}, {"project", "mcp"}, {"bridge"}, {"bridge", "serve"},
		{"door"}, {"door", "set"}, {"sandbox"}, {"sandbox", "ls"}, {"sandbox", "status"}, {"sandbox", "stop"}, {"sandbox", "rm"},
		{"sandbox", "boost"}, {"sandbox", "limits"}, {"sandbox", "network"}, {"sandbox", "settings"}, {"sandbox", "reconcile"}, {"vault"}, {"vault", "set"}, {"vault", "put-file"}, {"vault", "ls"}, {"vault", "rm"},
		{"exec"}, {"files"}, {"files", "get"}, {"files", "put"}, {"files", "ls"}, {"modes"}, {"serve"}, {"mcp"}, {"doctor"}, {"image"}, {"image", "build"}, {"microvm"}, {"microvm", "image"}, {"microvm", "image", "build"}, {"kube"}, {"kube", "agent-image"}, {"admin"}, {"admin", "link"}, {"version"}, {"completion"},
	}
	for _, c := range commands {
		name := "hutch"
		if len(c) > 0 {
			name += "_" + strings.Join(c, "_")
		}
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			out := e.ok(append(c, "--help")...)
			golden(t, filepath.Join("testdata", "help", name+".golden"), out)
		})
	}
}

func golden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./internal/cli -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s differs (-want +got):\n%s", path, diff)
	}
}

func TestOfficeKey(t *testing.T) {
	e := newEnv(t)
	out := e.ok("office", "key", "slack", "C0123ABC")
	if got, want := out, key(t, "slack", "C0123ABC")+"\n"; got != want {
		t.Errorf("office key got %q, want %q", got, want)
	}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"bad_platform", []string{"office", "key", "irc", "x"}, `hutch: Unsupported platform: "irc" (use slack, discord, telegram, github or web)` + "\n"},
		{"path_marker", []string{"office", "key", "slack", ".."}, "hutch: Conversation id must be non-empty and not a path marker\n"},
		{"separator", []string{"office", "key", "slack", "a/b"}, "hutch: Conversation id must not contain path separators or control characters\n"},
		{"control", []string{"office", "key", "slack", "a\u0085b"}, "hutch: Conversation id must not contain path separators or control characters\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, errOut, code := e.run("", tt.args...)
			if code != 1 || errOut != tt.want {
				t.Errorf("exit %d, stderr %q; want 1, %q", code, errOut, tt.want)
			}
		})
	}
	if _, err := os.Stat(e.state); !os.IsNotExist(err) {
		t.Errorf("office key created state (stat: %v); it must only compute", err)
	}
}

func TestDoorPolicy_Derivation(t *testing.T) {
	tests := []struct {
		name string
		kind string // "" = none recorded
		want string
	}{
		{"public", "public_channel", "Door policy:   trusted / shared-support / public (from channel kind public_channel)"},
		{"private", "private_channel", "Door policy:   trusted / shared-support / private (from channel kind private_channel)"},
		{"im", "im", "Door policy:   isolated / conversation / public (from channel kind im)"},
		{"external", "external", "Door policy:   isolated / conversation / public (from channel kind external)"},
		{"none", "", "Door policy:   isolated / conversation / public (from no channel kind recorded)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			if tt.kind != "" {
				e.ok("office", "channel-kind", "slack/C1", tt.kind)
			}
			out := e.ok("office", "show", "slack/C1", "--sandbox", "image:debian:12")
			if !strings.Contains(out, tt.want+"\n") {
				t.Errorf("office show lacks %q:\n%s", tt.want, out)
			}
		})
	}
}

func TestDoorPolicy_SettingsOverride(t *testing.T) {
	e := newEnv(t)
	e.ok("office", "channel-kind", "slack/C1", "public_channel")
	e.ok("door", "set", "--global", "full")
	out := e.ok("office", "show", "slack/C1")
	if !strings.Contains(out, "Door policy:   trusted / full / public (from global setting)\n") {
		t.Errorf("global setting not applied:\n%s", out)
	}
	e.ok("door", "set", "slack/C1", "shared-private")
	out = e.ok("office", "show", "slack/C1")
	if !strings.Contains(out, "trusted / shared-support / private (from conversation setting over global setting)") {
		t.Errorf("conversation setting not applied over global:\n%s", out)
	}
	e.ok("door", "set", "slack/C1", "default")
	e.ok("door", "set", "--global", "default")
	out = e.ok("office", "show", "slack/C1")
	if !strings.Contains(out, "trusted / shared-support / public (from channel kind public_channel)") {
		t.Errorf("clearing settings did not fall back to the channel kind:\n%s", out)
	}
	_, errOut, code := e.run("", "door", "set", "slack/C1", "open")
	if code != 1 || errOut != "hutch: Unknown door policy \"open\"; use default, isolated, shared, shared-private or full\n" {
		t.Errorf("bad door word: exit %d, stderr %q", code, errOut)
	}
}

func TestDoorPolicy_MalformedSettingsFailClosed(t *testing.T) {
	e := newEnv(t)
	e.ok("door", "set", "--global", "shared")
	path := filepath.Join(e.state, "settings.json")
	if err := os.WriteFile(path, []byte(`{"sandbox": {"workspace": {"doorPolicy": 7}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, errOut, code := e.run("", "exec", "--conversation", "slack/C1", "--", "echo must-not-run")
	if code != 125 || !strings.Contains(errOut, path) || strings.Contains(errOut, "must-not-run") {
		t.Errorf("malformed settings: exit %d, stderr %q; want 125 and an error naming %s", code, errOut, path)
	}
}

func TestOfficeShow_Projection(t *testing.T) {
	e := newEnv(t)
	k := key(t, "slack", "C1")
	ws := filepath.Join(e.state, "workspace")
	e.ok("door", "set", "slack/C1", "shared-private")
	out := e.ok("office", "show", "slack/C1", "--sandbox", "image:debian:12")
	for _, want := range []string{
		"Office key:    " + k + "\n",
		"Office dir:    " + filepath.Join(ws, k) + " (not created yet)\n",
		"State dir:     " + filepath.Join(e.state, "conversations", k) + "\n",
		"Sandbox:       image:debian:12 (mainline)\n",
		"Projection:    managed: hutch mounts exactly these paths\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("office show lacks %q:\n%s", want, out)
		}
	}
	wantRows := [][3]string{
		{filepath.Join(ws, k), "/workspace/" + k, "rw"},
		{filepath.Join(ws, "MEMORY.md"), "/workspace/MEMORY.md", "ro"},
		{filepath.Join(ws, "skills"), "/workspace/skills", "rw"},
		{filepath.Join(ws, "events"), "/workspace/events", "rw"},
	}
	for _, r := range wantRows {
		if !containsRow(out, r[:]...) {
			t.Errorf("office show lacks mount row %v:\n%s", r, out)
		}
	}
	out = e.ok("office", "show", "slack/C1", "--sandbox", "host")
	if !strings.Contains(out, "Refused:       Sandbox 'host' cannot enforce read-only shared workspace memory") {
		t.Errorf("host should be refused for shared-private:\n%s", out)
	}
}

// containsRow reports whether some line holds the fields in order,
// separated by white space only.
func containsRow(out string, fields ...string) bool {
	for _, line := range strings.Split(out, "\n") {
		if slicesEqual(strings.Fields(line), fields) {
			return true
		}
	}
	return false
}

func slicesEqual(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestOfficeList(t *testing.T) {
	e := newEnv(t)
	if out := e.ok("office", "list"); !strings.HasPrefix(out, "No offices registered in ") {
		t.Errorf("empty list got %q", out)
	}
	e.ok("door", "set", "telegram/-100200", "shared")
	e.ok("exec", "--conversation", "telegram/-100200", "--", "true")
	e.ok("office", "channel-kind", "slack/C9", "im")
	out := e.ok("office", "list")
	if !strings.HasPrefix(out, "Offices (2):\n") {
		t.Errorf("office list header:\n%s", out)
	}
	for _, row := range [][]string{{"slack", "C9", key(t, "slack", "C9")}, {"telegram", "-100200", key(t, "telegram", "-100200")}} {
		found := false
		for _, line := range strings.Split(out, "\n") {
			f := strings.Fields(line)
			if len(f) >= 3 && slicesEqual(f[:3], row) {
				found = true
			}
		}
		if !found {
			t.Errorf("office list lacks %v:\n%s", row, out)
		}
	}
}

func TestVault_ValuesNeverPrinted(t *testing.T) {
	const secret = "s3cr3t-value-DO-NOT-PRINT"
	e := newEnv(t)
	var all strings.Builder
	record := func(out, errOut string, _ int) {
		all.WriteString(out)
		all.WriteString(errOut)
	}
	record(e.run("", "vault", "set", "slack/C1", "API_TOKEN="+secret, "OTHER=x"))
	record(e.run(secret+"\n", "vault", "set", "slack/C1", "FROM_STDIN"))
	record(e.run("", "vault", "ls", "slack/C1"))
	record(e.run("", "vault", "set", "slack/C1", "1BAD="+secret))
	record(e.run("", "office", "show", "slack/C1", "--sandbox", "image:x"))
	record(e.run("", "vault", "rm", "slack/C1", "OTHER"))
	record(e.run("", "vault", "rm", "slack/C1", "OTHER"))
	if strings.Contains(all.String(), secret) {
		t.Fatalf("a vault value was printed:\n%s", all.String())
	}
	out := e.ok("vault", "ls", "slack/C1")
	k := key(t, "slack", "C1")
	if want := "Vault " + k + ":\n  env   API_TOKEN\n  env   FROM_STDIN\n"; out != want {
		t.Errorf("vault ls got %q, want %q", out, want)
	}
	data, err := os.ReadFile(filepath.Join(e.state, "vaults", k, "env"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "API_TOKEN=" + secret + "\nFROM_STDIN=" + secret + "\n"; string(data) != want {
		t.Errorf("env file got %q, want %q", data, want)
	}
	_, errOut, code := e.run("", "vault", "rm", "slack/C1", "OTHER")
	if code != 1 || errOut != "hutch: No vault entry named \"OTHER\"\n" {
		t.Errorf("vault rm of a missing entry: exit %d, stderr %q", code, errOut)
	}
}

func TestVault_FilesRefusedWhereModeCannotMount(t *testing.T) {
	e := newEnv(t)
	src := filepath.Join(t.TempDir(), "config")
	if err := os.WriteFile(src, []byte("token"), 0o600); err != nil {
		t.Fatal(err)
	}
	e.ok("vault", "put-file", "--user", "U042", ".netrc", src)
	e.ok("door", "set", "slack/C1", "shared")
	_, errOut, code := e.run("", "exec", "--conversation", "slack/C1", "--user", "U042", "--", "echo must-not-run")
	if code != 125 || errOut != "hutch: Sandbox type \"host\" does not support vault file mounts; keep credentials in vault env, or use image:* to project files\n" {
		t.Errorf("host exec with vault files: exit %d, stderr %q", code, errOut)
	}
	// Without the user's vault the same command runs.
	if out := e.ok("exec", "--conversation", "slack/C1", "--", "echo ran"); out != "ran\n" {
		t.Errorf("exec got %q", out)
	}
	e.ok("vault", "put-file", "--container", "box", ".netrc", src)
	out := e.ok("office", "show", "slack/C1", "--sandbox", "container:box")
	if !strings.Contains(out, "Refused:       Sandbox type \"container\" does not support vault file mounts") {
		t.Errorf("container mode with vault files should be refused:\n%s", out)
	}
	out = e.ok("vault", "ls", "--container", "box")
	if !strings.Contains(out, "  file  .netrc -> /root/.netrc\n") {
		t.Errorf("vault ls --container got:\n%s", out)
	}
}

func TestExec_HostRefusals(t *testing.T) {
	tests := []struct {
		name, door, kind, want string
	}{
		{"derived_isolated", "", "", "hutch: Sandbox 'host' cannot provide an isolated conversation office; use image:*, or explicitly choose trusted workspace policy\n"},
		{"derived_private", "", "private_channel", "hutch: Sandbox 'host' cannot enforce read-only shared workspace memory; use image:*, or explicitly choose isolated or trusted read-write workspace policy\n"},
		{"explicit_isolated", "isolated", "public_channel", "hutch: Sandbox 'host' cannot provide an isolated conversation office; use image:*, or explicitly choose trusted workspace policy\n"},
		{"explicit_shared_private", "shared-private", "", "hutch: Sandbox 'host' cannot enforce read-only shared workspace memory; use image:*, or explicitly choose isolated or trusted read-write workspace policy\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			if tt.kind != "" {
				e.ok("office", "channel-kind", "slack/C1", tt.kind)
			}
			if tt.door != "" {
				e.ok("door", "set", "slack/C1", tt.door)
			}
			out, errOut, code := e.run("", "exec", "--conversation", "slack/C1", "--", "echo must-not-run")
			if code != 125 || errOut != tt.want || out != "" {
				t.Errorf("exit %d, stdout %q, stderr %q; want 125, \"\", %q", code, out, errOut, tt.want)
			}
			if _, err := os.Stat(filepath.Join(e.state, "workspace", key(t, "slack", "C1"))); !os.IsNotExist(err) {
				t.Errorf("a refused exec created the office (stat: %v)", err)
			}
		})
	}
	e := newEnv(t)
	e.ok("office", "channel-kind", "slack/C1", "public_channel")
	if out := e.ok("exec", "--conversation", "slack/C1", "--", "echo derived-public-runs"); out != "derived-public-runs\n" {
		t.Errorf("derived trusted/public should run on host, got %q", out)
	}
}

func TestExec_Contract(t *testing.T) {
	e := newEnv(t)
	e.ok("door", "set", "web/w1", "shared")
	k := key(t, "web", "w1")
	officeDir := filepath.Join(e.state, "workspace", k)

	out, errOut, code := e.run("in-data", "exec", "--conversation", "web/w1", "--", `pwd; cat; echo to-err >&2; exit 7`)
	if code != 7 || out != officeDir+"\nin-data" || errOut != "to-err\n" {
		t.Errorf("got exit %d, stdout %q, stderr %q; want 7, %q, %q", code, out, errOut, officeDir+"\nin-data", "to-err\n")
	}
	fi, err := os.Stat(officeDir)
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("office dir: %v, mode %v; want 0700", err, fi)
	}
	// Several arguments run without a shell.
	if out := e.ok("exec", "--conversation", "web/w1", "--", "printf", "%s|", "a b", "$HOME"); out != "a b|$HOME|" {
		t.Errorf("argv exec got %q", out)
	}
	if err := os.Mkdir(filepath.Join(officeDir, "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	if out := e.ok("exec", "--conversation", "web/w1", "--cwd", "sub", "--", "pwd"); out != filepath.Join(officeDir, "sub")+"\n" {
		t.Errorf("--cwd got %q", out)
	}
	_, errOut, code = e.run("", "exec", "--conversation", "web/w1", "--timeout", "1", "--", "echo started; sleep 30")
	if code != 124 || errOut != "hutch: Command timed out after 1 second\n" {
		t.Errorf("timeout: exit %d, stderr %q; want 124", code, errOut)
	}
	out, errOut, code = e.run("", "exec", "--conversation", "web/w1", "--max-output", "4", "--", "echo 0123456789")
	if code != 0 || out != "0123" || errOut != "[output truncated: stdout 11 B, only the first 4 B kept]\n" {
		t.Errorf("max-output: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	for _, bad := range []struct {
		args []string
		want string
	}{
		{[]string{"exec", "--", "true"}, "hutch: --conversation <platform>/<conversation-id> is required\n"},
		{[]string{"exec", "--conversation", "web/w1"}, "hutch: No command given; put it after --, e.g. hutch exec --conversation slack/C0123ABC -- ls -la\n"},
		{[]string{"exec", "--conversation", "web/w1", "--timeout", "soon", "--", "true"}, "hutch: --timeout \"soon\" is not a duration; use 30s, 5m, 1h30m or plain seconds\n"},
		{[]string{"exec", "--conversation", "web/w1", "--sandbox", "docker:alpine", "--", "true"}, "hutch: 'docker:alpine' is not supported. Use 'container:<container-name>' for an existing container or 'image:<image-name>' for hutch-managed per-conversation containers.\n"},
		{[]string{"exec", "--conversation", "web/w1", "--sandbox", "cloudflare:box", "--", "true"}, "hutch: Sandbox 'cloudflare:box' needs the URL of its bridge: set HUTCH_BRIDGE_URL (or CLOUDFLARE_SANDBOX_URL), and HUTCH_BRIDGE_TOKEN (or CLOUDFLARE_SANDBOX_TOKEN) when the bridge requires a token\n"},
		{[]string{"exec", "--conversation", "w1", "--", "true"}, "hutch: Conversation must be written <platform>/<conversation-id>, e.g. slack/C0123ABC\n"},
	} {
		_, errOut, code := e.run("", bad.args...)
		if code != 125 || errOut != bad.want {
			t.Errorf("hutch %s: exit %d, stderr %q; want 125, %q", strings.Join(bad.args, " "), code, errOut, bad.want)
		}
	}
}

func TestStateDir_Refusals(t *testing.T) {
	t.Run("world_writable", func(t *testing.T) {
		e := newEnv(t)
		if err := os.MkdirAll(e.state, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(e.state, 0o777); err != nil {
			t.Fatal(err)
		}
		_, errOut, code := e.run("", "office", "list")
		want := "hutch: State dir " + e.state + " is world-writable (mode 0777); anyone could plant settings or read vaults. Fix with: chmod 0700 " + e.state + "\n"
		if code != 1 || errOut != want {
			t.Errorf("exit %d, stderr %q; want 1, %q", code, errOut, want)
		}
	})
	t.Run("inside_workspace", func(t *testing.T) {
		ws := t.TempDir()
		e := &env{t: t, state: filepath.Join(ws, ".hutch")}
		_, errOut, code := e.run("", "--workspace", ws, "office", "list")
		if code != 1 || !strings.Contains(errOut, "must not be inside the workspace") {
			t.Errorf("exit %d, stderr %q", code, errOut)
		}
	})
	t.Run("created_private", func(t *testing.T) {
		e := newEnv(t)
		e.ok("office", "list")
		fi, err := os.Stat(e.state)
		if err != nil || fi.Mode().Perm() != 0o700 {
			t.Errorf("state dir: %v %v; want mode 0700", err, fi)
		}
	})
}
