package cli

import (
	"strings"
	"testing"
)

// TestOfficeShow_ManagedProjection: office show says, in the seed's own
// words, whether the mode manages the projection, for every mode.
func TestOfficeShow_ManagedProjection(t *testing.T) {
	for _, tt := range []struct {
		mode, want string
	}{
		{"host", "managedProjection: false"},
		{"container:box", "managedProjection: false"},
		{"cloudflare:sbx-1", "managedProjection: false"},
		{"image:debian:12", "managedProjection: true"},
		{"gondolin:default", "managedProjection: true"},
		{"kube:debian:12", "managedProjection: true"},
	} {
		t.Run(strings.ReplaceAll(tt.mode, ":", "_"), func(t *testing.T) {
			e := newEnv(t)
			out := e.ok("office", "show", "slack/C1", "--sandbox", tt.mode)
			if !strings.Contains(out, "\nManaged:       "+tt.want+"\n") {
				t.Errorf("office show --sandbox %s lacks %q:\n%s", tt.mode, tt.want, out)
			}
		})
	}
}

// TestOfficeShow_KindsDeriveOnlyOnSlack: a public or private channel kind
// recorded for a platform other than Slack derives the isolated office,
// and office show says why; an explicit setting still chooses a door.
func TestOfficeShow_KindsDeriveOnlyOnSlack(t *testing.T) {
	for _, tt := range []struct {
		addr, kind, want string
	}{
		{"slack/C1", "public_channel", "trusted / shared-support / public (from channel kind public_channel)"},
		{"discord/C1", "public_channel", "isolated / conversation / public (from channel kind public_channel on discord, a platform without recorded visibility)"},
		{"telegram/G1", "private_channel", "isolated / conversation / public (from channel kind private_channel on telegram, a platform without recorded visibility)"},
		{"github/o-r-1", "public_channel", "isolated / conversation / public (from channel kind public_channel on github, a platform without recorded visibility)"},
		{"web/w1", "private_channel", "isolated / conversation / public (from channel kind private_channel on web, a platform without recorded visibility)"},
	} {
		t.Run(strings.ReplaceAll(tt.addr, "/", "_"), func(t *testing.T) {
			e := newEnv(t)
			e.ok("office", "channel-kind", tt.addr, tt.kind)
			out := e.ok("office", "show", tt.addr, "--sandbox", "image:debian:12")
			if !strings.Contains(out, "Door policy:   "+tt.want+"\n") {
				t.Errorf("office show %s lacks %q:\n%s", tt.addr, tt.want, out)
			}
		})
	}
	e := newEnv(t)
	e.ok("office", "channel-kind", "discord/C1", "public_channel")
	e.ok("door", "set", "discord/C1", "shared")
	out := e.ok("office", "show", "discord/C1", "--sandbox", "image:debian:12")
	if want := "Door policy:   trusted / shared-support / public (from conversation setting)\n"; !strings.Contains(out, want) {
		t.Errorf("an explicit setting on discord lacks %q:\n%s", want, out)
	}
}
