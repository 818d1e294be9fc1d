package api

import (
	"encoding/json"
	"io"
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

// ClassError turns a code from an ErrorBody back into an error of that
// class with the same text, for the Go client.
func ClassError(b ErrorBody) error { return errdefs.FromCode(b.Code, b.Error) }

func writeError(w http.ResponseWriter, err error) {
	writeJSON(w, errdefs.HTTPStatus(err), ErrorBody{Error: err.Error(), Code: errdefs.Code(err)})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = encodeJSON(w, v)
}

// encodeJSON writes v as the API's answers are written: one line, '<',
// '>' and '&' as they are.
func encodeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}
