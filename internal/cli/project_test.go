package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hutchsandbox/hutch/internal/events"
)

// projectEnv is a CLI environment with its own HOME and config dir and a
// checkout under HOME.
func projectEnv(t *testing.T) (*env, string, string) {
	t.Helper()
	e := newEnv(t)
	root := t.TempDir()
	home := filepath.Join(root, "home")
	cfg := filepath.Join(root, "config")
	proj := filepath.Join(home, "code", "api")
	for _, d := range []string{filepath.Join(proj, ".git"), filepath.Join(proj, "pkg", "deep"), cfg} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	e.extra = map[string]string{"HOME": home, "HUTCH_CONFIG_DIR": cfg}
	return e, proj, cfg
}

func TestProject_SettingsShowsSourcesAndNotes(t *testing.T) {
	e, proj, cfg := projectEnv(t)
	settings := `{
  "sandbox-memory": "4g",
  "sandbox-network": "carrier-pigeon",
  "sandbox-packages": ["jq"],
  "projects": {"` + proj + `": {"sandbox-cpus": 2, "sandbox-persist": "no"}}
}`
	if err := os.WriteFile(filepath.Join(cfg, "settings.json"), []byte(settings), 0o600); err != nil {
		t.Fatal(err)
	}
	out := e.ok("project", "-C", filepath.Join(proj, "pkg", "deep"), "settings")
	// Columns are padded to the widest value; compare words.
	out = strings.Join(strings.Fields(strings.ReplaceAll(out, "\n", " | ")), " ")
	file := filepath.Join(cfg, "settings.json")
	for _, want := range []string{
		"Project " + proj + " (settings: " + file + ")",
		"sandbox-memory 4GiB " + file + " |",
		"sandbox-cpus 2 " + file + " (project override)",
		"sandbox-persist false " + file + " (project override)",
		"sandbox-packages jq " + file + " |",
		"sandbox-network open default",
		"sandbox-network-allow (none) default",
		"Notes:",
		file + `: sandbox-network must be open, allowlist, none or host, not "carrier-pigeon"; the setting is ignored.`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("settings output lacks %q:\n%s", want, out)
		}
	}
}

func TestProject_RefusesTooBroad(t *testing.T) {
	e, proj, _ := projectEnv(t)
	home := filepath.Dir(filepath.Dir(proj))
	for _, dir := range []string{home, filepath.Dir(home), "/"} {
		_, errOut, code := e.run("", "project", "-C", dir, "settings")
		if code == 0 || !strings.HasPrefix(errOut, "hutch: Refusing to use ") || !strings.Contains(errOut, dir) {
			t.Errorf("project in %s: exit %d, %s", dir, code, errOut)
		}
	}
}

