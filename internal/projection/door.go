package projection

import (
	"fmt"
	"strings"

	"github.com/hutchsandbox/hutch/internal/errdefs"
)

// DoorWords are the words `door` accepts, in the order help text lists
// them. Aliases (shared-support, shared-public) are accepted but not listed.
var DoorWords = []string{"default", "isolated", "shared", "shared-private", "full"}

// ParseDoorWord turns a CLI/chat door word into the sandbox.workspace
// setting to store. "default" returns nil: clear the override so the
// policy derives again. Words are matched case-insensitively after
// trimming white space; anything else is ErrInvalid.
func ParseDoorWord(w string) (*Setting, error) {
	switch strings.ToLower(strings.TrimSpace(w)) {
	case "default":
		return nil, nil
	case "isolated":
		return &Setting{DoorPolicy: string(DoorIsolated)}, nil
	case "shared", "shared-support", "shared-public":
		return &Setting{DoorPolicy: string(DoorTrusted), Layout: string(LayoutSharedSupport), Visibility: string(VisibilityPublic)}, nil
	case "shared-private":
		return &Setting{DoorPolicy: string(DoorTrusted), Layout: string(LayoutSharedSupport), Visibility: string(VisibilityPrivate)}, nil
	case "full":
		return &Setting{DoorPolicy: string(DoorTrusted), Layout: string(LayoutFull)}, nil
	}
	return nil, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf(
		"Unknown door policy %q; use %s", w, plainList(DoorWords, "or")))
}
