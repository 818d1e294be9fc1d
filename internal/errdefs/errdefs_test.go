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

// TestCode_RoundTrip: every class survives a wire by its code, with its
// text; no class is internal and a 500.
func TestCode_RoundTrip(t *testing.T) {
	for _, c := range []struct {
		class  error
		code   string
		status int
	}{
		{errdefs.ErrNotFound, "not_found", 404},
		{errdefs.ErrInvalid, "invalid", 400},
		{errdefs.ErrConflict, "conflict", 409},
		{errdefs.ErrNotSupported, "not_supported", 501},
		{errdefs.ErrUnavailable, "unavailable", 503},
		{errdefs.ErrFailedPrecondition, "failed_precondition", 412},
		{nil, "internal", 500},
	} {
		err := errors.New("plain")
		if c.class != nil {
			err = fmt.Errorf("context: %w", errdefs.New(c.class, "the text"))
		}
		if got := errdefs.Code(err); got != c.code {
			t.Errorf("errdefs.Code(%v) = %q, want %q", err, got, c.code)
		}
		if got := errdefs.HTTPStatus(err); got != c.status {
			t.Errorf("errdefs.HTTPStatus(%v) = %d, want %d", err, got, c.status)
		}
		back := errdefs.FromCode(errdefs.Code(err), err.Error())
		if back.Error() != err.Error() || c.class != nil && !errors.Is(back, c.class) {
			t.Errorf("errdefs.FromCode(%q) = %v, want the class and text back", errdefs.Code(err), back)
		}
		if c.class == nil && errdefs.Code(back) != errdefs.CodeInternal {
			t.Errorf("an error of no class came back as %q", errdefs.Code(back))
		}
	}
}
