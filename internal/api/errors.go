package api

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/hutchsandbox/hutch/internal/errdefs"
)

// ErrorBody is the JSON body of every error response.
type ErrorBody struct {
	// Error is the message, safe to show to a user: hutch's error texts
	// never carry secrets.
	Error string `json:"error"`
	// Code is the error class: not_found, invalid, conflict,
	// not_supported, unavailable, failed_precondition, internal.
	Code string `json:"code"`
}

// classOf maps an error to its status code and class name.
func classOf(err error) (int, string) {
	switch {
	case errors.Is(err, errdefs.ErrNotFound):
		return http.StatusNotFound, "not_found"
	case errors.Is(err, errdefs.ErrInvalid):
		return http.StatusBadRequest, "invalid"
	case errors.Is(err, errdefs.ErrConflict):
		return http.StatusConflict, "conflict"
	case errors.Is(err, errdefs.ErrNotSupported):
		return http.StatusNotImplemented, "not_supported"
	case errors.Is(err, errdefs.ErrUnavailable):
		return http.StatusServiceUnavailable, "unavailable"
	case errors.Is(err, errdefs.ErrFailedPrecondition):
		return http.StatusPreconditionFailed, "failed_precondition"
	}
	return http.StatusInternalServerError, "internal"
}

// ClassError turns a code from an ErrorBody back into an error of that
// class with the same text, for the Go client.
func ClassError(b ErrorBody) error {
	class := map[string]error{
		"not_found":           errdefs.ErrNotFound,
		"invalid":             errdefs.ErrInvalid,
		"conflict":            errdefs.ErrConflict,
		"not_supported":       errdefs.ErrNotSupported,
		"unavailable":         errdefs.ErrUnavailable,
		"failed_precondition": errdefs.ErrFailedPrecondition,
	}[b.Code]
	if class == nil {
		return errors.New(b.Error)
	}
	return errdefs.New(class, b.Error)
}

func writeError(w http.ResponseWriter, err error) {
	status, code := classOf(err)
	writeJSON(w, status, ErrorBody{Error: err.Error(), Code: code})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}
