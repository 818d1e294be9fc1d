package cli

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/internal/vault"
)

func TestVault_PlaceholderHelp(t *testing.T) {
	e := newEnv(t)
	out := e.ok("vault", "placeholder", "--help")
	golden(t, filepath.Join("testdata", "help", "hutch_vault_placeholder.golden"), out)
}

func TestVault_Placeholder(t *testing.T) {
	const secret = "ghp_s3cr3t-value-DO-NOT-PRINT"
	e := newEnv(t)
	k := key(t, "slack", "C1")
	e.ok("vault", "set", "slack/C1", "GH_TOKEN="+secret, "PLAIN=x")

	out := e.ok("vault", "placeholder", "slack/C1", "GH_TOKEN", "api.github.com,*.GitHubUserContent.com", "--expires", "2099-01-01")
	if want := "Marked GH_TOKEN in vault " + k + ": placeholder -> api.github.com, *.githubusercontent.com (expires 2099-01-01).\n"; out != want {
		t.Errorf("placeholder got %q, want %q", out, want)
	}
	out = e.ok("vault", "ls", "slack/C1")
	want := "Vault " + k + ":\n" +
		"  env   GH_TOKEN  placeholder -> api.github.com, *.githubusercontent.com (expires 2099-01-01)\n" +
		"  env   PLAIN\n"
	if out != want {
		t.Errorf("vault ls got %q, want %q", out, want)
	}

	store := vault.NewStore(e.state)
	marks, err := store.Placeholders(k)
	if err != nil {
		t.Fatal(err)
	}
	token := marks["GH_TOKEN"].Token

	// Rotating the value and changing the hosts keep the token.
	e.ok("vault", "set", "slack/C1", "GH_TOKEN="+secret+"-rotated")
	out = e.ok("vault", "placeholder", "--user", "U1", "--help") // the flags mirror the other commands
	if !strings.Contains(out, "--user string") || !strings.Contains(out, "--container string") {
		t.Errorf("placeholder lacks the vault flags:\n%s", out)
	}
	e.ok("vault", "placeholder", "slack/C1", "GH_TOKEN", "api.github.com", "--expires", "2099-06-01T12:30:00+02:00")
	if marks, _ := store.Placeholders(k); marks["GH_TOKEN"].Token != token {
		t.Errorf("token changed from %s to %s", token, marks["GH_TOKEN"].Token)
	}
	out = e.ok("vault", "ls", "slack/C1")
	if want := "  env   GH_TOKEN  placeholder -> api.github.com (expires 2099-06-01T10:30:00Z)\n"; !strings.Contains(out, want) {
		t.Errorf("vault ls got %q, want a line %q", out, want)
	}
	if strings.Contains(out, token) || strings.Contains(out, secret) {
		t.Errorf("vault ls printed a token or value:\n%s", out)
	}

	out = e.ok("vault", "placeholder", "slack/C1", "GH_TOKEN", "off")
	if want := "GH_TOKEN in vault " + k + " is no longer a placeholder; commands see its real value.\n"; out != want {
		t.Errorf("off got %q, want %q", out, want)
	}
	if out := e.ok("vault", "ls", "slack/C1"); out != "Vault "+k+":\n  env   GH_TOKEN\n  env   PLAIN\n" {
		t.Errorf("vault ls after off got %q", out)
	}

	// The same for a container's vault, named the same way as elsewhere.
	e.ok("vault", "set", "--container", "box", "NPM_TOKEN=npm_0123456789")
	e.ok("vault", "placeholder", "--container", "box", "NPM_TOKEN", "registry.npmjs.org")
	if out := e.ok("vault", "ls", "--container", "box"); !strings.Contains(out, "  env   NPM_TOKEN  placeholder -> registry.npmjs.org\n") {
		t.Errorf("vault ls --container got %q", out)
	}
}

func TestVault_PlaceholderExpired(t *testing.T) {
	e := newEnv(t)
	k := key(t, "slack", "C1")
	e.ok("vault", "set", "slack/C1", "GH_TOKEN=ghp_0123456789")
	past := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	if _, err := vault.NewStore(e.state).SetPlaceholder(k, "GH_TOKEN", []string{"api.github.com"}, past, false); err != nil {
		t.Fatal(err)
	}
	if out := e.ok("vault", "ls", "slack/C1"); out != "Vault "+k+":\n  env   GH_TOKEN  placeholder -> api.github.com (expired 2020-01-01)\n" {
		t.Errorf("vault ls got %q", out)
	}
}

func TestVault_PlaceholderErrors(t *testing.T) {
	const secret = "ghp_s3cr3t-value-DO-NOT-PRINT"
	e := newEnv(t)
	k := key(t, "slack", "C1")
	e.ok("vault", "set", "slack/C1", "GH_TOKEN="+secret)
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"unknown_name", []string{"slack/C1", "NOPE", "api.github.com"},
			"hutch: Vault " + k + " has no env variable NOPE; set it first: hutch vault set <vault> NOPE\n"},
		{"invalid_hosts", []string{"slack/C1", "GH_TOKEN", "api.github.com,https://x.example/"},
			"hutch: Invalid placeholder host 2 of 2: has a scheme (https://); write the host only, e.g. \"x.example\"\n"},
		{"value_as_hosts", []string{"slack/C1", "GH_TOKEN", secret},
			"hutch: Invalid placeholder host 1 of 1: give a full host name such as api.github.com or *.example.com\n"},
		{"bad_expiry", []string{"slack/C1", "GH_TOKEN", "api.github.com", "--expires", "soon"},
			"hutch: Invalid expiry \"soon\": give a duration (720h) or a time (2027-01-01 or 2027-01-01T12:00:00Z)\n"},
		{"past_expiry", []string{"slack/C1", "GH_TOKEN", "api.github.com", "--expires", "2020-01-01"},
			"hutch: Expiry \"2020-01-01\" is not in the future\n"},
		{"expires_with_off", []string{"slack/C1", "GH_TOKEN", "off", "--expires", "1h"},
			"hutch: --expires and --body go with HOSTS, not with off\n"},
		{"off_unmarked", []string{"slack/C1", "GH_TOKEN", "off"},
			"hutch: GH_TOKEN is not a placeholder in vault " + k + "\n"},
		{"missing_hosts", []string{"slack/C1", "GH_TOKEN"},
			"hutch: Give the variable and its hosts, or off: hutch vault placeholder <vault> NAME HOSTS|off\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, code := e.run("", append([]string{"vault", "placeholder"}, tc.args...)...)
			if code != 1 || out != "" || errOut != tc.want {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit 1, stderr %q", code, out, errOut, tc.want)
			}
		})
	}
}
