package cli

import (
	"strings"
	"testing"
)

// TestGroup_UnknownSubcommand: a word a command group does not know fails
// with exit 2 and the names it could have meant, as the top level does;
// before, the group printed its help and exited 0.
func TestGroup_UnknownSubcommand(t *testing.T) {
	e := newEnv(t)
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"project", "upp"}, "hutch: unknown command \"upp\" for \"hutch project\"\n\nDid you mean this?\n\tmcp\n\tup\nRun 'hutch project --help' for usage.\n"},
		{[]string{"office", "ls"}, "hutch: unknown command \"ls\" for \"hutch office\"\n\nDid you mean this?\n\tlist\nRun 'hutch office --help' for usage.\n"},
		{[]string{"microvm", "image", "biuld"}, "hutch: unknown command \"biuld\" for \"hutch microvm image\"\n\nDid you mean this?\n\tbuild\nRun 'hutch microvm image --help' for usage.\n"},
		{[]string{"vault", "frobnicate"}, "hutch: unknown command \"frobnicate\" for \"hutch vault\"\nRun 'hutch vault --help' for usage.\n"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, "_"), func(t *testing.T) {
			out, errOut, code := e.run("", tt.args...)
			if code != 2 || out != "" || errOut != tt.want {
				t.Errorf("exit %d, stdout %q, stderr %q; want 2, \"\", %q", code, out, errOut, tt.want)
			}
		})
	}
	// A group alone still shows its help.
	if out := e.ok("office"); !strings.Contains(out, "Available Commands:") {
		t.Errorf("hutch office printed %q; want its help", out)
	}
}

// TestNegativeIDs: Telegram's group ids are negative; they are taken as
// ids wherever an id is an argument, with no "--" first. Before, flag
// parsing refused them as "unknown shorthand flag".
func TestNegativeIDs(t *testing.T) {
	e := newEnv(t)
	want := key(t, "telegram", "-1001234567890") + "\n"
	for _, args := range [][]string{
		{"office", "key", "telegram", "-1001234567890"},
		{"office", "key", "telegram/-1001234567890"},
		{"office", "key", "--", "telegram", "-1001234567890"},
		{"--log-level", "warn", "office", "key", "telegram", "-1001234567890"},
	} {
		if out := e.ok(args...); out != want {
			t.Errorf("hutch %s = %q, want %q", strings.Join(args, " "), out, want)
		}
	}
	// claim takes the raw id first: the claim is refused for what it is
	// (no raw-id directory of that name), not for flag parsing.
	e.ok("office", "platforms", "telegram,discord")
	_, errOut, code := e.run("", "office", "claim", "-1001234567890", "telegram")
	if code != 1 || strings.Contains(errOut, "flag") || !strings.Contains(errOut, "-1001234567890") {
		t.Errorf("office claim -1001234567890 telegram: exit %d, stderr %q; want the claim itself judged", code, errOut)
	}
	// A negative number given as a flag's value stays that value, and a
	// real unknown flag is still one.
	if _, errOut, code := e.run("", "office", "key", "-x", "telegram", "1"); code != 2 || !strings.Contains(errOut, "unknown shorthand flag: 'x'") {
		t.Errorf("office key -x: exit %d, stderr %q; want 2 and unknown shorthand flag", code, errOut)
	}
}

// TestOfficeKey_OneOrTwoWords: office key takes slack/C1, as every other
// command does, and slack C1.
func TestOfficeKey_OneOrTwoWords(t *testing.T) {
	e := newEnv(t)
	want := key(t, "slack", "C1") + "\n"
	if a, b := e.ok("office", "key", "slack/C1"), e.ok("office", "key", "slack", "C1"); a != want || b != want {
		t.Errorf("office key slack/C1 = %q, slack C1 = %q; want %q", a, b, want)
	}
	if _, errOut, code := e.run("", "office", "key", "slackC1"); code != 1 || !strings.Contains(errOut, "<platform>/<conversation-id>") {
		t.Errorf("office key slackC1: exit %d, stderr %q", code, errOut)
	}
}
