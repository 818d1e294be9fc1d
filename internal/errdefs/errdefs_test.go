package errdefs_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/hutchsandbox/hutch/internal/errdefs"
)

func TestNew_KeepsTextAndClass(t *testing.T) {
	err := errdefs.New(errdefs.ErrInvalid, "Conversation id must be non-empty")
	if got, want := err.Error(), "Conversation id must be non-empty"; got != want {
		t.Errorf("Error() got %q, want %q", got, want)
	}
	wrapped := fmt.Errorf("office: %w", err)
	if !errdefs.IsInvalid(wrapped) {
		t.Errorf("IsInvalid(%v) = false, want true", wrapped)
	}
	if errdefs.IsNotFound(wrapped) {
		t.Errorf("IsNotFound(%v) = true, want false", wrapped)
	}
	if !errors.Is(errdefs.New(errdefs.ErrNotSupported, "x"), errdefs.ErrNotSupported) {
		t.Error("errors.Is does not find the class")
	}
}
