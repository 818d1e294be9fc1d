package projection_test

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/projection"
)

func TestParseChannelKind(t *testing.T) {
	tests := []struct {
		in      string
		want    projection.ChannelKind
		wantErr string
	}{
		{"public_channel", projection.ChannelPublic, ""},
		{"private_channel", projection.ChannelPrivate, ""},
		{"im", projection.ChannelIM, ""},
		{"external", projection.ChannelExternal, ""},
		{"dm", "", `Unknown channel kind "dm"; use public_channel, private_channel, im or external`},
		{"IM", "", `Unknown channel kind "IM"; use public_channel, private_channel, im or external`},
		{"", "", `Unknown channel kind ""; use public_channel, private_channel, im or external`},
	}
	for _, tt := range tests {
		t.Run("kind_"+tt.in, func(t *testing.T) {
			got, err := projection.ParseChannelKind(tt.in)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr || !errors.Is(err, errdefs.ErrInvalid) {
					t.Fatalf("ParseChannelKind(%q) error = %v, want ErrInvalid %q", tt.in, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ParseChannelKind(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestResolve(t *testing.T) {
	present := func(kind string) projection.ChannelState {
		return projection.ChannelState{Kind: kind, Present: true, Platform: "slack"}
	}
	on := func(platform, kind string) projection.ChannelState {
		return projection.ChannelState{Kind: kind, Present: true, Platform: platform}
	}
	tests := []struct {
		name                 string
		global, conversation *projection.Setting
		ch                   projection.ChannelState
		want                 projection.Decision
		origin               string
	}{
		{
			name:   "public_channel_shared_public",
			ch:     present("public_channel\n"),
			want:   projection.Decision{Policy: projection.PolicySharedPublic, Source: projection.SourceChannelKind, ChannelKind: projection.ChannelPublic},
			origin: "channel kind public_channel",
		},
		{
			name:   "private_channel_shared_private",
			ch:     present("private_channel"),
			want:   projection.Decision{Policy: projection.PolicySharedPrivate, Source: projection.SourceChannelKind, ChannelKind: projection.ChannelPrivate},
			origin: "channel kind private_channel",
		},
		{
			name:   "im_isolated",
			ch:     present("im\n"),
			want:   projection.Decision{Policy: projection.PolicyIsolated, Source: projection.SourceChannelKind, ChannelKind: projection.ChannelIM},
			origin: "channel kind im",
		},
		{
			name:   "external_isolated",
			ch:     present("external"),
			want:   projection.Decision{Policy: projection.PolicyIsolated, Source: projection.SourceChannelKind, ChannelKind: projection.ChannelExternal},
			origin: "channel kind external",
		},
		{
			// The seed trusts Slack's recorded visibility only: the same
			// word recorded for another platform derives nothing.
			name:   "public_channel_on_telegram_isolated",
			ch:     on("telegram", "public_channel"),
			want:   projection.Decision{Policy: projection.PolicyIsolated, Source: projection.SourceNoVisibility, ChannelKind: projection.ChannelPublic, Platform: "telegram"},
			origin: "channel kind public_channel on telegram, a platform without recorded visibility",
		},
		{
			name:   "private_channel_on_discord_isolated",
			ch:     on("discord", "private_channel"),
			want:   projection.Decision{Policy: projection.PolicyIsolated, Source: projection.SourceNoVisibility, ChannelKind: projection.ChannelPrivate, Platform: "discord"},
			origin: "channel kind private_channel on discord, a platform without recorded visibility",
		},
		{
			name:   "public_channel_no_platform_isolated",
			ch:     on("", "public_channel"),
			want:   projection.Decision{Policy: projection.PolicyIsolated, Source: projection.SourceNoVisibility, ChannelKind: projection.ChannelPublic},
			origin: "channel kind public_channel on a platform without recorded visibility",
		},
		{
			name:         "setting_beats_no_visibility",
			conversation: &projection.Setting{DoorPolicy: "trusted"},
			ch:           on("github", "public_channel"),
			want:         projection.Decision{Policy: projection.PolicySharedPublic, Source: projection.SourceConversation},
			origin:       "conversation setting",
		},
		{
			name:   "unknown_word_isolated",
			ch:     present("board\n"),
			want:   projection.Decision{Policy: projection.PolicyIsolated, Source: projection.SourceUnknownChannelKind, ChannelKind: "board"},
			origin: `unknown channel kind "board"`,
		},
		{
			name:   "empty_record_isolated",
			ch:     present(""),
			want:   projection.Decision{Policy: projection.PolicyIsolated, Source: projection.SourceUnknownChannelKind},
			origin: `unknown channel kind ""`,
		},
		{
			name:   "absent_isolated",
			ch:     projection.ChannelState{},
			want:   projection.Decision{Policy: projection.PolicyIsolated, Source: projection.SourceDefault},
			origin: "no channel kind recorded",
		},
		{
			name:   "unreadable_isolated_with_warning",
			ch:     projection.ChannelState{Kind: "public_channel", Present: true, Unreadable: true},
			want:   projection.Decision{Policy: projection.PolicyIsolated, Source: projection.SourceUnreadableChannelKind, Warning: "Could not read platform channel kind; falling back to isolated workspace"},
			origin: "unreadable channel kind",
		},
		{
			name:   "global_setting_beats_channel",
			global: &projection.Setting{DoorPolicy: "trusted", Layout: "full"},
			ch:     present("im"),
			want:   projection.Decision{Policy: projection.PolicyFull, Source: projection.SourceGlobal},
			origin: "global setting",
		},
		{
			name:         "conversation_setting_beats_channel",
			conversation: &projection.Setting{DoorPolicy: "isolated"},
			ch:           present("public_channel"),
			want:         projection.Decision{Policy: projection.PolicyIsolated, Source: projection.SourceConversation},
			origin:       "conversation setting",
		},
		{
			name:         "empty_conversation_setting_is_isolated",
			conversation: &projection.Setting{},
			ch:           present("public_channel"),
			want:         projection.Decision{Policy: projection.PolicyIsolated, Source: projection.SourceConversation},
			origin:       "conversation setting",
		},
		{
			name:         "setting_beats_unreadable_without_warning",
			conversation: &projection.Setting{DoorPolicy: "trusted"},
			ch:           projection.ChannelState{Unreadable: true},
			want:         projection.Decision{Policy: projection.PolicySharedPublic, Source: projection.SourceConversation},
			origin:       "conversation setting",
		},
		{
			name:         "both_merged_leaf_by_leaf",
			global:       &projection.Setting{DoorPolicy: "trusted", Layout: "shared-support"},
			conversation: &projection.Setting{Visibility: "private"},
			want:         projection.Decision{Policy: projection.PolicySharedPrivate, Source: projection.SourceBoth},
			origin:       "conversation setting over global setting",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := projection.Resolve(tt.global, tt.conversation, tt.ch)
			if err != nil {
				t.Fatalf("Resolve() error = %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Resolve() mismatch (-want +got):\n%s", diff)
			}
			if o := got.Origin(); o != tt.origin {
				t.Errorf("Origin() = %q, want %q", o, tt.origin)
			}
		})
	}
}

func TestResolve_InvalidSettingFailsClosed(t *testing.T) {
	tests := []struct {
		name                 string
		global, conversation *projection.Setting
		want                 string
	}{
		{
			"bad_global",
			&projection.Setting{DoorPolicy: "open"}, nil,
			`Cannot resolve workspace projection: settings are malformed: global setting: sandbox.workspace.doorPolicy must be "isolated" or "trusted", not "open"`,
		},
		{
			"bad_conversation",
			nil, &projection.Setting{DoorPolicy: "trusted", Visibility: "hidden"},
			`Cannot resolve workspace projection: settings are malformed: conversation setting: sandbox.workspace.visibility must be "public" or "private", not "hidden"`,
		},
		{
			// A valid conversation value must not hide an invalid global one.
			"bad_global_shadowed_by_conversation",
			&projection.Setting{Layout: "everything"}, &projection.Setting{Layout: "full", DoorPolicy: "trusted"},
			`Cannot resolve workspace projection: settings are malformed: global setting: sandbox.workspace.layout must be "conversation", "shared-support" or "full", not "everything"`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := projection.Resolve(tt.global, tt.conversation, projection.ChannelState{Kind: "public_channel", Present: true})
			if err == nil {
				t.Fatal("Resolve() error = nil, want failure")
			}
			if err.Error() != tt.want {
				t.Errorf("Resolve() error = %q, want %q", err, tt.want)
			}
			if !errors.Is(err, errdefs.ErrFailedPrecondition) {
				t.Errorf("Resolve() error class: errors.Is(err, ErrFailedPrecondition) = false")
			}
		})
	}
}

func TestSource_String(t *testing.T) {
	tests := []struct {
		name string
		s    projection.Source
		want string
	}{
		{"default", projection.SourceDefault, "no channel kind recorded"},
		{"channelkind", projection.SourceChannelKind, "channel kind"},
		{"unknownchannelkind", projection.SourceUnknownChannelKind, "unknown channel kind"},
		{"unreadablechannelkind", projection.SourceUnreadableChannelKind, "unreadable channel kind"},
		{"global", projection.SourceGlobal, "global setting"},
		{"conversation", projection.SourceConversation, "conversation setting"},
		{"both", projection.SourceBoth, "conversation setting over global setting"},
		{"out_of_range", projection.Source(99), "Source(99)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.s.String(); got != tt.want {
				t.Errorf("String() = %q, want %q", got, tt.want)
			}
		})
	}
}
