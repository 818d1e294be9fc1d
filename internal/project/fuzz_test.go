package project_test

import (
	"path"
	"regexp"
	"strings"
	"testing"

	"github.com/hutchsandbox/hutch/internal/netpolicy"
	"github.com/hutchsandbox/hutch/internal/project"
)

// FuzzParseMount: no entry panics, and what parses is a bind of a clean
// absolute path or a volume, at a clean absolute target.
func FuzzParseMount(f *testing.F) {
	for _, s := range []string{
		"/data", "/a:/b", "/a:/b:ro", "~", "~/x:~/y:rw", "cache:/c", ":::", "a:b:c:d", " : ", "~x", "/a/../..:/",
		"/var/run/docker.sock:/var/run/docker.sock", "é:/x", "\x00:/\x00",
	} {
		f.Add(s, "/home/me")
	}
	f.Add("~/x", "")
	f.Fuzz(func(t *testing.T, raw, home string) {
		m, err := project.ParseMount(raw, home)
		if err != nil {
			return
		}
		if !path.IsAbs(m.Target) || path.Clean(m.Target) != m.Target {
			t.Fatalf("ParseMount(%q) target %q is not clean and absolute", raw, m.Target)
		}
		switch m.Type {
		case project.MountBind:
			if !path.IsAbs(m.Source) || path.Clean(m.Source) != m.Source {
				t.Fatalf("ParseMount(%q) bind source %q is not clean and absolute", raw, m.Source)
			}
		case project.MountVolume:
			if m.Source == "" || strings.ContainsAny(m.Source, "/:~ ") {
				t.Fatalf("ParseMount(%q) volume %q", raw, m.Source)
			}
		default:
			t.Fatalf("ParseMount(%q) type %q", raw, m.Type)
		}
		_ = project.CheckMount(m, home)
	})
}

// FuzzParseSettings: no file panics, and whatever parses resolves to
// values inside their domains.
func FuzzParseSettings(f *testing.F) {
	for _, s := range []string{
		`{}`, `[]`, `null`, ``, `{"sandbox-enabled": "yes", "sandbox-memory": "8g", "sandbox-cpus": 2}`,
		`{"sandbox-packages": "jq", "sandbox-env": {"A": 1}, "sandbox-network": "bus"}`,
		`{"projects": {"/p": {"sandbox-mount": ["/x"], "sandbox-cpus": "1e400"}, "p": 1}}`,
		`{"projects": []}`, `{"sandbox-network": "allowlist", "sandbox-network-allow": "github.com, *.x.org"}`, `{"sandbox-memory": -1, "sandbox-cpus": "NaN"}`, `{"sandbox-memory": 1e30}`,
	} {
		f.Add([]byte(s), "/p")
	}
	f.Fuzz(func(t *testing.T, data []byte, p string) {
		s, _, err := project.ParseSettings("settings.json", data)
		if err != nil {
			return
		}
		r := project.Effective(s, p)
		switch r.Network {
		case project.NetworkOpen, project.NetworkAllowlist, project.NetworkHost, project.NetworkNone:
		default:
			t.Fatalf("Network %q", r.Network)
		}
		if _, err := netpolicy.ParseAllowlist(r.NetworkAllow); err != nil {
			t.Fatalf("NetworkAllow %q: %v", r.NetworkAllow, err)
		}
		if r.MemoryBytes < 0 || !(r.CPUs >= 0) || r.CPUs > 1024 || r.Base == "" {
			t.Fatalf("Effective out of range: %+v", r)
		}
		if len(r.Table()) != len(project.Keys) {
			t.Fatalf("Table has %d rows", len(r.Table()))
		}
	})
}

// safePkgLine is the rest of a "    pkg " line of the install step.
var safePkgLine = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9+.:=/~-]*; \\$`)

// FuzzRecipe: nothing in a recipe adds a Dockerfile instruction of its
// own; every line is one hutch writes or a RUN of one setup entry.
func FuzzRecipe(f *testing.F) {
	f.Add("debian:bookworm-slim", "jq", "claude", "echo hi")
	f.Add("x\nRUN evil", "a b", "codex", "a \\")
	f.Add("", "", "", "cat <<EOF")
	f.Fuzz(func(t *testing.T, base, pkg, agent, setup string) {
		r := project.Recipe{Base: base, Packages: []string{pkg}, Agents: []string{agent}, Setup: []string{setup, "true"}}
		d, _ := r.Compile()
		lines := strings.Split(strings.TrimSuffix(d, "\n"), "\n")
		if got, want := lines[len(lines)-1], "RUN true"; got != want {
			t.Fatalf("last line %q, want %q:\n%s", got, want, d)
		}
		for _, l := range lines {
			ok := false
			for _, prefix := range []string{"FROM ", "USER root", "ENV ", "RUN ", "    "} {
				ok = ok || strings.HasPrefix(l, prefix)
			}
			if !ok {
				t.Fatalf("line %q is not one hutch writes:\n%s", l, d)
			}
			// The one line of the install step a setting reaches: one
			// package name, nothing a shell would read as more.
			if p, found := strings.CutPrefix(l, "    pkg "); found && !safePkgLine.MatchString(p) {
				t.Fatalf("package line %q is not one shell word:\n%s", l, d)
			}
		}
	})
}
