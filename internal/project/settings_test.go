package project_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/netpolicy"
	"github.com/hutchsandbox/hutch/internal/project"
)

const settingsFile = "/home/me/.config/hutch/settings.json"

func parseSettings(t *testing.T, data string) (project.Settings, []string) {
	t.Helper()
	s, notes, err := project.ParseSettings(settingsFile, []byte(data))
	if err != nil {
		t.Fatalf("ParseSettings: %v", err)
	}
	return s, notes
}

func TestParseSettings_Defaults(t *testing.T) {
	for _, data := range []string{"", "  \n", "{}", `{"theme": "dark", "sandbox": {"workspace": {}}}`} {
		s, notes := parseSettings(t, data)
		if len(notes) != 0 {
			t.Errorf("ParseSettings(%q) notes %q, want none", data, notes)
		}
		r := project.Effective(s, "/home/me/code/api")
		want := project.Resolved{
			Base: "debian:bookworm-slim", Agents: []string{"claude"}, Network: "open",
			Persist: true, Devcontainer: true, LifecycleTimeout: project.DefaultLifecycleTimeout, Sources: map[string]string{},
		}
		for _, k := range project.Keys {
			want.Sources[k] = "default"
		}
		if diff := cmp.Diff(want, r); diff != "" {
			t.Errorf("Effective of %q (-want +got):\n%s", data, diff)
		}
	}
}

func TestParseSettings_Values(t *testing.T) {
	s, notes := parseSettings(t, `{
		"sandbox-enabled": "yes",
		"sandbox-image": "",
		"sandbox-base": "ubuntu:24.04",
		"sandbox-packages": "jq",
		"sandbox-setup": ["pip install uv", "echo hi"],
		"sandbox-agents": ["claude", "codex"],
		"sandbox-mount": ["~/.gitconfig:~/.gitconfig:ro"],
		"sandbox-env": ["FOO=bar", "TOKEN=s3cret"],
		"sandbox-user": "host",
		"sandbox-network": "Default",
		"sandbox-network-allow": "github.com, *.npmjs.org,,registry.npmjs.org:443",
		"sandbox-memory": "8g",
		"sandbox-cpus": 4,
		"sandbox-persist": "0",
		"sandbox-devcontainer": false,
		"sandbox-lifecycle-timeout": " 1h30m "
	}`)
	if len(notes) != 0 {
		t.Fatalf("notes %q, want none", notes)
	}
	r := project.Effective(s, "/elsewhere")
	want := project.Resolved{
		Enabled: true, Base: "ubuntu:24.04", Packages: []string{"jq"},
		Setup: []string{"pip install uv", "echo hi"}, Agents: []string{"claude", "codex"},
		Mounts: []string{"~/.gitconfig:~/.gitconfig:ro"}, Env: []string{"FOO=bar", "TOKEN=s3cret"},
		User: "host", Network: "open", NetworkAllow: []string{"github.com", "*.npmjs.org", "registry.npmjs.org:443"},
		MemoryBytes: 8 << 30, CPUs: 4, Persist: false, Devcontainer: false,
		LifecycleTimeout: 90 * time.Minute, Sources: map[string]string{},
	}
	for _, k := range project.Keys {
		want.Sources[k] = settingsFile
	}
	if diff := cmp.Diff(want, r); diff != "" {
		t.Errorf("Effective (-want +got):\n%s", diff)
	}
}

func TestParseSettings_MemoryAndCPUForms(t *testing.T) {
	tests := []struct {
		json   string
		memory int64
		cpus   float64
	}{
		{`{"sandbox-memory": "512m", "sandbox-cpus": "0.5"}`, 512 << 20, 0.5},
		{`{"sandbox-memory": 1073741824, "sandbox-cpus": 2}`, 1 << 30, 2},
		{`{"sandbox-memory": "", "sandbox-cpus": ""}`, 0, 0},
		{`{"sandbox-memory": "2GiB"}`, 2 << 30, 0},
	}
	for _, tc := range tests {
		s, notes := parseSettings(t, tc.json)
		if len(notes) != 0 {
			t.Errorf("ParseSettings(%s) notes %q", tc.json, notes)
		}
		r := project.Effective(s, "")
		if r.MemoryBytes != tc.memory || r.CPUs != tc.cpus {
			t.Errorf("ParseSettings(%s) got memory %d cpus %v, want %d %v", tc.json, r.MemoryBytes, r.CPUs, tc.memory, tc.cpus)
		}
	}
}

