package office

import "path/filepath"

// Dir returns the office directory of k under the workspace root.
func Dir(workspace string, k Key) string {
	return filepath.Join(workspace, string(k))
}

// StateDir returns the host-only state directory of k under the state dir.
// It sits apart from the office because the office is mounted into the
// conversation's runtime and this directory never is.
func StateDir(stateDir string, k Key) string {
	return filepath.Join(stateDir, conversationsDir, string(k))
}

// conversationsDir is the state dir entry holding one directory per office.
const conversationsDir = "conversations"
