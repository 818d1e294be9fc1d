// Package tools is the semantics of the tools an agent calls: bash, read,
// write, edit and sandbox. Each tool is a function taking a context, the
// conversation's Sandbox and a typed input, and returning a typed output;
// the MCP server and the HTTP API are thin adapters over them, so both
// serve the same texts (pinned by golden files in testdata).
//
// The package is policy over the Sandbox interface: it never runs a
// process or touches a file itself, and it imports no Docker, os/exec or
// net/http. Paths are resolved lexically by Resolve (relative to the
// office, inside the roots); the Sandbox resolves symlinks and refuses
// whatever escapes the roots.
//
// Errors come in two kinds. A failure of the call (a path outside the
// workspace, an edit whose text is not found, an offset past the end of
// a file) is an error of an errdefs class with a deliberate text. A
// command that ran but failed (non-zero exit, timeout, abort) is a
// *ToolError: its Text is what the agent sees, and the MCP layer marks
// the result as an error.
package tools