// TestParseSettings_BadEntries: every bad entry is a note naming the
// file and key, and leaves the key at its default; none is an error.
func TestParseSettings_BadEntries(t *testing.T) {
	s, notes := parseSettings(t, `{
		"sandbox-enabled": "maybe",
		"sandbox-persist": 1,
		"sandbox-image": "debian bookworm\nRUN curl evil",
		"sandbox-base": 12,
		"sandbox-packages": ["jq", 3],
		"sandbox-setup": {"a": "b"},
		"sandbox-env": {"TOKEN": "s3cret"},
		"sandbox-user": ["me"],
		"sandbox-network": "bus",
		"sandbox-network-allow": ["github.com", "https://api.github.com/repos"],
		"sandbox-memory": "lots",
		"sandbox-cpus": -1,
		"sandbox-devcontainer": null,
		"sandbox-lifecycle-timeout": "forever",
		"sandbox-colour": "blue",
		"projects": {
			"relative/path": {"sandbox-enabled": true},
			"/home/me/code/api": {"sandbox-memory": "1k", "sandbox-cpus": "0", "colour": 1, "sandbox-mount": "/data", "sandbox-network-allow": 443, "sandbox-lifecycle-timeout": "48h"},
			"/home/me/code/web": [1]
		}
	}`)
	for _, n := range notes {
		if strings.Contains(n, "s3cret") {
			t.Errorf("a note quotes a sandbox-env value: %s", n)
		}
	}
	r := project.Effective(s, "/home/me/code/api")
	if r.Enabled || !r.Persist || r.Image != "" || r.Base != "debian:bookworm-slim" || r.Packages != nil ||
		r.Setup != nil || r.Env != nil || r.User != "" || r.Network != "open" || r.NetworkAllow != nil || r.MemoryBytes != 0 || r.CPUs != 0 ||
		r.LifecycleTimeout != project.DefaultLifecycleTimeout {
		t.Errorf("bad entries changed the effective settings: %+v", r)
	}
	if got, want := r.Mounts, []string{"/data"}; !cmp.Equal(got, want) {
		t.Errorf("the good key of the project override got %q, want %q", got, want)
	}
	golden(t, "settings_notes", strings.Join(notes, "\n")+"\n")
}

func TestParseSettings_NotJSON(t *testing.T) {
	var b strings.Builder
	for _, data := range []string{"{\n  \"sandbox-enabled\": true,\n}", "[]", "null", "\"x\"", "{} {}", "{"} {
		_, _, err := project.ParseSettings(settingsFile, []byte(data))
		if err == nil {
			t.Errorf("ParseSettings(%q) got no error", data)
			continue
		}
		if !errdefs.IsFailedPrecondition(err) {
			t.Errorf("ParseSettings(%q) error %v is not ErrFailedPrecondition", data, err)
		}
		fmt.Fprintf(&b, "%q:\n  %v\n", data, err)
	}
	golden(t, "settings_errors", b.String())
}

func TestEffective_ProjectOverride(t *testing.T) {
	s, notes := parseSettings(t, `{
		"sandbox-enabled": true,
		"sandbox-packages": ["jq", "ripgrep"],
		"sandbox-memory": "4g",
		"sandbox-network": "host",
		"projects": {
			"/home/me/code/api/": {"sandbox-packages": ["postgresql-client"], "sandbox-memory": "8g", "sandbox-agents": [], "sandbox-network": ""}
		}
	}`)
	if len(notes) != 0 {
		t.Fatalf("notes %q", notes)
	}
	r := project.Effective(s, "/home/me/code/api")
	if got, want := r.Packages, []string{"postgresql-client"}; !cmp.Equal(got, want) {
		t.Errorf("Packages got %q, want the override's %q (it replaces, not extends)", got, want)
	}
	if r.MemoryBytes != 8<<30 || !r.Enabled || len(r.Agents) != 0 || r.Network != "open" {
		t.Errorf("Effective got %+v", r)
	}
	golden(t, "settings_table", table(r.Table()))

	other := project.Effective(s, "/home/me/code/web")
	if got, want := other.Packages, []string{"jq", "ripgrep"}; !cmp.Equal(got, want) {
		t.Errorf("another project's Packages got %q, want the global %q", got, want)
	}
	if got := other.Sources["sandbox-packages"]; got != settingsFile {
		t.Errorf("another project's source got %q, want %q", got, settingsFile)
	}
}

func table(rows [][3]string) string {
	var b strings.Builder
	for _, r := range rows {
		fmt.Fprintf(&b, "%-26s %-45s %s\n", r[0], r[1], r[2])
	}
	return b.String()
}

func TestResolved_TableHidesEnvValues(t *testing.T) {
	s, _ := parseSettings(t, `{"sandbox-env": ["TOKEN=s3cret", "broken"]}`)
	got := table(project.Effective(s, "").Table())
	if strings.Contains(got, "s3cret") || strings.Contains(got, "broken") {
		t.Errorf("Table shows an env value:\n%s", got)
	}
	golden(t, "settings_table_env", got)
}

func TestEffective_EmptyValuesReset(t *testing.T) {
	s, notes := parseSettings(t, `{
		"sandbox-image": "ghcr.io/me/agents", "sandbox-agents": ["codex"], "sandbox-memory": "4g", "sandbox-network": "none",
		"projects": {"/p": {"sandbox-image": "", "sandbox-agents": "", "sandbox-memory": "", "sandbox-network": ""},
		             "/q": {"sandbox-agents": []}}
	}`)
	if len(notes) != 0 {
		t.Fatalf("notes %q", notes)
	}
	p := project.Effective(s, "/p")
	if p.Image != "" || !cmp.Equal(p.Agents, []string{"claude"}) || p.MemoryBytes != 0 || p.Network != "open" {
		t.Errorf("empty strings in the override did not reset to the defaults: %+v", p)
	}
	if got, want := p.Sources["sandbox-agents"], settingsFile+" (project override)"; got != want {
		t.Errorf("source got %q, want %q", got, want)
	}
	if q := project.Effective(s, "/q"); len(q.Agents) != 0 {
		t.Errorf("an empty list got agents %q, want none", q.Agents)
	}
}

