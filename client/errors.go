package client

import (
	"errors"
	"fmt"
	"net/http"
)

// ErrorBody is the JSON body of every error response, and of an exec
// frame that ends a command's answer in an error.
type ErrorBody struct {
	// Error is the message, safe to show to a user: hutch's error texts
	// never carry secrets.
	Error string `json:"error"`
	// Code is the error's class (one of the Code constants).
	Code string `json:"code"`
}

// The codes of ErrorBody and Error: what a caller can do about an error,
// without reading its text.
const (
	// CodeNotFound: the named thing does not exist (404).
	CodeNotFound = "not_found"
	// CodeInvalid: the request is malformed; fixing it fixes the call (400).
	CodeInvalid = "invalid"
	// CodeConflict: the thing exists in a state that clashes with the
	// call (409).
	CodeConflict = "conflict"
	// CodeNotSupported: the daemon's mode cannot do this at all (501).
	CodeNotSupported = "not_supported"
	// CodeUnavailable: something the daemon needs (an engine, a runtime)
	// did not answer; retrying may help (503).
	CodeUnavailable = "unavailable"
	// CodeFailedPrecondition: the daemon's state does not allow the call
	// (a refusing door policy, malformed settings); a person must change
	// something first (412).
	CodeFailedPrecondition = "failed_precondition"
	// CodeUnauthorized: the bearer token is missing or wrong (401).
	CodeUnauthorized = "unauthorized"
	// CodeMethodNotAllowed: the path is served under other methods (405).
	CodeMethodNotAllowed = "method_not_allowed"
	// CodeInternal: a failure hutch did not foresee (500).
	CodeInternal = "internal"
)

// Error is an error the daemon answered: every method of Client returns
// one (use errors.As) when the daemon refused or failed a call, as
// opposed to not answering at all.
type Error struct {
	// StatusCode is the HTTP status of the answer; 200 when the error
	// came inside a streamed answer already started (an exec frame, a
	// file read cut short).
	StatusCode int
	// Code is the error's class, one of the Code constants.
	Code string
	// Message is the daemon's text, safe to show to a user.
	Message string
}

// Error returns the daemon's text.
func (e *Error) Error() string { return e.Message }

// IsCode reports whether err is, or wraps, an *Error of the given code.
func IsCode(err error, code string) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == code
}

// statusCodes are the codes of the statuses the API answers errors with,
// for an answer whose body is not an ErrorBody (a proxy's, say).
var statusCodes = map[int]string{
	http.StatusBadRequest:         CodeInvalid,
	http.StatusUnauthorized:       CodeUnauthorized,
	http.StatusNotFound:           CodeNotFound,
	http.StatusMethodNotAllowed:   CodeMethodNotAllowed,
	http.StatusConflict:           CodeConflict,
	http.StatusPreconditionFailed: CodeFailedPrecondition,
	http.StatusNotImplemented:     CodeNotSupported,
	http.StatusServiceUnavailable: CodeUnavailable,
}

// errorOf is the Error a response with a non-2xx status and body b
// stands for (ok: b was decoded); a body that is not an ErrorBody gives
// the status's code (CodeInternal for others) and the status as text.
func errorOf(status int, b ErrorBody, ok bool) *Error {
	if !ok || b.Error == "" {
		code, known := statusCodes[status]
		if !known {
			code = CodeInternal
		}
		return &Error{StatusCode: status, Code: code, Message: fmt.Sprintf("hutch daemon answered %d %s", status, http.StatusText(status))}
	}
	code := b.Code
	if code == "" {
		code = CodeInternal
	}
	return &Error{StatusCode: status, Code: code, Message: b.Error}
}
