package settings_test

import (
	"path/filepath"
	"testing"

	"github.com/hutchsandbox/hutch/internal/netpolicy"
	"github.com/hutchsandbox/hutch/internal/settings"
)

func TestResolveNetwork(t *testing.T) {
	allow := []string{"github.com"}
	testCases := []struct {
		name         string
		global, conv settings.Runtime
		microVM      bool
		want         string
	}{
		{"unset container", settings.Runtime{}, settings.Runtime{}, false, "open (a route to anywhere), the default"},
		{"unset microVM", settings.Runtime{}, settings.Runtime{}, true, "none (no route), the default"},
		{"unset microVM with hosts", settings.Runtime{NetworkAllow: allow}, settings.Runtime{}, true, "allowlist (github.com), the default"},
		{"global", settings.Runtime{Network: netpolicy.ModeAllowlist, NetworkAllow: allow}, settings.Runtime{}, false, "allowlist (github.com), from the global settings"},
		{"conversation wins", settings.Runtime{Network: netpolicy.ModeOpen}, settings.Runtime{Network: netpolicy.ModeNone}, false, "none (no route), from the conversation's settings"},
		{"conversation hosts win", settings.Runtime{Network: netpolicy.ModeAllowlist, NetworkAllow: allow}, settings.Runtime{NetworkAllow: []string{"*.npmjs.org", "x.org:8443"}}, false, "allowlist (*.npmjs.org, x.org:8443), from the global settings"},
		{"allowlist without hosts", settings.Runtime{Network: netpolicy.ModeAllowlist}, settings.Runtime{}, false, "allowlist (no host listed: nothing gets through), from the global settings"},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			if got := settings.ResolveNetwork(tc.global, tc.conv, tc.microVM).Describe(); got != tc.want {
				t.Errorf("Describe() = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestNetworkPolicy(t *testing.T) {
	n := settings.Network{Mode: netpolicy.ModeAllowlist, Allow: []string{"github.com"}}
	p := n.Policy()
	if !p.Allows("github.com", 443) || p.Allows("example.com", 443) {
		t.Errorf("allowlist policy: github.com %v, example.com %v", p.Allows("github.com", 443), p.Allows("example.com", 443))
	}
	if (settings.Network{Mode: netpolicy.ModeNone, Allow: []string{"github.com"}}).Policy().Allows("github.com", 443) {
		t.Error("none lets a listed host through")
	}
	if !(settings.Network{Mode: netpolicy.ModeOpen}).Policy().Allows("example.com", 443) {
		t.Error("open refuses a public name")
	}
}

func TestSetRuntime_Network(t *testing.T) {
	path := filepath.Join(t.TempDir(), "settings.json")
	if err := settings.SetRuntime(path, "sandbox.network", "allowlist"); err != nil {
		t.Fatal(err)
	}
	if err := settings.SetRuntime(path, "sandbox.network.allow", "github.com,*.npmjs.org"); err != nil {
		t.Fatal(err)
	}
	r, err := settings.LoadRuntime(path)
	if err != nil {
		t.Fatal(err)
	}
	if r.Network != netpolicy.ModeAllowlist || len(r.NetworkAllow) != 2 {
		t.Errorf("loaded %q %v", r.Network, r.NetworkAllow)
	}
	if err := settings.SetRuntime(path, "sandbox.network", "wide-open"); err == nil {
		t.Error("an unknown mode was accepted")
	}
	if err := settings.SetRuntime(path, "sandbox.network", ""); err != nil {
		t.Fatal(err)
	}
	if r, _ := settings.LoadRuntime(path); r.Network != "" || len(r.NetworkAllow) != 2 {
		t.Errorf("after clearing the mode: %q %v", r.Network, r.NetworkAllow)
	}
}