// TestParseSettings_Network: sandbox-network takes the egress policies
// (bridge, its old name of open, still reads as open) and
// sandbox-network-allow hosts separated by commas, in one string or a
// list.
func TestParseSettings_Network(t *testing.T) {
	tests := []struct {
		json    string
		network string
		allow   []string
		mode    netpolicy.Mode
	}{
		{`{}`, "open", nil, netpolicy.ModeOpen},
		{`{"sandbox-network": "bridge"}`, "open", nil, netpolicy.ModeOpen},
		{`{"sandbox-network": "host"}`, "host", nil, netpolicy.ModeOpen},
		{`{"sandbox-network": "Allowlist", "sandbox-network-allow": "github.com,*.npmjs.org"}`, "allowlist", []string{"github.com", "*.npmjs.org"}, netpolicy.ModeAllowlist},
		{`{"sandbox-network": "allowlist", "sandbox-network-allow": ["github.com, api.anthropic.com", "10.0.0.5:8080"]}`, "allowlist", []string{"github.com", "api.anthropic.com", "10.0.0.5:8080"}, netpolicy.ModeAllowlist},
		{`{"sandbox-network": "allowlist"}`, "allowlist", nil, netpolicy.ModeAllowlist},
		{`{"sandbox-network": "none", "sandbox-network-allow": "github.com"}`, "none", []string{"github.com"}, netpolicy.ModeNone},
		{`{"sandbox-network-allow": "github.com", "projects": {"/p": {"sandbox-network-allow": ""}}}`, "open", nil, netpolicy.ModeOpen},
	}
	for _, tc := range tests {
		s, notes := parseSettings(t, tc.json)
		if len(notes) != 0 {
			t.Errorf("ParseSettings(%s) notes %q", tc.json, notes)
		}
		r := project.Effective(s, "/p")
		if r.Network != tc.network || !cmp.Equal(r.NetworkAllow, tc.allow) {
			t.Errorf("ParseSettings(%s) got network %q allow %q, want %q %q", tc.json, r.Network, r.NetworkAllow, tc.network, tc.allow)
		}
		p := r.Policy()
		if p.Mode != tc.mode {
			t.Errorf("ParseSettings(%s) policy mode %q, want %q", tc.json, p.Mode, tc.mode)
		}
		for _, h := range tc.allow {
			if tc.mode == netpolicy.ModeAllowlist && h == "github.com" && !p.Allows(h, 443) {
				t.Errorf("ParseSettings(%s) policy does not allow %s", tc.json, h)
			}
		}
		if tc.mode == netpolicy.ModeNone && p.Allows("github.com", 443) {
			t.Errorf("ParseSettings(%s): none allows a listed host", tc.json)
		}
	}
}

// TestSettings_Policy: the policy a running sandbox's proxy reads again
// per connection; an entry of the network keys that was left out (for
// the project or at the top level) says "keep the one you have" rather
// than falling back to open.
func TestSettings_Policy(t *testing.T) {
	tests := []struct {
		name, json string
		ok         bool
		allows     bool // github.com:443
	}{
		{"allowlist", `{"sandbox-network": "allowlist", "sandbox-network-allow": "github.com"}`, true, true},
		{"override", `{"sandbox-network": "allowlist", "projects": {"/p": {"sandbox-network-allow": "github.com"}}}`, true, true},
		{"none", `{"sandbox-network": "allowlist", "projects": {"/p": {"sandbox-network": "none"}}}`, true, false},
		{"empty_file", ``, true, true},
		{"typo_in_mode", `{"sandbox-network": "allowlst"}`, false, false},
		{"typo_in_override", `{"sandbox-network": "allowlist", "projects": {"/p": {"sandbox-network-allow": "https://github.com"}}}`, false, false},
		{"override_not_an_object", `{"sandbox-network": "allowlist", "projects": {"/p": "open"}}`, false, false},
		{"typo_for_another_project", `{"sandbox-network": "none", "projects": {"/q": {"sandbox-network": "opne"}}}`, true, false},
		{"other_typo", `{"sandbox-network": "none", "sandbox-memory": "lots"}`, true, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, _, err := project.ParseSettings(settingsFile, []byte(tc.json))
			if err != nil {
				t.Fatal(err)
			}
			p, ok := s.Policy("/p/")
			if ok != tc.ok {
				t.Fatalf("Policy ok %v, want %v", ok, tc.ok)
			}
			if ok && p.Allows("github.com", 443) != tc.allows {
				t.Errorf("Policy %+v allows github.com: %v, want %v", p, !tc.allows, tc.allows)
			}
		})
	}
}
