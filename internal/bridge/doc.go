// Package bridge is hutch's end of the bridge protocol (docs/bridge.md):
// an HTTP handler, behind a bearer token, that runs the commands of
// another hutch's cloudflare: mode on this machine. Every sandbox id is
// the conversation web/<sandbox-id>, run through the service in a local
// mode of the bridge's own, so offices, door policy, limits and idle stop
// all apply. Serve runs the handler as `hutch bridge serve` does: mode
// check, reconcile, TLS, idle stop, and a graceful shutdown.
package bridge
