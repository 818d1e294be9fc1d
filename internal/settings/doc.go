// Package settings reads and writes hutch's settings files: the global
// <state>/settings.json and each conversation's
// <state>/conversations/<office-key>/settings.json. Both live in the state
// dir, which is never mounted into a runtime, so code in a sandbox cannot
// widen its own door policy.
//
// A settings file is a JSON object shared by several features; this
// package owns only the sandbox.workspace key (the door policy, see
// internal/projection) and the legacy sandbox.image.workspaceMount it
// replaces. Everything else in a file is preserved byte for byte in value
// (keys are re-ordered and re-indented) on every write.
//
// Reading fails closed: a file that is not a regular file, not JSON, or
// holds a value we do not understand is an error naming the file, never a
// default, because a guessed door policy could expose more than the
// operator chose. For the same reason a malformed file is never
// overwritten: a person fixes it first.
//
// Writes are read-modify-write and atomic (internal/atomicfile), but two
// writers of one file must be serialised by the caller.
package settings
