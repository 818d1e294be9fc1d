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
// Secret values never appear in error texts, String output or log values:
// errors name keys, entry names, variable names, paths and line numbers,
// never a value or a file's content.
//
// The package has two halves: pure code (keys, the env file format, the
// injection plan and its target checks) that takes data in and returns
// data, and Store, the thin executor that reads and writes the vault
// directories.
package vault
