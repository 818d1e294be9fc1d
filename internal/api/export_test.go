package api

import (
	"maps"
	"slices"
)

// Routes lists the patterns Handler serves, sorted, for the OpenAPI test.
func (s *Server) Routes() []string { return slices.Sorted(maps.Keys(s.routes())) }
