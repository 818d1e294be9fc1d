package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hutchsandbox/hutch/internal/api"
	"github.com/hutchsandbox/hutch/internal/migrate/legacytest"
	"github.com/hutchsandbox/hutch/internal/netpolicy"
	"github.com/hutchsandbox/hutch/internal/project/box"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/service"
	"github.com/hutchsandbox/hutch/internal/testenv"
)

// volatile are the values that differ from run to run; the goldens hold
// "<volatile>" in their place.
var volatile = regexp.MustCompile(`"(recordedAt|startedAt|lastActivity|goVersion)": "[^"]*"`)

// jsonGolden checks that out is one JSON value on one line and compares
// it, indented (its keys in their order), with the pairs of replace
// replaced and volatile values blanked, to testdata/json/<name>.golden.
func jsonGolden(t *testing.T, name, out string, replace ...string) {
	t.Helper()
	if strings.Count(out, "\n") != 1 || !strings.HasSuffix(out, "\n") {
		t.Errorf("%s: --json should print one line, got %q", name, out)
	}
	if !json.Valid([]byte(out)) {
		t.Fatalf("%s: not one JSON value:\n%s", name, out)
	}
	if len(replace) > 0 {
		out = strings.NewReplacer(replace...).Replace(out)
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, []byte(out), "", "  "); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	golden(t, filepath.Join("testdata", "json", name+".golden"), volatile.ReplaceAllString(buf.String(), `"$1": "<volatile>"`))
}

