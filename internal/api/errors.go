package api

import (
	"encoding/json"
	"io"
	"net/http"

	"github.com/hutchsandbox/hutch/internal/errdefs"
)

func writeError(w http.ResponseWriter, err error) {
	writeJSON(w, errdefs.HTTPStatus(err), ErrorBody{Error: err.Error(), Code: errdefs.Code(err)})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = EncodeJSON(w, v)
}

// encodeJSON writes v as the API's answers are written: one line, '<',
// '>' and '&' as they are.
func EncodeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}
