// Package mcpserver serves hutch's agent tools (bash, read, write, edit,
// sandbox) over the Model Context Protocol, with the official Go SDK.
//
// One *mcp.Server serves one conversation in one mode: New registers the
// typed tools, whose input and output schemas the SDK infers from the
// structs of package tools. The handlers are thin adapters: each call asks
// the service for the conversation's tools.Sandbox (which admits the
// conversation and provisions its runtime as needed) and runs the tool
// from package tools, so MCP and the HTTP API serve the same texts.
//
// A tool that ran but failed (a command exiting non-zero) and a call that
// could not be served (a path outside the office, an edit matching
// nothing, a refusal) are both tool errors: a result with IsError and the
// error's text, which the agent reads and can act on. hutch's error texts
// are deliberate and carry no secrets. Protocol errors are left to the SDK
// (unknown tool, malformed request), except on stdio: StdioTransport
// answers a line that is not a JSON-RPC message itself and keeps serving,
// where the SDK's transport would end the session.
//
// bash reports progress to a client that gave the call a progress token:
// the output's byte count and its last line, at most once per
// mcptools.ProgressInterval. A client's notifications/cancelled
// cancels the call's context, and with it the command, whose process
// group the runtime kills as a timeout does.
//
// The stdio server is `hutch mcp` (package cli): New's server, or Proxy's
// when a daemon serves the state dir, or Refusing's when hutch cannot
// serve at all, each run on StdioTransport. HTTPHandler serves streamable
// HTTP on the daemon, one conversation per session, named by the query
// parameters of the URL.
package mcpserver