// TestJSON_Golden pins the JSON of every command with --json, each run as
// a user would, on a state dir of its own (the runtime lists, which need
// an engine, are pinned from their conversion here and run end to end in
// TestImageMode_EndToEnd).
func TestJSON_Golden(t *testing.T) {
	e := newEnv(t)
	e.ok("door", "set", "web/docs", "shared")
	e.ok("office", "channel-kind", "slack/C0123ABC", "im")
	e.ok("vault", "set", "web/docs", "GH_TOKEN=ghp_secret_value", "NPM_TOKEN=npm_secret_value")
	e.ok("vault", "placeholder", "web/docs", "GH_TOKEN", "api.github.com", "--expires", "2099-01-01")

	t.Run("office_list", func(t *testing.T) {
		jsonGolden(t, "office_list", e.ok("office", "list", "--json"), e.state, "$STATE")
	})
	t.Run("office_show", func(t *testing.T) {
		jsonGolden(t, "office_show", e.ok("office", "show", "slack/C0123ABC", "--json"), e.state, "$STATE")
		jsonGolden(t, "office_show_image", e.ok("office", "show", "web/docs", "--sandbox", "image:debian:12", "--json"), e.state, "$STATE")
	})
	t.Run("vault_ls", func(t *testing.T) {
		out := e.ok("vault", "ls", "web/docs", "--json")
		if strings.Contains(out, "secret_value") || strings.Contains(out, "hutch-placeholder-") {
			t.Fatalf("vault ls --json printed a value or a placeholder's token: %s", out)
		}
		jsonGolden(t, "vault_ls", out)
		jsonGolden(t, "vault_ls_empty", e.ok("vault", "ls", "--user", "U042", "--json"))
	})
	t.Run("modes", func(t *testing.T) {
		jsonGolden(t, "modes", e.ok("modes", "--json"))
	})
	t.Run("doctor", func(t *testing.T) {
		m := fakeMachine{
			engine:   &engineInfo{Host: "unix:///var/run/docker.sock", Flavor: "docker", ServerVersion: "20.10.24", APIVersion: "1.41"},
			programs: map[string]string{"qemu-system-x86_64": "/usr/bin/qemu-system-x86_64"},
			files:    map[string]bool{"/dev/kvm": true, "/sys/fs/cgroup/cgroup.controllers": true},
			state:    "/home/ada/.hutch", perm: 0o700, hwVirt: true,
			network: netpolicy.ModeOpen,
		}
		var out bytes.Buffer
		if err := printJSON(&out, doctorChecks(diagnose(context.Background(), m.probes()))); err != nil {
			t.Fatal(err)
		}
		jsonGolden(t, "doctor", out.String())
		// The command itself, on this machine: the same shape.
		var got []api.DoctorCheck
		if err := json.Unmarshal([]byte(e.ok("doctor", "--json")), &got); err != nil || len(got) != len(diagnose(context.Background(), m.probes())) {
			t.Errorf("doctor --json on this machine: %d checks, %v", len(got), err)
		}
	})
	t.Run("project_settings", func(t *testing.T) {
		pe, proj, cfg := projectEnv(t)
		settings := `{"sandbox-memory": "4g", "sandbox-network": "carrier-pigeon", "projects": {"` + proj + `": {"sandbox-cpus": 2}}}`
		if err := os.WriteFile(filepath.Join(cfg, "settings.json"), []byte(settings), 0o600); err != nil {
			t.Fatal(err)
		}
		jsonGolden(t, "project_settings", pe.ok("project", "-C", proj, "settings", "--json"), proj, "$PROJECT", cfg, "$CONFIG")
	})
	t.Run("project_status", func(t *testing.T) {
		l := &loaded{dir: "/home/ada/code/api"}
		l.settings.Enabled = true
		s := box.Status{Engine: "docker 20.10.24", Name: "hutch-sbx-api-0123abcd", State: "running", Owner: box.OwnerExternal,
			Sessions: 2, Image: "hutch-sbx-api:0123abcd", Limits: "8GiB memory, 4 CPUs, 4096 processes", Network: "allowlist: github.com"}
		var out bytes.Buffer
		if err := printJSON(&out, projectStatus(l, s)); err != nil {
			t.Fatal(err)
		}
		jsonGolden(t, "project_status", out.String())
	})
	t.Run("migrate_dry_run", func(t *testing.T) {
		me := newEnv(t)
		ws := filepath.Join(me.state, "workspace")
		if err := legacytest.Populate(ws, me.state, []legacytest.Conversation{{RawID: "C1"}, {RawID: "12345"}}); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ws, "MEMORY.md"), []byte("shared"), 0o600); err != nil {
			t.Fatal(err)
		}
		out, errOut, code := me.run("", "migrate", "--dry-run", "--json", "--platforms", "slack,discord,telegram")
		// The plan is printed, then the exit says it would not run.
		if code != 1 || errOut != "hutch: 1 blocker: hutch migrate would stop without moving anything.\n" {
			t.Errorf("dry run with a blocker: exit %d, stderr %q", code, errOut)
		}
		jsonGolden(t, "migrate_dry_run", out, me.state, "$STATE")
		if _, errOut, code := me.run("", "migrate", "--json"); code == 0 || !strings.Contains(errOut, "--json goes with --dry-run") {
			t.Errorf("migrate --json without --dry-run: exit %d, %q", code, errOut)
		}
	})
	t.Run("sandbox_ls", func(t *testing.T) {
		list := []service.OwnedRuntime{
			{Kind: sandbox.KindImage, Status: fakeStatus("slack", "C0123ABC", sandbox.StateRunning)},
			{Kind: sandbox.KindKube, Status: fakeStatus("web", "docs", sandbox.StateStopped)},
		}
		var out bytes.Buffer
		if err := printJSON(&out, runtimesJSON(list)); err != nil {
			t.Fatal(err)
		}
		jsonGolden(t, "sandbox_ls", out.String())
		out.Reset()
		if err := printJSON(&out, runtimesJSON(nil)); err != nil || out.String() != "[]\n" {
			t.Errorf("no runtimes: %q, %v", out.String(), err)
		}
	})
	t.Run("sandbox_status", func(t *testing.T) {
		var out bytes.Buffer
		if err := printJSON(&out, api.StatusOf(fakeStatus("slack", "C0123ABC", sandbox.StateRunning))); err != nil {
			t.Fatal(err)
		}
		jsonGolden(t, "sandbox_status", out.String())
	})
}

// fakeStatus is a runtime's status with every field set.
func fakeStatus(platform, id string, state sandbox.RuntimeState) sandbox.Status {
	at := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	return sandbox.Status{OfficeKey: "v1-" + platform + "-key", Platform: platform, ConversationID: id, Name: "hutch-v1-" + platform + "-key", ID: "c0ffee",
		State: state, Image: "debian:12", ImageID: "sha256:0123", Limits: sandbox.Limits{CPUs: 0.5, MemoryBytes: 1 << 30, Pids: 1024},
		Fingerprint: "fp-0123", ActiveCommands: 1, StartedAt: at, LastActivity: at}
}

