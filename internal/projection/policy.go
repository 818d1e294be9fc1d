package projection

import (
	"fmt"
	"slices"
	"strings"

	"github.com/hutchsandbox/hutch/internal/errdefs"
)

// DoorPolicy says whether a runtime is limited to its own office.
type DoorPolicy string

// The door policies.
const (
	// DoorIsolated: the runtime sees only the conversation's office.
	DoorIsolated DoorPolicy = "isolated"
	// DoorTrusted: the runtime also sees shared parts of the workspace.
	DoorTrusted DoorPolicy = "trusted"
)

// Layout says which parts of the workspace a trusted runtime sees.
type Layout string

// The layouts.
const (
	// LayoutConversation: only the office (the layout of isolated).
	LayoutConversation Layout = "conversation"
	// LayoutSharedSupport: the office plus shared MEMORY.md, skills/ and events/.
	LayoutSharedSupport Layout = "shared-support"
	// LayoutFull: the entire workspace root, every conversation's office included.
	LayoutFull Layout = "full"
)

// Visibility says whether shared memory is writable from the runtime. It
// only matters for the shared-support layout.
type Visibility string

// The visibilities.
const (
	// VisibilityPublic: shared MEMORY.md is read-write.
	VisibilityPublic Visibility = "public"
	// VisibilityPrivate: shared MEMORY.md is read-only.
	VisibilityPrivate Visibility = "private"
)

// Policy is an effective, normalized door policy. Only the four values
// below are reachable through Resolve and Normalize.
type Policy struct {
	DoorPolicy DoorPolicy
	Layout     Layout
	Visibility Visibility
}

// The four reachable policies.
var (
	PolicyIsolated      = Policy{DoorIsolated, LayoutConversation, VisibilityPublic}
	PolicySharedPublic  = Policy{DoorTrusted, LayoutSharedSupport, VisibilityPublic}
	PolicySharedPrivate = Policy{DoorTrusted, LayoutSharedSupport, VisibilityPrivate}
	PolicyFull          = Policy{DoorTrusted, LayoutFull, VisibilityPublic}
)

// String renders the policy the way operators read it in the docs and in
// `door` output: "isolated / conversation / public".
func (p Policy) String() string {
	return fmt.Sprintf("%s / %s / %s", p.DoorPolicy, p.Layout, p.Visibility)
}

// Isolated reports whether the runtime must be limited to its office; a
// mode that cannot enforce that refuses to run.
func (p Policy) Isolated() bool { return p.DoorPolicy == DoorIsolated }

// ReadOnlyMemory reports whether shared MEMORY.md must be read-only; a mode
// that cannot mount it read-only refuses to run.
func (p Policy) ReadOnlyMemory() bool {
	return p.DoorPolicy == DoorTrusted && p.Layout == LayoutSharedSupport && p.Visibility == VisibilityPrivate
}

// DoorWord is the CLI door word that selects p ("isolated", "shared",
// "shared-private", "full"), or "" for a policy no word selects.
func (p Policy) DoorWord() string {
	switch p {
	case PolicyIsolated:
		return "isolated"
	case PolicySharedPublic:
		return "shared"
	case PolicySharedPrivate:
		return "shared-private"
	case PolicyFull:
		return "full"
	}
	return ""
}

// Setting is the JSON value of sandbox.workspace in a settings file. Empty
// fields are unset: they fall through to the global setting when merging
// and to the defaults when normalizing.
type Setting struct {
	DoorPolicy string `json:"doorPolicy,omitempty"`
	Layout     string `json:"layout,omitempty"`
	Visibility string `json:"visibility,omitempty"`
}

// Validate reports the first field holding a value outside its set, with
// class errdefs.ErrInvalid. Empty fields are valid (unset).
func (s Setting) Validate() error {
	fields := []struct {
		name, value string
		allowed     []string
	}{
		{"doorPolicy", s.DoorPolicy, []string{string(DoorIsolated), string(DoorTrusted)}},
		{"layout", s.Layout, []string{string(LayoutConversation), string(LayoutSharedSupport), string(LayoutFull)}},
		{"visibility", s.Visibility, []string{string(VisibilityPublic), string(VisibilityPrivate)}},
	}
	for _, f := range fields {
		if f.value == "" || slices.Contains(f.allowed, f.value) {
			continue
		}
		return errdefs.New(errdefs.ErrInvalid, fmt.Sprintf(
			"sandbox.workspace.%s must be %s, not %q", f.name, quotedList(f.allowed, "or"), f.value))
	}
	return nil
}

// Merge overlays conversation on global leaf by leaf: a field set in the
// conversation setting wins, an unset one falls through to global. It
// returns nil when both are nil, so "no setting anywhere" stays
// distinguishable from "an empty setting", which normalizes to isolated.
func Merge(global, conversation *Setting) *Setting {
	if global == nil && conversation == nil {
		return nil
	}
	var out Setting
	if global != nil {
		out = *global
	}
	if conversation != nil {
		if conversation.DoorPolicy != "" {
			out.DoorPolicy = conversation.DoorPolicy
		}
		if conversation.Layout != "" {
			out.Layout = conversation.Layout
		}
		if conversation.Visibility != "" {
			out.Visibility = conversation.Visibility
		}
	}
	return &out
}

// Normalize turns a (merged) setting into one of the four reachable
// policies, the way the reference does: door policy defaults to isolated
// and isolated ignores layout and visibility; trusted means full only when
// layout says full, otherwise shared-support; visibility defaults to public
// and full ignores it. Invalid values are an error (ErrInvalid) rather
// than a default, so a typo never widens what a runtime sees.
func Normalize(s Setting) (Policy, error) {
	if err := s.Validate(); err != nil {
		return Policy{}, err
	}
	if s.DoorPolicy != string(DoorTrusted) {
		return PolicyIsolated, nil
	}
	if s.Layout == string(LayoutFull) {
		return PolicyFull, nil
	}
	if s.Visibility == string(VisibilityPrivate) {
		return PolicySharedPrivate, nil
	}
	return PolicySharedPublic, nil
}

// quotedList renders ["a" "b" "c"] as `"a", "b" or "c"`.
func quotedList(items []string, conj string) string {
	q := make([]string, len(items))
	for i, it := range items {
		q[i] = fmt.Sprintf("%q", it)
	}
	return plainList(q, conj)
}

// plainList renders [a b c] as "a, b or c".
func plainList(items []string, conj string) string {
	switch len(items) {
	case 0:
		return ""
	case 1:
		return items[0]
	}
	return strings.Join(items[:len(items)-1], ", ") + " " + conj + " " + items[len(items)-1]
}
