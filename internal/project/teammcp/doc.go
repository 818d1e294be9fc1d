// Package teammcp is hutch's own MCP server for an agent team working in
// one project's sandbox: `hutch project mcp` serves it on the host, and a
// supervisor agent running inside the project's container calls it to
// spawn and drive team members that run inside that same container.
//
// Its tools (bash, read, write, edit, members) have the semantics and the
// texts of package tools, over a tools.Sandbox that runs everything in the
// container through the target's agent. A call may name a member: it then
// runs in the member's git worktree, <project>/.worktrees/<member>, which
// the first such call creates with box.Box.Worktree; without one it runs in
// the project root. File operations are confined to the project directory
// as the container sees it, symlinks included. bash, write and edit of one
// member run one at a time; different members run side by side.
//
// Handler serves a server over streamable HTTP, stateless and with JSON
// responses, so that any HTTP client (a shell script with busybox wget)
// can call a tool in one POST, without a session. Every request must carry
// the project's bearer token.
package teammcp
