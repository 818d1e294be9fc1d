package teammcp

import (
	"fmt"

	"github.com/hutchsandbox/hutch/internal/tools"
)

// The tools' descriptions: what the supervisor reads to choose and call
// them. They name the project, as the container sees it.

func bashDescription(project string) string {
	return fmt.Sprintf(`Run a shell command (sh -c, under a login shell so the image's PATH applies) inside the sandbox container of the project %[1]s, never on the host. With member, it runs in that team member's git worktree %[1]s/.worktrees/<member> (branch <member>, created from HEAD by the first call naming the member); without, in the project root. Use it to start and drive team members: each member's commands, agent CLIs included, run inside the same container. Returns standard output, then standard error.

When the output exceeds %[2]d lines or %[3]d KiB, the whole output is saved where the command ran, as %[4]s/<id>.log, and only its tail is returned, followed by a line saying which lines are shown and where the full output is. An empty output is returned as "(no output)". A non-zero exit is a tool error ending with "Command exited with code N".

timeout is in seconds (default %[5]d, at most %[6]d); when it passes, the command and every process it started are killed. bash, write and edit calls of one member run one at a time; different members run side by side.`,
		project, tools.MaxLines, tools.MaxBytes>>10, tools.OutputDir, int(tools.DefaultBashTimeout.Seconds()), int(tools.MaxBashTimeout.Seconds()))
}

func readDescription(project string) string {
	return fmt.Sprintf(`Read a file of the project %s, inside its sandbox container. A relative path starts at the member's worktree (or the project root, without member); an absolute path must be inside the project. Nothing outside the project can be reached, through symlinks neither.

Text is returned from line offset (default 1), at most limit lines and never more than %d lines or %d KiB per call; when more remains, a last line says which lines are shown and the offset to continue from. A single line longer than %d KiB is returned in slices: the last line says the byteOffset to continue from. An offset past the end says how many lines the file has.

PNG, JPEG, GIF and WebP images (at most %d MiB) are returned as image content. Other binary files are refused.`,
		project, tools.MaxLines, tools.MaxBytes>>10, tools.MaxBytes>>10, tools.MaxImageBytes>>20)
}

func writeDescription(project string) string {
	return fmt.Sprintf(`Create or replace a file of the project %s, inside its sandbox container, with the given content. A relative path starts at the member's worktree (or the project root, without member); an absolute path must be inside the project, and nothing outside it can be reached.

Missing parent directories are created. The write is atomic: a reader sees the old content or the new, never a mix. An existing file keeps its permissions.`, project)
}

func editDescription(project string) string {
	return fmt.Sprintf(`Replace one exact occurrence of oldText with newText in a file of the project %s, inside its sandbox container, and return a unified diff of the change. Paths are as for read and write.

oldText must match exactly, whitespace and line breaks included, and occur exactly once in the file. No match, several matches, or newText equal to oldText are errors that say what to do (for several matches: add surrounding lines to oldText).`, project)
}

func membersDescription(project string) string {
	return fmt.Sprintf(`List the team's members: the git worktrees under %s/.worktrees, with each one's path and branch, as the project's sandbox container sees them. A member appears once a call of another tool named it.`, project)
}
