// Package api is hutch's HTTP API: one route table over the service,
// served on a unix socket in the state dir (and optionally on TCP behind
// a bearer token). Every request names its conversation; errors map from
// error classes to status codes with a JSON body {error, code}; request
// bodies are size-limited, and a bad request never takes the daemon down.
// Exec streams its output as newline-delimited JSON frames, then the
// result. docs/api.md documents it, with examples a test runs.
package api
