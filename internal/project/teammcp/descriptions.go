package teammcp

import (
	"fmt"

	"github.com/hutchsandbox/hutch/internal/mcptools"
	"github.com/hutchsandbox/hutch/internal/tools"
)

// The tools' descriptions: what the supervisor reads to choose and call
// them. They name the project, as the container sees it; what the tools
// do, the same in every server, comes from mcptools.

func bashDescription(project string) string {
	return fmt.Sprintf(`Run a shell command (sh -c, under a login shell so the image's PATH applies) inside the sandbox container of the project %[1]s, never on the host. With member, it runs in that team member's git worktree %[1]s/.worktrees/<member> (branch <member>, created from HEAD by the first call naming the member); without, in the project root. Use it to start and drive team members: each member's commands, agent CLIs included, run inside the same container. Returns standard output, then standard error.

`, project) + mcptools.BashOutputParagraph("where the command ran,") + fmt.Sprintf(`

timeout is in seconds (default %d, at most %d); when it passes, the command and every process it started are killed. bash, write and edit calls of one member run one at a time; different members run side by side.`,
		int(tools.DefaultBashTimeout.Seconds()), int(tools.MaxBashTimeout.Seconds()))
}

func readDescription(project string) string {
	return fmt.Sprintf(`Read a file of the project %s, inside its sandbox container. A relative path starts at the member's worktree (or the project root, without member); an absolute path must be inside the project. Nothing outside the project can be reached, through symlinks neither.

`, project) + mcptools.ReadParagraphs
}

func writeDescription(project string) string {
	return fmt.Sprintf(`Create or replace a file of the project %s, inside its sandbox container, with the given content. A relative path starts at the member's worktree (or the project root, without member); an absolute path must be inside the project, and nothing outside it can be reached.

`, project) + mcptools.WriteParagraph
}

func editDescription(project string) string {
	return fmt.Sprintf(`Replace one exact occurrence of oldText with newText in a file of the project %s, inside its sandbox container, and return a unified diff of the change. Paths are as for read and write.

`, project) + mcptools.EditParagraph
}

func membersDescription(project string) string {
	return fmt.Sprintf(`List the team's members: the git worktrees under %s/.worktrees, with each one's path and branch, as the project's sandbox container sees them. A member appears once a call of another tool named it.`, project)
}
