// Package service holds the operations the CLI (and, later, the HTTP API
// and the MCP server) share: office keys and listings, door policy,
// channel kinds, the vault, and exec. It composes the pure policy packages
// (office keys, projection, sandbox capabilities) with their thin
// executors, so every surface refuses and answers the same way.
package service
