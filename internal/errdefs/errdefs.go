// Package errdefs defines the classes of error hutch returns. Packages wrap
// one of these sentinels with %w and add context; only the API and MCP
// layers map a class to a status code, and everyone else tests with
// errors.Is. Keeping the set small and fixed lets a caller decide what to
// do (retry, fix the input, pick another mode) without reading error text.
package errdefs

import "errors"

// The error classes. Each one answers "what can the caller do about it".
var (
	// ErrNotFound: the named thing does not exist.
	ErrNotFound = errors.New("not found")
	// ErrInvalid: the input is malformed; fixing the input fixes the call.
	ErrInvalid = errors.New("invalid argument")
	// ErrConflict: the thing exists in a state that clashes with the call.
	ErrConflict = errors.New("conflict")
	// ErrNotSupported: the mode or component cannot do this at all.
	ErrNotSupported = errors.New("not supported")
	// ErrUnavailable: a dependency (engine, bridge, lock holder) did not answer; retrying may help.
	ErrUnavailable = errors.New("unavailable")
	// ErrFailedPrecondition: the system is not in a state that allows the call
	// (malformed settings, a refusing policy); a person must change something first.
	ErrFailedPrecondition = errors.New("failed precondition")
)

// classed is an error whose text is exactly what the caller wrote, while
// errors.Is still finds its class. It lets user-facing texts (pinned by
// tests) stay free of a ": not found" suffix.
type classed struct {
	msg   string
	class error
}

func (e *classed) Error() string { return e.msg }
func (e *classed) Unwrap() error { return e.class }

// New returns an error with the exact text msg that belongs to class.
func New(class error, msg string) error { return &classed{msg: msg, class: class} }

// IsNotFound reports whether err is of class ErrNotFound.
func IsNotFound(err error) bool { return errors.Is(err, ErrNotFound) }

// IsInvalid reports whether err is of class ErrInvalid.
func IsInvalid(err error) bool { return errors.Is(err, ErrInvalid) }

// IsConflict reports whether err is of class ErrConflict.
func IsConflict(err error) bool { return errors.Is(err, ErrConflict) }

// IsNotSupported reports whether err is of class ErrNotSupported.
func IsNotSupported(err error) bool { return errors.Is(err, ErrNotSupported) }

// IsUnavailable reports whether err is of class ErrUnavailable.
func IsUnavailable(err error) bool { return errors.Is(err, ErrUnavailable) }

// IsFailedPrecondition reports whether err is of class ErrFailedPrecondition.
func IsFailedPrecondition(err error) bool { return errors.Is(err, ErrFailedPrecondition) }
