package projection

import (
	"fmt"
	"strings"

	"github.com/hutchsandbox/hutch/internal/errdefs"
)

// ChannelKind is the platform's recorded kind of a conversation's channel.
// It is what derives the door policy when no setting chooses one.
type ChannelKind string

// The channel kinds a platform adapter records.
const (
	ChannelPublic   ChannelKind = "public_channel"
	ChannelPrivate  ChannelKind = "private_channel"
	ChannelIM       ChannelKind = "im"
	ChannelExternal ChannelKind = "external"
)

// ChannelKinds lists the kinds in the order help and error texts name them.
var ChannelKinds = []ChannelKind{ChannelPublic, ChannelPrivate, ChannelIM, ChannelExternal}

// ParseChannelKind accepts exactly one of the recorded kinds; anything else
// is ErrInvalid naming the kinds.
func ParseChannelKind(s string) (ChannelKind, error) {
	for _, k := range ChannelKinds {
		if s == string(k) {
			return k, nil
		}
	}
	names := make([]string, len(ChannelKinds))
	for i, k := range ChannelKinds {
		names[i] = string(k)
	}
	return "", errdefs.New(errdefs.ErrInvalid, fmt.Sprintf(
		"Unknown channel kind %q; use %s", s, plainList(names, "or")))
}

// ChannelState is what a caller found when it read the conversation's
// recorded channel kind: the file's content, whether the file exists, and
// whether reading it failed. Resolve decides what each case means so the
// caller does not have to.
type ChannelState struct {
	// Kind is the content read (surrounding white space is ignored).
	Kind string
	// Present: a channel kind was recorded.
	Present bool
	// Unreadable: a record may exist but could not be read.
	Unreadable bool
	// Platform is the conversation's platform. Only VisibilityPlatform's
	// recorded kinds derive a door; any other platform's (or none) derive
	// the isolated office.
	Platform string
}

// VisibilityPlatform is the one platform whose recorded channel kinds
// derive a trusted door: the seed trusts Slack's channel visibility and
// names "platforms without recorded visibility" among those that derive
// isolated. Another platform's adapter may record the same words, but
// what they mean there (who can join, who reads along) was never checked
// against the shared-support layouts, so they need an explicit setting.
const VisibilityPlatform = "slack"

// Source says where a Decision's policy came from, so status output can
// explain it ("why is this conversation isolated?").
type Source int

// The sources of a decision.
const (
	// SourceDefault: no setting and no recorded channel kind.
	SourceDefault Source = iota
	// SourceChannelKind: derived from a recorded, known channel kind.
	SourceChannelKind
	// SourceUnknownChannelKind: a channel kind was recorded but is not one we know.
	SourceUnknownChannelKind
	// SourceUnreadableChannelKind: the channel kind could not be read.
	SourceUnreadableChannelKind
	// SourceGlobal: the global sandbox.workspace setting.
	SourceGlobal
	// SourceConversation: the conversation's sandbox.workspace setting.
	SourceConversation
	// SourceBoth: the conversation's setting merged over the global one.
	SourceBoth
	// SourceNoVisibility: a known channel kind was recorded on a platform
	// whose kinds derive no door (not VisibilityPlatform).
	SourceNoVisibility
)

var sourceNames = [...]string{
	SourceDefault:               "no channel kind recorded",
	SourceChannelKind:           "channel kind",
	SourceUnknownChannelKind:    "unknown channel kind",
	SourceUnreadableChannelKind: "unreadable channel kind",
	SourceGlobal:                "global setting",
	SourceConversation:          "conversation setting",
	SourceBoth:                  "conversation setting over global setting",
	SourceNoVisibility:          "a platform without recorded visibility",
}

// String names the source without detail; Decision.Origin adds the kind.
func (s Source) String() string {
	if s < 0 || int(s) >= len(sourceNames) {
		return fmt.Sprintf("Source(%d)", int(s))
	}
	return sourceNames[s]
}

