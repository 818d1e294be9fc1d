package office_test

import (
	"testing"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/office"
)

func TestParsePlatform(t *testing.T) {
	for _, p := range office.Platforms {
		t.Run(string(p), func(t *testing.T) {
			got, err := office.ParsePlatform(string(p))
			checkErr(t, err, "", nil)
			if got != p {
				t.Errorf("ParsePlatform(%q) got %q", p, got)
			}
		})
	}
	bad := []struct {
		name, in, want string
	}{
		{"unknown", "matrix", `Unsupported platform: "matrix" (use slack, discord, telegram, github or web)`},
		{"empty", "", `Unsupported platform: "" (use slack, discord, telegram, github or web)`},
		{"case_matters", "Slack", `Unsupported platform: "Slack" (use slack, discord, telegram, github or web)`},
		{"control_quoted", "a\nb", `Unsupported platform: "a\nb" (use slack, discord, telegram, github or web)`},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			_, err := office.ParsePlatform(tc.in)
			checkErr(t, err, tc.want, errdefs.ErrInvalid)
		})
	}
}

func TestPlatforms_Listed(t *testing.T) {
	want := []office.Platform{"slack", "discord", "telegram", "github", "web"}
	if len(office.Platforms) != len(want) {
		t.Fatalf("Platforms got %v, want %v", office.Platforms, want)
	}
	for i := range want {
		if office.Platforms[i] != want[i] {
			t.Errorf("Platforms[%d] got %q, want %q", i, office.Platforms[i], want[i])
		}
	}
}
