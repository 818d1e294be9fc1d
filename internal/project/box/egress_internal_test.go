package box

import (
	"testing"

	"github.com/hutchsandbox/hutch/internal/project"
)

// TestNetworkText pins the Network line of status, from the settings as
// `hutch project` resolves them.
func TestNetworkText(t *testing.T) {
	t.Parallel()
	for settings, want := range map[string]string{
		`{}`:                               "open",
		`{"sandbox-network": "bridge"}`:    "open",
		`{"sandbox-network": "host"}`:      "open, on the host's network (sandbox-network host)",
		`{"sandbox-network": "allowlist"}`: "allowlist (no host listed: every connection out is refused)",
		`{"sandbox-network": "none", "sandbox-network-allow": "github.com"}`:                   "none (hutch's egress proxy refuses every connection out)",
		`{"sandbox-network": "allowlist", "sandbox-network-allow": "github.com, *.npmjs.org"}`: "allowlist (github.com, *.npmjs.org)",
	} {
		s, notes, err := project.ParseSettings("settings.json", []byte(settings))
		if err != nil || len(notes) > 0 {
			t.Fatalf("settings %s: %v %q", settings, err, notes)
		}
		spec, err := project.Resolve(project.Input{Project: "/srv/code/api", HostUID: 1000, HostGID: 1000, Settings: project.Effective(s, "/srv/code/api"), Flavor: project.FlavorDocker})
		if err != nil {
			t.Fatal(err)
		}
		if got := networkText(spec); got != want {
			t.Errorf("settings %s: networkText = %q, want %q", settings, got, want)
		}
	}
}

// TestContainerRelays: only a container on no network whose agent was
// started with --egress goes out through the relay; one with a network
// of its own is refused under allowlist and none, whatever its agent.
func TestContainerRelays(t *testing.T) {
	t.Parallel()
	agentArgs := []string{agentPath, "agent", "--init", "--egress", project.EgressAddr}
	for _, tt := range []struct {
		st        containerState
		relays    bool
		refused   bool // under allowlist
		openNoted bool // under open
	}{
		{containerState{networkMode: "none", entrypoint: agentArgs}, true, false, true},
		{containerState{networkMode: "none", entrypoint: agentArgs[:3]}, false, false, false},
		{containerState{networkMode: "bridge", entrypoint: agentArgs}, false, true, false},
		{containerState{networkMode: "host", entrypoint: agentArgs[:3]}, false, true, false},
	} {
		if got := containerRelays(tt.st); got != tt.relays {
			t.Errorf("containerRelays(%s, %q) = %v", tt.st.networkMode, tt.st.entrypoint, got)
		}
		b := &Box{spec: project.Spec{Name: "hutch-sbx-x", Egress: "allowlist"}}
		if _, err := b.checkEgress(tt.st); (err != nil) != tt.refused {
			t.Errorf("checkEgress(%s, %q) under allowlist: %v", tt.st.networkMode, tt.st.entrypoint, err)
		}
		b.spec.Egress = "open"
		if note, err := b.checkEgress(tt.st); err != nil || (note != "") != tt.openNoted {
			t.Errorf("checkEgress(%s, %q) under open: %q, %v", tt.st.networkMode, tt.st.entrypoint, note, err)
		}
	}
}