// UnreadableWarning is the warning a Decision carries when the channel kind
// could not be read and the isolated policy was chosen instead.
const UnreadableWarning = "Could not read platform channel kind; falling back to isolated workspace"

// Decision is an effective door policy and why it was chosen.
type Decision struct {
	Policy Policy
	Source Source
	// ChannelKind is the recorded word (trimmed) when Source is
	// SourceChannelKind or SourceNoVisibility (then one of ChannelKinds),
	// or SourceUnknownChannelKind.
	ChannelKind ChannelKind
	// Platform is the platform whose kinds derive no door when Source is
	// SourceNoVisibility ("" if the caller named none).
	Platform string
	// Warning is a text to log once, or "".
	Warning string
}

// Origin renders the source with its detail, e.g. "channel kind
// public_channel" or `unknown channel kind "board"`.
func (d Decision) Origin() string {
	switch d.Source {
	case SourceChannelKind:
		return "channel kind " + string(d.ChannelKind)
	case SourceUnknownChannelKind:
		return fmt.Sprintf("unknown channel kind %q", string(d.ChannelKind))
	case SourceNoVisibility:
		if d.Platform == "" {
			return "channel kind " + string(d.ChannelKind) + " on " + d.Source.String()
		}
		return "channel kind " + string(d.ChannelKind) + " on " + d.Platform + ", " + d.Source.String()
	}
	return d.Source.String()
}

// Resolve decides a conversation's effective door policy.
//
// Any sandbox.workspace setting (global or conversation; an empty one
// counts) wins and is normalized after a leaf-by-leaf merge; an invalid one
// is an ErrFailedPrecondition error, because running with a guessed policy
// could expose more than the operator chose. Without settings the policy
// derives from the channel kind: public channels get read-write shared
// support, private channels read-only shared memory, and everything else
// (DMs, external channels, unknown words, nothing recorded, unreadable,
// any kind recorded on a platform other than VisibilityPlatform) the
// isolated office.
func Resolve(global, conversation *Setting, ch ChannelState) (Decision, error) {
	if merged := Merge(global, conversation); merged != nil {
		for _, s := range []struct {
			name string
			s    *Setting
		}{{"global", global}, {"conversation", conversation}} {
			if s.s == nil {
				continue
			}
			if err := s.s.Validate(); err != nil {
				return Decision{}, errdefs.New(errdefs.ErrFailedPrecondition, fmt.Sprintf(
					"Cannot resolve workspace projection: settings are malformed: %s setting: %v", s.name, err))
			}
		}
		p, err := Normalize(*merged)
		if err != nil { // unreachable: both inputs validated
			return Decision{}, errdefs.New(errdefs.ErrFailedPrecondition,
				"Cannot resolve workspace projection: settings are malformed: "+err.Error())
		}
		src := SourceBoth
		switch {
		case conversation == nil:
			src = SourceGlobal
		case global == nil:
			src = SourceConversation
		}
		return Decision{Policy: p, Source: src}, nil
	}
	switch {
	case ch.Unreadable:
		return Decision{Policy: PolicyIsolated, Source: SourceUnreadableChannelKind, Warning: UnreadableWarning}, nil
	case !ch.Present:
		return Decision{Policy: PolicyIsolated, Source: SourceDefault}, nil
	}
	word := strings.TrimSpace(ch.Kind)
	kind, err := ParseChannelKind(word)
	if err != nil {
		return Decision{Policy: PolicyIsolated, Source: SourceUnknownChannelKind, ChannelKind: ChannelKind(word)}, nil
	}
	if ch.Platform != VisibilityPlatform {
		return Decision{Policy: PolicyIsolated, Source: SourceNoVisibility, ChannelKind: kind, Platform: ch.Platform}, nil
	}
	d := Decision{Policy: PolicyIsolated, Source: SourceChannelKind, ChannelKind: kind}
	switch kind {
	case ChannelPublic:
		d.Policy = PolicySharedPublic
	case ChannelPrivate:
		d.Policy = PolicySharedPrivate
	}
	return d, nil
}
