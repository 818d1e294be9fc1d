// Package migrate plans the move of a workspace from the raw-id layout (one
// directory per raw conversation id) to the office layout (one directory per
// office key). It is pure: the caller reads the workspace root and the
// office registry, hands both to Build, and gets a Plan back; nothing here touches
// the file system. Executing the plan (journaling each move in the registry
// under its lock, renaming, committing) is the caller's job.
//
// Ownership of a raw id is inferred by OwnerOf: with one enabled platform
// every raw id belongs to it; with several, only when exactly one enabled
// platform's id grammar matches. An explicit claim (hutch office claim)
// overrides inference.
//
// Anything that would need a guess is a blocker: unowned directories,
// failed moves, conflicts (legacy and office directory both present),
// symlinks in the workspace root and legacy directories that reappear
// after their move was committed. Plan.Summary renders them as the message
// boot stops with.
package migrate
