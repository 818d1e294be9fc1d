package settings_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/office"
	"github.com/hutchsandbox/hutch/internal/settings"
)

func TestPlatforms_RoundTripKeepsOtherKeys(t *testing.T) {
	path := filepath.Join(t.TempDir(), "settings.json")
	if err := os.WriteFile(path, []byte(`{"workspace": {"channelKind": "dm"}, "sandbox": {"cpus": "2"}, "other": 1}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if ps, err := settings.LoadPlatforms(path); err != nil || ps != nil {
		t.Fatalf("unset: %v %v", ps, err)
	}
	if err := settings.SetPlatforms(path, []office.Platform{office.PlatformTelegram, office.PlatformSlack}); err != nil {
		t.Fatal(err)
	}
	ps, err := settings.LoadPlatforms(path)
	if err != nil || !slices.Equal(ps, []office.Platform{office.PlatformSlack, office.PlatformTelegram}) {
		t.Fatalf("LoadPlatforms = %v, %v", ps, err)
	}
	data, _ := os.ReadFile(path)
	for _, k := range []string{`"other": 1`, `"cpus": "2"`, `"channelKind": "dm"`} {
		if !strings.Contains(string(data), k) {
			t.Errorf("rewrite lost %s:\n%s", k, data)
		}
	}
	if err := settings.SetPlatforms(path, nil); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(path); strings.Contains(string(data), "platforms") {
		t.Errorf("clearing left the key:\n%s", data)
	}
}

func TestPlatforms_Invalid(t *testing.T) {
	if _, err := settings.ParsePlatforms("slack,irc"); !errdefs.IsInvalid(err) || !strings.Contains(err.Error(), `Unsupported platform: "irc"`) {
		t.Errorf("ParsePlatforms: %v", err)
	}
	if ps, err := settings.ParsePlatforms(" discord, slack,,discord "); err != nil || settings.FormatPlatforms(ps) != "discord,slack" {
		t.Errorf("ParsePlatforms = %v, %v", ps, err)
	}
	for content, want := range map[string]string{
		`{"platforms": "slack"}`:          `"platforms" must be an array of platform names`,
		`{"platforms": ["slack", "irc"]}`: `"platforms": Unsupported platform: "irc"`,
	} {
		path := filepath.Join(t.TempDir(), "settings.json")
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := settings.LoadPlatforms(path)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: %v, want %q naming the file", content, err, want)
		}
	}
}
