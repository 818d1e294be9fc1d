package teammcp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/project/box"
)

// Member is one team member: a worktree under .worktrees.
type Member struct {
	Name string `json:"name" jsonschema:"The member's name, as the member field of the other tools takes it"`
	Path string `json:"path" jsonschema:"The worktree, as the sandbox sees it"`
	// Branch is the checked-out branch; "" when HEAD is detached or the
	// directory is not a worktree (Note says which).
	Branch string `json:"branch,omitempty" jsonschema:"The branch checked out in the worktree"`
	Note   string `json:"note,omitempty" jsonschema:"What is unusual about the worktree: a detached HEAD, or a directory that is not a worktree"`
}

// MembersOutput is the members tool's result.
type MembersOutput struct {
	Text    string   `json:"text" jsonschema:"One line per member: name, path and branch"`
	Members []Member `json:"members" jsonschema:"The members, sorted by name"`
}

// maxGitFile bounds what is read of a .git file or a HEAD.
const maxGitFile = 4 << 10

// listMembers lists the directories under .worktrees in the project of sb
// and reads each one's branch from its git files, through the agent and
// confined to the project (git itself is not needed in the container).
func listMembers(ctx context.Context, sb *memberSandbox) (MembersOutput, error) {
	dir := path.Join(sb.project, box.WorktreesDir)
	entries, err := sb.List(ctx, dir)
	if errdefs.IsNotFound(err) {
		entries, err = nil, nil
	}
	if err != nil {
		return MembersOutput{}, err
	}
	out := MembersOutput{Members: []Member{}}
	var b strings.Builder
	for _, e := range entries {
		if !e.IsDir {
			continue
		}
		m := Member{Name: e.Name, Path: path.Join(dir, e.Name)}
		m.Branch, m.Note = branchOf(ctx, sb, m.Path)
		out.Members = append(out.Members, m)
		fmt.Fprintf(&b, "%s: %s", m.Name, m.Path)
		if m.Branch != "" {
			fmt.Fprintf(&b, " (branch %s)", m.Branch)
		}
		if m.Note != "" {
			fmt.Fprintf(&b, " (%s)", m.Note)
		}
		b.WriteString("\n")
	}
	out.Text = strings.TrimSuffix(b.String(), "\n")
	if out.Text == "" {
		out.Text = "No members yet: the first bash, read, write or edit call naming a member creates its worktree."
	}
	return out, nil
}

// branchOf reads the branch checked out in the worktree at dir: its .git
// file names the worktree's git dir, whose HEAD names the branch.
func branchOf(ctx context.Context, sb *memberSandbox, dir string) (branch, note string) {
	const notWorktree = "not a git worktree"
	gitFile, err := readSmall(ctx, sb, path.Join(dir, ".git"))
	if err != nil {
		return "", notWorktree
	}
	gitDir, ok := strings.CutPrefix(strings.TrimSpace(gitFile), "gitdir:")
	if !ok {
		return "", notWorktree
	}
	gitDir = strings.TrimSpace(gitDir)
	if !path.IsAbs(gitDir) {
		gitDir = path.Join(dir, gitDir)
	}
	head, err := readSmall(ctx, sb, path.Join(gitDir, "HEAD"))
	if err != nil {
		return "", "its HEAD cannot be read"
	}
	head = strings.TrimSpace(head)
	if ref, ok := strings.CutPrefix(head, "ref: refs/heads/"); ok {
		return ref, ""
	}
	return "", "detached HEAD at " + head[:min(len(head), 12)]
}

// readSmall reads at most maxGitFile bytes of a file in sb.
func readSmall(ctx context.Context, sb *memberSandbox, p string) (string, error) {
	var buf bytes.Buffer
	err := sb.ReadFile(ctx, p, &limitWriter{w: &buf, n: maxGitFile})
	if err != nil && !errors.Is(err, errFull) {
		return "", err
	}
	return buf.String(), nil
}

// errFull stops a read once a limitWriter has what it wants.
var errFull = errors.New("enough read")

// limitWriter writes at most n bytes to w, then fails with errFull.
type limitWriter struct {
	w io.Writer
	n int
}

func (l *limitWriter) Write(p []byte) (int, error) {
	if len(p) > l.n {
		n, _ := l.w.Write(p[:l.n])
		l.n -= n
		return n, errFull
	}
	n, err := l.w.Write(p)
	l.n -= n
	return n, err
}
