// Package workspace makes a projection plan true on disk before a runtime
// binds it: the workspace root exists, the shared support entries a plan
// names exist with owner-only modes, and nothing a plan binds is a symlink
// or an entry of the wrong type.
//
// The symlink refusals are the point. A bind mount follows a symlink on the
// host, so a MEMORY.md or skills/ replaced by a link (from inside a runtime
// that once had the full layout, say) would project an arbitrary host path
// into the next runtime. Checking with Lstat and creating with O_EXCL keeps
// the host paths a plan names the paths that get mounted.
//
// Modes are set explicitly (0700 directories, 0600 files) so the process
// umask can neither widen nor narrow them.
package workspace
