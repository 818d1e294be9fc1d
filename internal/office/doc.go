// Package office names and records conversation offices.
//
// A conversation on a chat platform is identified by an Address: the
// platform plus the platform's raw conversation id. Its office, the
// directory under the workspace root that the conversation's runtime sees,
// is named by a Key of the form v1-<platform>-<readable>-<digest>. The
// digest (16 hex chars of SHA-256 over the platform and the raw id) is the
// identity; the readable part is only a hint for humans listing the
// workspace, so ids that slug alike (foo:bar, foo.bar) still get distinct
// offices. The algorithm is fixed and versioned (v1) because keys are
// directory names on disk: changing it would orphan every existing office.
//
// The registry (office-registry.json in the state dir) is the journal of
// which offices exist and of migrations from the older raw-id layout. It
// is read without a lock (writers replace it atomically) and changed only
// under a lock directory shared by every hutch process on the host. An
// office is recorded in the registry before its directory is created, so
// a directory that looks like an office but is missing from the registry
// is never one that hutch made: a later migration or cleanup can trust
// that.
//
// Per-office host state (settings, the channel kind) lives under
// <state>/conversations/<key>, which is never mounted into a runtime.
package office
