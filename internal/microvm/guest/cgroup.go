package guest

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
)

// setupCgroups moves the process pid into root/agent, enables the pids
// and memory controllers for root's children and makes root/hutch for the
// commands, whose directory it returns. The order matters: cgroup v2 lets
// no process stay in a cgroup (the root excepted) that hands controllers
// to its children, and the agent must not share the commands' limits.
func setupCgroups(root string, pid int) (string, error) {
	agentDir := filepath.Join(root, filepath.Base(agentCgroup))
	commands := filepath.Join(root, filepath.Base(CommandCgroup))
	for _, dir := range []string{agentDir, commands} {
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return "", fmt.Errorf("create the cgroup %s: %w", dir, err)
		}
	}
	if err := writeCgroup(agentDir, "cgroup.procs", strconv.Itoa(pid)); err != nil {
		return "", err
	}
	if err := writeCgroup(root, "cgroup.subtree_control", "+pids +memory"); err != nil {
		return "", err
	}
	return commands, nil
}