func TestProject_Trust(t *testing.T) {
	e, proj, _ := projectEnv(t)
	if _, errOut, code := e.run("", "project", "-C", proj, "trust"); code == 0 || !strings.Contains(errOut, proj+" has no devcontainer.json") {
		t.Errorf("trust without a devcontainer.json: exit %d %s", code, errOut)
	}
	dc := filepath.Join(proj, ".devcontainer", "devcontainer.json")
	if err := os.MkdirAll(filepath.Dir(dc), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dc, []byte(`{"containerEnv": {"A": "1"}, // comment
}`), 0o644); err != nil {
		t.Fatal(err)
	}
	out := e.ok("project", "-C", proj, "settings")
	if !strings.Contains(out, dc+" is new or changed since you last approved it, so it is not applied") {
		t.Errorf("untrusted devcontainer.json not noted:\n%s", out)
	}
	if out := e.ok("project", "-C", proj, "trust"); !strings.HasPrefix(out, "Approved "+dc+" (sha256 ") {
		t.Errorf("trust printed %q", out)
	}
	if ev := e.ok("events", "-n", "1", "--json"); !strings.Contains(ev, `"action":"project.trust","target":"`+proj+`","detail":"`+dc+` sha256 `) {
		t.Errorf("the approval is not the last event: %s", ev)
	}
	if out := e.ok("project", "-C", proj, "settings"); strings.Contains(out, "not applied") {
		t.Errorf("trusted devcontainer.json still noted:\n%s", out)
	}
	if err := os.WriteFile(dc, []byte(`{"containerEnv": {"A": "2"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if out := e.ok("project", "-C", proj, "settings"); !strings.Contains(out, "is new or changed since you last approved it") {
		t.Errorf("changed devcontainer.json applied without approval:\n%s", out)
	}
}

func TestProject_ShellNeedsATerminal(t *testing.T) {
	e, proj, _ := projectEnv(t)
	_, errOut, code := e.run("", "project", "-C", proj, "shell")
	if code == 0 || !strings.Contains(errOut, "hutch project shell needs a terminal; to run a command, use hutch project exec -- CMD") {
		t.Errorf("shell without a terminal: exit %d %s", code, errOut)
	}
}

func TestProject_EnableDisable(t *testing.T) {
	e, proj, cfg := projectEnv(t)
	before := hashDir(t, proj)
	_, errOut, code := e.run("", "project", "-C", proj, "exec", "--", "true")
	if code == 0 || !strings.Contains(errOut, "The sandbox is off for "+proj+". Run `hutch project -C "+proj+" enable` to turn it on") {
		t.Fatalf("exec on a disabled project: exit %d %s", code, errOut)
	}
	out := e.ok("project", "-C", proj, "enable")
	file := filepath.Join(cfg, "settings.json")
	if want := "The sandbox is on for " + proj + " (sandbox-enabled in " + file + ").\n"; out != want {
		t.Errorf("enable printed %q, want %q", out, want)
	}
	if out := e.ok("project", "-C", filepath.Join(proj, "pkg"), "settings"); !strings.Contains(strings.Join(strings.Fields(out), " "), "sandbox-enabled true "+file+" (project override)") {
		t.Errorf("settings after enable:\n%s", out)
	}
	if out := e.ok("project", "-C", proj, "disable"); !strings.HasPrefix(out, "The sandbox is off for "+proj) {
		t.Errorf("disable printed %q", out)
	}
	if out := e.ok("project", "-C", proj, "settings"); !strings.Contains(strings.Join(strings.Fields(out), " "), "sandbox-enabled false "+file+" (project override)") {
		t.Errorf("settings after disable:\n%s", out)
	}
	if hashDir(t, proj) != before {
		t.Error("enable or disable wrote inside the project")
	}
}

// hashDir lists every path under dir with its size, enough to see that
// nothing was added or changed.
func hashDir(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s %d %v\n", p, fi.Size(), fi.ModTime().UnixNano())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestProject_MemberWorktreeIsTheCheckout: from a member's worktree under
// .worktrees/, every project command acts on the checkout (its settings,
// its container), not on a project of its own.
func TestProject_MemberWorktreeIsTheCheckout(t *testing.T) {
	e, proj, _ := projectEnv(t)
	wt := filepath.Join(proj, ".worktrees", "alice", "src")
	if err := os.MkdirAll(wt, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(proj, ".worktrees", "alice", ".git"), []byte("gitdir: "+proj+"/.git/worktrees/alice\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e.ok("project", "-C", proj, "enable")
	out := e.ok("project", "-C", wt, "settings")
	if !strings.HasPrefix(out, "Project "+proj+" (settings: ") || !strings.Contains(strings.Join(strings.Fields(out), " "), "sandbox-enabled true ") {
		t.Errorf("settings from a member's worktree:\n%s", out)
	}
}

// TestProject_PersistText pins the Persist line of status: it says what
// the setting does, for either value.
func TestProject_PersistText(t *testing.T) {
	for persist, want := range map[bool]string{
		true:  "yes (the container is kept when the last user leaves)",
		false: "no (the container stops when the last user leaves)",
	} {
		if got := persistText(persist); got != want {
			t.Errorf("persistText(%v) = %q, want %q", persist, got, want)
		}
	}
}

// TestProject_UpWhenOff: up on a fresh checkout (the sandbox is off)
// says exactly what to run, before it needs an engine; with -C, the
// commands name the project, quoted for a shell.
func TestProject_UpWhenOff(t *testing.T) {
	e, proj, cfg := projectEnv(t)
	file := filepath.Join(cfg, "settings.json")
	_, errOut, code := e.run("", "project", "-C", filepath.Join(proj, "pkg"), "up")
	want := "hutch: The sandbox is off for " + proj + ". Run `hutch project -C " + proj + " enable` to turn it on (it sets sandbox-enabled for this project in " + file + "), then `hutch project -C " + proj + " up`.\n"
	if code == 0 || errOut != want {
		t.Errorf("up on a fresh checkout: exit %d, stderr\n%q, want\n%q", code, errOut, want)
	}
	odd := filepath.Join(filepath.Dir(proj), "it's here")
	if err := os.MkdirAll(filepath.Join(odd, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, errOut, _ = e.run("", "project", "-C", odd, "up")
	if quoted := `'` + strings.ReplaceAll(odd, "'", `'\''`) + `'`; !strings.Contains(errOut, "Run `hutch project -C "+quoted+" enable`") {
		t.Errorf("up in %q: the command is not quoted for a shell: %s", odd, errOut)
	}
	if _, err := os.Stat(file); err == nil {
		t.Error("up without a terminal wrote the settings file")
	}
}

// TestProject_SettingsSetUnset: settings set and unset write the user's
// settings file (the project's override, or the top level with
// --global), validated as the file is, without echoing values, and
// never inside the project.
func TestProject_SettingsSetUnset(t *testing.T) {
	e, proj, cfg := projectEnv(t)
	file := filepath.Join(cfg, "settings.json")
	before := hashDir(t, proj)
	if out := e.ok("project", "-C", proj, "settings", "set", "sandbox-agents", "[]"); out != "Set sandbox-agents for "+proj+" in "+file+".\n" {
		t.Errorf("set printed %q", out)
	}
	if out := e.ok("project", "settings", "set", "--global", "sandbox-memory", "8g"); out != "Set sandbox-memory for every project in "+file+".\n" {
		t.Errorf("set --global printed %q", out)
	}
	if out := e.ok("project", "-C", proj, "settings", "set", "sandbox-env", "TOKEN=s3cret"); strings.Contains(out, "s3cret") {
		t.Errorf("set echoed a value: %q", out)
	}
	rows := strings.Join(strings.Fields(e.ok("project", "-C", proj, "settings")), " ")
	for _, want := range []string{
		"sandbox-agents (none) " + file + " (project override)",
		"sandbox-memory 8GiB " + file + " sandbox-cpus",
		"sandbox-env TOKEN=… " + file + " (project override)",
	} {
		if !strings.Contains(rows, want) {
			t.Errorf("settings lack %q:\n%s", want, rows)
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"set", "sandbox-memory", "lots"}, `hutch: sandbox-memory must be a size such as 512m or 8g, not "lots".` + "\n"},
		{[]string{"set", "sandbox-memroy", "8g"}, "hutch: sandbox-memroy is not a sandbox setting; the settings are "},
		{[]string{"set", "sandbox-memory"}, "hutch: accepts 2 arg(s), received 1\n"},
	} {
		_, errOut, code := e.run("", append([]string{"project", "-C", proj, "settings"}, tc.args...)...)
		if code == 0 || !strings.HasPrefix(errOut, tc.want) {
			t.Errorf("settings %q: exit %d, stderr %q, want %q", tc.args, code, errOut, tc.want)
		}
	}
	if out := e.ok("project", "-C", proj, "settings", "unset", "sandbox-agents"); out != "Unset sandbox-agents for "+proj+" in "+file+".\n" {
		t.Errorf("unset printed %q", out)
	}
	if rows := strings.Join(strings.Fields(e.ok("project", "-C", proj, "settings")), " "); !strings.Contains(rows, "sandbox-agents claude default") {
		t.Errorf("after unset:\n%s", rows)
	}
	if hashDir(t, proj) != before {
		t.Error("settings set wrote inside the project")
	}
	// Each change is an event, by key alone: a value can be a secret.
	me, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(e.ok("events", "--json")), "\n") {
		var ev events.Event
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("event %q: %v", line, err)
		}
		got = append(got, strings.Join([]string{ev.Surface, ev.Who, ev.Action, ev.Target, ev.Detail}, "|"))
	}
	want := []string{
		"cli|" + me.Username + "|project.setting|" + proj + "|set sandbox-agents",
		"cli|" + me.Username + "|project.setting|global|set sandbox-memory",
		"cli|" + me.Username + "|project.setting|" + proj + "|set sandbox-env",
		"cli|" + me.Username + "|project.setting|" + proj + "|unset sandbox-agents",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestProject_Config: --config picks a devcontainer.json in a subfolder,
// as the reference CLI's flag does; it is trusted on its own, and a
// missing one is named.
func TestProject_Config(t *testing.T) {
	e, proj, _ := projectEnv(t)
	cuda := filepath.Join(proj, ".devcontainer", "cuda", "devcontainer.json")
	if err := os.MkdirAll(filepath.Dir(cuda), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cuda, []byte(`{"image": "nvidia/cuda:12.4.0-devel-ubuntu22.04"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if out := e.ok("project", "-C", proj, "settings"); strings.Contains(out, cuda) {
		t.Errorf("without --config a file in a subfolder was used:\n%s", out)
	}
	if out := e.ok("project", "-C", proj, "--config", cuda, "settings"); !strings.Contains(out, cuda+" is new or changed since you last approved it") {
		t.Errorf("--config file not read:\n%s", out)
	}
	if out := e.ok("project", "-C", proj, "--config", cuda, "trust"); !strings.HasPrefix(out, "Approved "+cuda+" (sha256 ") {
		t.Errorf("trust --config printed %q", out)
	}
	if out := e.ok("project", "-C", proj, "--config", cuda, "settings"); strings.Contains(out, "not applied") {
		t.Errorf("trusted --config file still noted:\n%s", out)
	}
	missing := filepath.Join(proj, ".devcontainer", "gpu", "devcontainer.json")
	if _, errOut, code := e.run("", "project", "-C", proj, "--config", missing, "settings"); code == 0 || !strings.Contains(errOut, "--config "+missing+": no such file.") {
		t.Errorf("missing --config: exit %d %s", code, errOut)
	}
	if _, errOut, code := e.run("", "project", "-C", proj, "--config", filepath.Dir(cuda), "settings"); code == 0 || !strings.Contains(errOut, "is not a file; name a devcontainer.json.") {
		t.Errorf("--config of a folder: exit %d %s", code, errOut)
	}
}
