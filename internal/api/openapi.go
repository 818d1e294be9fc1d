package api

import (
	_ "embed"
	"net/http"
)

// OpenAPI is the API's OpenAPI 3.1 description, served at
// GET /v1/openapi.json. openapi.json is written by hand; go test checks
// it against the route table, the examples of docs/api.md, the error
// shapes and real answers, and clients/typescript is generated from it.
//
//go:embed openapi.json
var OpenAPI []byte

// openapi serves the description. It is authenticated like every route:
// one rule for the whole API, and whoever may call it may read it.
func (s *Server) openapi(w http.ResponseWriter, r *http.Request) error {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(OpenAPI)
	return nil
}
