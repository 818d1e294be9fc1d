// Package client is the Go client of hutch's HTTP API: what the hutch
// command itself uses to talk to its daemon, and what a chat bot or an
// agent harness written in Go imports.
//
// A daemon (hutch serve) listens on a unix socket in its state dir, and
// optionally on TCP behind a bearer token. Local reaches the first,
// Remote the second:
//
//	c := client.Local("") // $HUTCH_STATE_DIR or ~/.hutch
//	conv := client.Conversation{Platform: "slack", ConversationID: "C0123ABC"}
//	res, err := c.Exec(ctx, client.ExecRequest{Conversation: conv, Command: "ls"}, nil, os.Stdout, os.Stderr)
//
// Every request names its conversation; the daemon gives it an office (a
// directory), a vault and, in the managed modes, a runtime of its own,
// made on its first command. Exec streams a command's output as it
// comes; StatFile, ListFiles, ReadFile and WriteFile move a file's bytes
// unchanged; Policy and SetDoor read and set what a conversation's
// runtime sees of the workspace; VaultList, VaultSet and VaultRemove
// manage its credentials (names come back, never values); SandboxStatus
// and its siblings manage its runtime; Chat serves a bot's /sandbox
// commands; Events and FollowEvents read the daemon's log of changes.
//
// The types are the API's own: the daemon decodes and encodes these very
// structs, and docs/api.md and the OpenAPI description served at
// /v1/openapi.json describe the same JSON.
//
// An error the daemon answered is an *Error with the API's code and the
// HTTP status (use errors.As, or IsCode); a daemon that did not answer
// gives an error wrapping ErrNoAnswer; a cancelled context ends every
// call, a running command included (the daemon kills its process group),
// with the context's error.
package client
