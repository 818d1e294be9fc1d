// Package vault keeps the credentials of one vault key (a platform user, a
// container name or an office key) on disk and turns them into an
// injection plan for a runtime.
//
// A vault is a directory <state>/vaults/<key> (0700). Its file "env" holds
// KEY=VALUE variables that are injected into each command and never stored
// in a runtime's configuration; every other top-level entry is a file
// credential (a file or a directory) that is projected read-only into the
// runtime at a target derived from its name every time, never stored. The
// names "shared" and "extensions" under <state>/vaults are reserved and are
// never valid keys.
//
// An env variable may be marked as a placeholder (SetPlaceholder): commands
// then see a token, "hutch-placeholder-" and 32 hex digits, and hutch's
// egress proxy puts the real value in its place only in requests to the
// hosts the mark names. The marks live in the vault's ".hutch-placeholders"
// file (JSON, 0600), which like "env" is the store's own and never a file
// credential. ApplyPlaceholders turns env and marks into what a command
// sees plus the Secrets the proxy needs; ProjectWithPlaceholders gives file
// credentials that contain a marked value as copies holding the token.
//
// Secret values never appear in error texts, String output or log values:
// errors name keys, entry names, variable names, paths and line numbers,
// never a value or a file's content.
//
// The package has two halves: pure code (keys, the env file format, the
// injection plan and its target checks) that takes data in and returns
// data, and Store, the thin executor that reads and writes the vault
// directories.
package vault
