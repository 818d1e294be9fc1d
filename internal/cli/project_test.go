package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
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
		"sandbox-network bridge default",
		"Notes:",
		file + `: sandbox-network must be bridge, host or none, not "carrier-pigeon"; the setting is ignored.`,
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
