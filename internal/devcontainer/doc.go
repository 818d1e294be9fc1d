// Package devcontainer reads a project's devcontainer.json (JSON with
// comments and trailing commas), substitutes its variables
// (${localWorkspaceFolder}, ${containerWorkspaceFolder}, ${localEnv:VAR}
// and their kin) and compiles what hutch uses of it into a Config: image,
// users, environment, mounts and the workspace location, plus the keys it
// leaves alone and notes on entries it could not use.
//
// The package is pure: Parse takes the file's bytes and the values the
// variables stand for, Find takes the caller's stat, and nothing here
// touches files, the environment or the network. A syntax error or a top
// level that is not an object fails Parse; every other problem (a mount
// that does not parse, an env value that is not a string) becomes a note,
// the way the reference tools tolerate them.
package devcontainer