// TestJSON_IsTheAPIAnswer: what office list, office show and vault ls
// print with --json is byte for byte what the daemon's API answers for
// the same state dir.
func TestJSON_IsTheAPIAnswer(t *testing.T) {
	e := newEnv(t)
	e.ok("door", "set", "web/docs", "shared")
	e.ok("office", "channel-kind", "slack/C0123ABC", "im")
	e.ok("vault", "set", "web/docs", "GH_TOKEN=ghp_x")
	e.ok("vault", "placeholder", "web/docs", "GH_TOKEN", "api.github.com", "--body")
	layout, err := service.ResolveLayout(service.LayoutOptions{StateDir: e.state, Getenv: e.getenv})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer((&api.Server{Service: service.New(layout, nil), Mode: sandbox.DefaultMode, Version: "test"}).Handler())
	t.Cleanup(ts.Close)
	answer := func(method, path, body string) string {
		t.Helper()
		req, err := http.NewRequest(method, ts.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, b)
		}
		return string(b)
	}
	for _, c := range []struct {
		args               []string
		method, path, body string
	}{
		{[]string{"office", "list", "--json"}, "GET", "/v1/offices", ""},
		{[]string{"office", "show", "web/docs", "--json"}, "POST", "/v1/policy", `{"conversation":{"platform":"web","conversationId":"docs"}}`},
		{[]string{"office", "show", "slack/C0123ABC", "--json"}, "POST", "/v1/policy", `{"conversation":{"platform":"slack","conversationId":"C0123ABC"}}`},
		{[]string{"vault", "ls", "web/docs", "--json"}, "POST", "/v1/vault/list", `{"conversation":{"platform":"web","conversationId":"docs"}}`},
	} {
		t.Run(strings.Join(c.args[:2], "_"), func(t *testing.T) {
			if diff := cmp.Diff(answer(c.method, c.path, c.body), e.ok(c.args...)); diff != "" {
				t.Errorf("hutch %s differs from %s %s (-api +cli):\n%s", strings.Join(c.args, " "), c.method, c.path, diff)
			}
		})
	}
}

// TestJSON_ErrorsStayText: a command that fails with --json says why on
// stderr, as text, prints nothing on stdout and exits non-zero.
func TestJSON_ErrorsStayText(t *testing.T) {
	e := newEnv(t)
	for _, args := range [][]string{
		{"office", "show", "slack/../x", "--json"},
		{"vault", "ls", "--json"},
		{"office", "list", "--json", "-q"},
	} {
		out, errOut, code := e.run("", args...)
		if code == 0 || out != "" || !strings.HasPrefix(errOut, "hutch: ") || strings.HasPrefix(strings.TrimPrefix(errOut, "hutch: "), "{") {
			t.Errorf("hutch %s: exit %d, stdout %q, stderr %q; want a text error and nothing on stdout", strings.Join(args, " "), code, out, errOut)
		}
	}
}

// TestQuiet: -q prints names, one a line, and nothing else.
func TestQuiet(t *testing.T) {
	e := newEnv(t)
	if out := e.ok("office", "list", "-q"); out != "" {
		t.Errorf("office list -q with no offices: %q", out)
	}
	e.ok("office", "channel-kind", "telegram/-100200", "im")
	e.ok("office", "channel-kind", "slack/C0123ABC", "im")
	if out, want := e.ok("office", "list", "--quiet"), "slack/C0123ABC\ntelegram/-100200\n"; out != want {
		t.Errorf("office list -q: %q, want %q", out, want)
	}
	e.ok("vault", "set", "slack/C0123ABC", "GH_TOKEN=ghp_secret", "AWS_KEY=aws_secret")
	if out, want := e.ok("vault", "ls", "slack/C0123ABC", "-q"), "AWS_KEY\nGH_TOKEN\n"; out != want {
		t.Errorf("vault ls -q: %q, want %q", out, want)
	}
}

// TestProjectStatus_JSON runs hutch project status --json on a real
// engine, for a project whose sandbox is not made yet: nothing is made,
// and the object has every key of api.ProjectStatus.
func TestProjectStatus_JSON(t *testing.T) {
	testenv.Docker(t)
	e, proj, _ := projectEnv(t)
	out := e.ok("project", "-C", proj, "status", "--json")
	var got map[string]any
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	for _, k := range []string{"project", "engine", "container", "state", "owner", "users", "image", "limits", "network", "enabled", "persist", "notes"} {
		if _, ok := got[k]; !ok {
			t.Errorf("project status --json lacks %q: %s", k, out)
		}
	}
	var st api.ProjectStatus
	if err := json.Unmarshal([]byte(out), &st); err != nil || st.Project != proj || st.State != "missing" || st.Enabled || !strings.HasPrefix(st.Container, "hutch-sbx-api-") || st.Notes == nil {
		t.Errorf("project status --json: %+v, %v", st, err)
	}
}
