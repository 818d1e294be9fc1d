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

// CodeInternal is the wire name of an error of no class: a failure hutch
// did not foresee.
const CodeInternal = "internal"

// codes is the one table of the classes' wire names (the HTTP API's
// "code", the agent's and the MCP servers' logs) and HTTP statuses. The
// order decides for an error of several classes.
var codes = []struct {
	class  error
	code   string
	status int
}{
	{ErrNotFound, "not_found", 404},
	{ErrInvalid, "invalid", 400},
	{ErrConflict, "conflict", 409},
	{ErrNotSupported, "not_supported", 501},
	{ErrUnavailable, "unavailable", 503},
	{ErrFailedPrecondition, "failed_precondition", 412},
}

// Code returns the wire name of err's class, or CodeInternal.
func Code(err error) string {
	for _, c := range codes {
		if errors.Is(err, c.class) {
			return c.code
		}
	}
	return CodeInternal
}

// HTTPStatus returns the HTTP status that answers an error of err's
// class: 404, 400, 409, 501, 503, 412, or 500 for none.
func HTTPStatus(err error) int {
	for _, c := range codes {
		if errors.Is(err, c.class) {
			return c.status
		}
	}
	return 500
}

// FromCode returns an error with the text msg of the class code names
// (what Code returned on the other side of a wire); an unknown code, or
// CodeInternal, gives an error of no class.
func FromCode(code, msg string) error {
	for _, c := range codes {
		if c.code == code {
			return New(c.class, msg)
		}
	}
	return errors.New(msg)
}
