package office

import (
	"fmt"
	"strings"

	"github.com/hutchsandbox/hutch/internal/errdefs"
)

// Platform is a chat platform hutch serves conversations for. Its string
// is part of every office key, so the values are fixed forever.
type Platform string

// The platforms hutch knows.
const (
	PlatformSlack    Platform = "slack"
	PlatformDiscord  Platform = "discord"
	PlatformTelegram Platform = "telegram"
	PlatformGitHub   Platform = "github"
	PlatformWeb      Platform = "web"
)

// Platforms lists every platform, in the order help texts show them. It is
// the one list the parser, the key grammar and the registry validation
// derive from, so adding a platform is a change here only.
var Platforms = []Platform{PlatformSlack, PlatformDiscord, PlatformTelegram, PlatformGitHub, PlatformWeb}

// Valid reports whether p is one of Platforms.
func (p Platform) Valid() bool {
	for _, q := range Platforms {
		if p == q {
			return true
		}
	}
	return false
}

// platformList renders Platforms as "a, b, c or d" for error texts.
func platformList() string {
	names := make([]string, len(Platforms))
	for i, p := range Platforms {
		names[i] = string(p)
	}
	if len(names) == 1 {
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// ParsePlatform parses a platform name exactly as written (no case folding:
// the name is hashed into office keys, so "Slack" must not quietly become
// a different spelling of "slack"). Errors are of class errdefs.ErrInvalid.
func ParsePlatform(s string) (Platform, error) {
	if p := Platform(s); p.Valid() {
		return p, nil
	}
	return "", errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("Unsupported platform: %q (use %s)", s, platformList()))
}
