// Package projection decides which parts of the shared workspace a
// conversation's runtime can see (its door policy) and turns that decision
// into a mount plan.
//
// It is pure on purpose: settings, the recorded channel kind and paths come
// in as data and a Decision or a []Mount comes out. Reading settings files
// lives in internal/settings and creating the planned paths on disk lives in
// internal/workspace, so every rule here can be tested as a table and no rule
// can be bypassed by an effect happening first.
//
// The door policy is a triple (door policy, layout, visibility) with four
// reachable values:
//
//	isolated / conversation / public      only the office
//	trusted / shared-support / public     office plus shared MEMORY.md, skills/, events/ (all rw)
//	trusted / shared-support / private    the same, but MEMORY.md read-only
//	trusted / full / public               the whole workspace root
//
// An explicit sandbox.workspace setting (global, per conversation, merged leaf
// by leaf) wins; without one the policy is derived from the platform's
// recorded channel kind, and anything unknown or unreadable derives the
// isolated policy. Invalid settings are an error, never a guess.
package projection
