package projection

import (
	"path"
	"path/filepath"
)

// Role says what a planned mount is for; internal/workspace uses it to
// decide what it may create and how to name a path in an error.
type Role string

// The mount roles.
const (
	// RoleOffice: the conversation's own directory.
	RoleOffice Role = "office"
	// RoleMemory: the shared MEMORY.md file.
	RoleMemory Role = "memory"
	// RoleSkills: the shared skills/ directory.
	RoleSkills Role = "skills"
	// RoleEvents: the shared events/ directory.
	RoleEvents Role = "events"
	// RoleRoot: the whole workspace root (full layout).
	RoleRoot Role = "root"
)

// EntryType is the kind of filesystem entry a mount binds.
type EntryType string

// The entry types.
const (
	EntryDir  EntryType = "dir"
	EntryFile EntryType = "file"
)

// Shared support entries, relative to the workspace root. They are the
// same names inside the runtime.
const (
	MemoryFile = "MEMORY.md"
	SkillsDir  = "skills"
	EventsDir  = "events"
)

// RuntimeRoot is where managed runtimes see the workspace root.
const RuntimeRoot = "/workspace"

// Mount is one host path bound into a runtime.
type Mount struct {
	Role        Role
	Type        EntryType
	HostPath    string
	RuntimePath string
	ReadOnly    bool
}

// Plan is the mount plan of policy p for the office officeKey.
//
// workspaceRoot is the host workspace root (joined with path/filepath);
// runtimeRoot is where the runtime sees it (joined with path, runtimes are
// Linux): RuntimeRoot in managed modes, workspaceRoot itself in host mode,
// which makes the plan an identity mapping. officeKey must be a validated
// office key (one path element); Plan does not re-check it.
//
// The order is stable and part of the contract, because a runtime's
// fingerprint hashes it: the office first, then MEMORY.md, skills/,
// events/. The full layout is one mount of the whole root, and visibility
// is ignored there.
func Plan(p Policy, workspaceRoot, officeKey, runtimeRoot string) []Mount {
	if p.DoorPolicy == DoorTrusted && p.Layout == LayoutFull {
		return []Mount{{Role: RoleRoot, Type: EntryDir, HostPath: filepath.Clean(workspaceRoot), RuntimePath: path.Clean(runtimeRoot)}}
	}
	office := Mount{
		Role:        RoleOffice,
		Type:        EntryDir,
		HostPath:    filepath.Join(workspaceRoot, officeKey),
		RuntimePath: path.Join(runtimeRoot, officeKey),
	}
	if p.DoorPolicy != DoorTrusted || p.Layout != LayoutSharedSupport {
		// Isolated, and anything not normalized: the narrowest plan.
		return []Mount{office}
	}
	support := func(r Role, t EntryType, name string, ro bool) Mount {
		return Mount{Role: r, Type: t, HostPath: filepath.Join(workspaceRoot, name), RuntimePath: path.Join(runtimeRoot, name), ReadOnly: ro}
	}
	return []Mount{
		office,
		support(RoleMemory, EntryFile, MemoryFile, p.Visibility == VisibilityPrivate),
		support(RoleSkills, EntryDir, SkillsDir, false),
		support(RoleEvents, EntryDir, EventsDir, false),
	}
}
