package cli

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/hutchsandbox/hutch/internal/sandbox"
)

// TestCompletion: the scripts generate, and hutch __complete (what they
// call) suggests the registered conversations and the modes, reading
// nothing but the registry.
func TestCompletion(t *testing.T) {
	e := newEnv(t)
	for _, sh := range []string{"bash", "zsh", "fish"} {
		if out := e.ok("completion", sh); !strings.Contains(out, "__complete") {
			t.Errorf("completion %s does not call hutch __complete:\n%.300s", sh, out)
		}
	}
	if _, _, code := e.run("", "completion", "powershell"); code == 0 {
		t.Errorf("completion powershell: exit 0")
	}
	complete := func(args ...string) []string {
		t.Helper()
		out := e.ok(append([]string{"__complete"}, args...)...)
		lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		// The last line is the directive (":4").
		return lines[:len(lines)-1]
	}
	// No state dir: nothing, and none is created.
	if got := complete("sandbox", "status", ""); len(got) != 0 {
		t.Errorf("no state dir: %q", got)
	}
	if _, err := os.Stat(e.state); err == nil {
		t.Errorf("completion created the state dir")
	}
	e.ok("office", "channel-kind", "slack/C0123ABC", "im")
	e.ok("office", "channel-kind", "slack/C0999", "im")
	e.ok("office", "channel-kind", "telegram/-100200", "im")
	all := []string{"slack/C0123ABC", "slack/C0999", "telegram/-100200"}
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"sandbox", "status", ""}, all},
		{[]string{"office", "show", "sl"}, all[:2]},
		{[]string{"door", "set", "tele"}, all[2:]},
		{[]string{"vault", "ls", "slack/C01"}, all[:1]},
		{[]string{"vault", "ls", "--user", "U042", ""}, nil},
		{[]string{"office", "show", "slack/C0123ABC", ""}, nil},
		{[]string{"exec", "--conversation", "slack/"}, all[:2]},
		{[]string{"files", "ls", "--conversation", ""}, all},
		{[]string{"exec", "--sandbox", ""}, modeWords},
		{[]string{"exec", "--sandbox", "g"}, []string{"gondolin:default"}},
		{[]string{"completion", ""}, []string{"bash", "zsh", "fish"}},
	} {
		got := complete(c.args...)
		if !slices.Equal(got, c.want) && !(len(got) == 0 && len(c.want) == 0) {
			t.Errorf("__complete %q: %q, want %q", c.args, got, c.want)
		}
	}
}

// TestCompletion_ModeWords: every mode completion offers parses, or is a
// prefix its target completes.
func TestCompletion_ModeWords(t *testing.T) {
	for _, m := range modeWords {
		if strings.HasSuffix(m, ":") {
			m += "x"
		}
		if _, err := sandbox.ParseMode(m); err != nil {
			t.Errorf("%s: %v", m, err)
		}
	}
}
