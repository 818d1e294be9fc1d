package projection_test

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/projection"
)

func TestParseDoorWord(t *testing.T) {
	sharedPublic := &projection.Setting{DoorPolicy: "trusted", Layout: "shared-support", Visibility: "public"}
	tests := []struct {
		name       string
		word       string
		want       *projection.Setting
		wantPolicy projection.Policy
	}{
		{"default", "default", nil, projection.PolicyIsolated},
		{"isolated", "isolated", &projection.Setting{DoorPolicy: "isolated"}, projection.PolicyIsolated},
		{"shared", "shared", sharedPublic, projection.PolicySharedPublic},
		{"shared_support", "shared-support", sharedPublic, projection.PolicySharedPublic},
		{"shared_public", "shared-public", sharedPublic, projection.PolicySharedPublic},
		{"shared_private", "shared-private", &projection.Setting{DoorPolicy: "trusted", Layout: "shared-support", Visibility: "private"}, projection.PolicySharedPrivate},
		{"full", "full", &projection.Setting{DoorPolicy: "trusted", Layout: "full"}, projection.PolicyFull},
		{"mixed_case_and_space", " Full\n", &projection.Setting{DoorPolicy: "trusted", Layout: "full"}, projection.PolicyFull},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := projection.ParseDoorWord(tt.word)
			if err != nil {
				t.Fatalf("ParseDoorWord(%q) error = %v", tt.word, err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Fatalf("ParseDoorWord(%q) mismatch (-want +got):\n%s", tt.word, diff)
			}
			if got == nil {
				return
			}
			if err := got.Validate(); err != nil {
				t.Fatalf("setting does not validate: %v", err)
			}
			p, err := projection.Normalize(*got)
			if err != nil || p != tt.wantPolicy {
				t.Errorf("Normalize() = %v, %v; want %v", p, err, tt.wantPolicy)
			}
		})
	}
}

func TestParseDoorWord_Unknown(t *testing.T) {
	for _, w := range []string{"trusted", "", "public", "shared_private"} {
		t.Run("word_"+w, func(t *testing.T) {
			_, err := projection.ParseDoorWord(w)
			want := `Unknown door policy "` + w + `"; use default, isolated, shared, shared-private or full`
			if err == nil || err.Error() != want {
				t.Fatalf("ParseDoorWord(%q) error = %v, want %q", w, err, want)
			}
			if !errors.Is(err, errdefs.ErrInvalid) {
				t.Errorf("error class: errors.Is(err, ErrInvalid) = false")
			}
		})
	}
}

// Every listed door word parses, and every policy's DoorWord round-trips.
func TestDoorWords_RoundTrip(t *testing.T) {
	for _, w := range projection.DoorWords {
		t.Run(w, func(t *testing.T) {
			s, err := projection.ParseDoorWord(w)
			if err != nil {
				t.Fatal(err)
			}
			if s == nil {
				return
			}
			p, err := projection.Normalize(*s)
			if err != nil {
				t.Fatal(err)
			}
			if got := p.DoorWord(); got != w {
				t.Errorf("DoorWord() = %q, want %q", got, w)
			}
		})
	}
}

func FuzzParseDoorWord(f *testing.F) {
	for _, w := range append([]string{"shared-public", "FULL", "x"}, projection.DoorWords...) {
		f.Add(w)
	}
	f.Fuzz(func(t *testing.T, w string) {
		s, err := projection.ParseDoorWord(w)
		if err != nil {
			if !errors.Is(err, errdefs.ErrInvalid) {
				t.Fatalf("error %v is not ErrInvalid", err)
			}
			return
		}
		if s != nil {
			if err := s.Validate(); err != nil {
				t.Fatalf("ParseDoorWord(%q) gave an invalid setting: %v", w, err)
			}
		}
	})
}
