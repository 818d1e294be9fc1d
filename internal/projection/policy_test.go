package projection_test

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/projection"
)

func TestPolicy_Methods(t *testing.T) {
	tests := []struct {
		name       string
		p          projection.Policy
		str        string
		isolated   bool
		readOnly   bool
		doorWord   string
		normalized bool
	}{
		{"isolated", projection.PolicyIsolated, "isolated / conversation / public", true, false, "isolated", true},
		{"shared_public", projection.PolicySharedPublic, "trusted / shared-support / public", false, false, "shared", true},
		{"shared_private", projection.PolicySharedPrivate, "trusted / shared-support / private", false, true, "shared-private", true},
		{"full", projection.PolicyFull, "trusted / full / public", false, false, "full", true},
		{"full_private_unnormalized", projection.Policy{DoorPolicy: projection.DoorTrusted, Layout: projection.LayoutFull, Visibility: projection.VisibilityPrivate}, "trusted / full / private", false, false, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.p.String(); got != tt.str {
				t.Errorf("String() = %q, want %q", got, tt.str)
			}
			if got := tt.p.Isolated(); got != tt.isolated {
				t.Errorf("Isolated() = %v, want %v", got, tt.isolated)
			}
			if got := tt.p.ReadOnlyMemory(); got != tt.readOnly {
				t.Errorf("ReadOnlyMemory() = %v, want %v", got, tt.readOnly)
			}
			if got := tt.p.DoorWord(); got != tt.doorWord {
				t.Errorf("DoorWord() = %q, want %q", got, tt.doorWord)
			}
		})
	}
}

func TestSetting_Validate(t *testing.T) {
	tests := []struct {
		name    string
		s       projection.Setting
		wantErr string
	}{
		{"empty", projection.Setting{}, ""},
		{"all_set", projection.Setting{DoorPolicy: "trusted", Layout: "shared-support", Visibility: "private"}, ""},
		{"layout_conversation", projection.Setting{Layout: "conversation"}, ""},
		{"bad_door", projection.Setting{DoorPolicy: "open"}, `sandbox.workspace.doorPolicy must be "isolated" or "trusted", not "open"`},
		{"bad_layout", projection.Setting{DoorPolicy: "trusted", Layout: "Full"}, `sandbox.workspace.layout must be "conversation", "shared-support" or "full", not "Full"`},
		{"bad_visibility", projection.Setting{Visibility: "secret"}, `sandbox.workspace.visibility must be "public" or "private", not "secret"`},
		{"first_bad_field_reported", projection.Setting{DoorPolicy: "x", Layout: "y"}, `sandbox.workspace.doorPolicy must be "isolated" or "trusted", not "x"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.s.Validate()
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate() = nil, want %q", tt.wantErr)
			}
			if err.Error() != tt.wantErr {
				t.Errorf("Validate() = %q, want %q", err, tt.wantErr)
			}
			if !errors.Is(err, errdefs.ErrInvalid) {
				t.Errorf("Validate() class: errors.Is(err, ErrInvalid) = false")
			}
		})
	}
}

func TestMerge(t *testing.T) {
	tests := []struct {
		name                 string
		global, conversation *projection.Setting
		want                 *projection.Setting
	}{
		{"both_nil", nil, nil, nil},
		{"global_only", &projection.Setting{DoorPolicy: "trusted"}, nil, &projection.Setting{DoorPolicy: "trusted"}},
		{"conversation_only", nil, &projection.Setting{Visibility: "private"}, &projection.Setting{Visibility: "private"}},
		{"empty_conversation_counts", nil, &projection.Setting{}, &projection.Setting{}},
		{
			"leaf_by_leaf",
			&projection.Setting{DoorPolicy: "trusted", Layout: "full", Visibility: "public"},
			&projection.Setting{Layout: "shared-support"},
			&projection.Setting{DoorPolicy: "trusted", Layout: "shared-support", Visibility: "public"},
		},
		{
			"conversation_wins_everywhere",
			&projection.Setting{DoorPolicy: "trusted", Layout: "full", Visibility: "public"},
			&projection.Setting{DoorPolicy: "isolated", Layout: "conversation", Visibility: "private"},
			&projection.Setting{DoorPolicy: "isolated", Layout: "conversation", Visibility: "private"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var gBefore, cBefore projection.Setting
			if tt.global != nil {
				gBefore = *tt.global
			}
			if tt.conversation != nil {
				cBefore = *tt.conversation
			}
			got := projection.Merge(tt.global, tt.conversation)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Merge() mismatch (-want +got):\n%s", diff)
			}
			if tt.global != nil && *tt.global != gBefore {
				t.Error("Merge modified global")
			}
			if tt.conversation != nil && *tt.conversation != cBefore {
				t.Error("Merge modified conversation")
			}
		})
	}
}

func TestNormalize(t *testing.T) {
	tests := []struct {
		name string
		s    projection.Setting
		want projection.Policy
	}{
		{"empty_is_isolated", projection.Setting{}, projection.PolicyIsolated},
		{"isolated_ignores_layout", projection.Setting{DoorPolicy: "isolated", Layout: "full", Visibility: "private"}, projection.PolicyIsolated},
		{"layout_without_door_is_isolated", projection.Setting{Layout: "full"}, projection.PolicyIsolated},
		{"trusted_defaults_shared_public", projection.Setting{DoorPolicy: "trusted"}, projection.PolicySharedPublic},
		{"trusted_conversation_becomes_shared", projection.Setting{DoorPolicy: "trusted", Layout: "conversation"}, projection.PolicySharedPublic},
		{"trusted_shared_private", projection.Setting{DoorPolicy: "trusted", Layout: "shared-support", Visibility: "private"}, projection.PolicySharedPrivate},
		{"trusted_private_default_layout", projection.Setting{DoorPolicy: "trusted", Visibility: "private"}, projection.PolicySharedPrivate},
		{"full", projection.Setting{DoorPolicy: "trusted", Layout: "full"}, projection.PolicyFull},
		{"full_ignores_private", projection.Setting{DoorPolicy: "trusted", Layout: "full", Visibility: "private"}, projection.PolicyFull},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := projection.Normalize(tt.s)
			if err != nil {
				t.Fatalf("Normalize() error = %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Normalize() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNormalize_InvalidIsAnError(t *testing.T) {
	_, err := projection.Normalize(projection.Setting{DoorPolicy: "trusted", Visibility: "Private"})
	if !errors.Is(err, errdefs.ErrInvalid) {
		t.Fatalf("Normalize() error = %v, want class ErrInvalid", err)
	}
}
