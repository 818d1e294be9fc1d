package cli

import (
	"strings"
	"testing"
)

// TestSandboxNetwork_Texts pins what hutch sandbox network says when it
// shows, sets, clears and refuses.
func TestSandboxNetwork_Texts(t *testing.T) {
	e := newEnv(t)
	steps := []struct {
		args []string
		want string
	}{
		{[]string{"sandbox", "network", "slack/C1", "--sandbox", "image:x"},
			"Network of slack/C1 in image:x: open (a route to anywhere), the default\n"},
		{[]string{"sandbox", "network", "slack/C1", "allowlist", "--allow", "github.com,*.npmjs.org", "--sandbox", "image:x"},
			"Network of slack/C1 set.\nEffective in image:x: allowlist (github.com, *.npmjs.org), from the conversation's settings\n"},
		{[]string{"sandbox", "network", "slack/C1", "--sandbox", "host"},
			"Network of slack/C1 in host: allowlist (github.com, *.npmjs.org), from the conversation's settings\nhost cannot enforce allowlist, so it refuses this conversation's commands; image:* and kube:* can.\n"},
		{[]string{"sandbox", "network", "slack/C1", "--allow", "gitlab.com", "--sandbox", "image:x"},
			"Network of slack/C1 set.\nEffective in image:x: allowlist (gitlab.com), from the conversation's settings\n"},
		{[]string{"sandbox", "network", "--global", "none"},
			"Global network set.\nEffective:     none (no route), from the global settings\n"},
		{[]string{"sandbox", "network", "slack/C1", "default", "--sandbox", "image:x"},
			"Network of slack/C1 set.\nEffective in image:x: none (no route), from the global settings\n"},
		{[]string{"sandbox", "network", "--global"},
			"Global network: none (no route), from the global settings\n"},
	}
	for _, s := range steps {
		if got := e.ok(s.args...); got != s.want {
			t.Errorf("hutch %s:\ngot  %q\nwant %q", strings.Join(s.args, " "), got, s.want)
		}
	}
	refusals := []struct {
		args []string
		want string
	}{
		{[]string{"sandbox", "network", "slack/C1", "wide"}, `sandbox.network "wide": use open, allowlist or none`},
		{[]string{"sandbox", "network", "slack/C1", "allowlist", "--allow", "https://github.com"}, `write the host only`},
		{[]string{"sandbox", "network"}, "Give a conversation and, to change it, a policy"},
		{[]string{"sandbox", "network", "--global", "slack/C1", "none"}, "With --global, give only the policy"},
	}
	for _, r := range refusals {
		_, errOut, code := e.run("", r.args...)
		if code == 0 || !strings.Contains(errOut, r.want) {
			t.Errorf("hutch %s: exit %d, stderr %q; want a refusal containing %q", strings.Join(r.args, " "), code, errOut, r.want)
		}
	}
}
