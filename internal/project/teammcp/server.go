package teammcp

import (
	"context"
	"fmt"
	"log/slog"
	"path"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/hutchsandbox/hutch/internal/keyedlock"
	"github.com/hutchsandbox/hutch/internal/mcptools"
	"github.com/hutchsandbox/hutch/internal/project/box"
	"github.com/hutchsandbox/hutch/internal/tools"
)

// turns serialises the file-changing tools of each member across every
// server of this process (a handler may make a server per request).
var turns keyedlock.Lock

// Options are what a server works on.
type Options struct {
	// Box is the project's sandbox and Target its container, up; the
	// target's agent runs every command and file operation.
	Box    *box.Box
	Target *box.Target
	// Version is the version the server announces.
	Version string
	// Log receives the failures hutch did not foresee (and, at debug
	// level, the refusals); nil discards.
	Log *slog.Logger
}

// schemas caches the schemas inferred from the input and output structs,
// for callers that make a server per request.
var schemas = mcp.NewSchemaCache()

// The inputs of the tools: those of package tools, with the member.

// BashInput is the bash tool's input.
type BashInput struct {
	Member  string `json:"member,omitempty" jsonschema:"The team member to act as: the call runs in the member's git worktree .worktrees/<member> (branch <member>), created from HEAD by the first call naming it. 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit. Empty: the project root"`
	Command string `json:"command" jsonschema:"The shell command to run with sh -c in the member's worktree (or the project root)"`
	Timeout int    `json:"timeout,omitempty" jsonschema:"Seconds before the command and all its processes are killed (default 120, at most 600)"`
}

// ReadInput is the read tool's input.
type ReadInput struct {
	Member     string `json:"member,omitempty" jsonschema:"The team member to act as: the call runs in the member's git worktree .worktrees/<member> (branch <member>), created from HEAD by the first call naming it. 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit. Empty: the project root"`
	Path       string `json:"path" jsonschema:"The file to read, relative to the member's worktree (or the project root) or absolute inside the project"`
	Offset     int    `json:"offset,omitempty" jsonschema:"The line to start at, counting from 1 (default 1)"`
	Limit      int    `json:"limit,omitempty" jsonschema:"The most lines to return (default and maximum 2000)"`
	ByteOffset int64  `json:"byteOffset,omitempty" jsonschema:"For a line too long to show at once: the byte within the line (at offset) to start at, counting from 0"`
}

// WriteInput is the write tool's input.
type WriteInput struct {
	Member  string `json:"member,omitempty" jsonschema:"The team member to act as: the call runs in the member's git worktree .worktrees/<member> (branch <member>), created from HEAD by the first call naming it. 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit. Empty: the project root"`
	Path    string `json:"path" jsonschema:"The file to write, relative to the member's worktree (or the project root) or absolute inside the project; missing parent directories are created"`
	Content string `json:"content" jsonschema:"The file's whole new content"`
}

// EditInput is the edit tool's input.
type EditInput struct {
	Member  string `json:"member,omitempty" jsonschema:"The team member to act as: the call runs in the member's git worktree .worktrees/<member> (branch <member>), created from HEAD by the first call naming it. 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit. Empty: the project root"`
	Path    string `json:"path" jsonschema:"The file to edit, relative to the member's worktree (or the project root) or absolute inside the project"`
	OldText string `json:"oldText" jsonschema:"The exact text to replace, including whitespace and line breaks; it must occur exactly once in the file"`
	NewText string `json:"newText" jsonschema:"The text to put in its place"`
}

// MembersInput is the members tool's input: nothing.
type MembersInput struct{}

// BashOutput is the bash tool's structured result.
type BashOutput struct {
	Text       string `json:"text" jsonschema:"Standard output then standard error, possibly truncated to its tail"`
	ExitCode   int    `json:"exitCode" jsonschema:"Exit status of the command, -1 when it was killed"`
	FullOutput string `json:"fullOutput,omitempty" jsonschema:"Path, relative to where the command ran, of the file holding the whole output, when it was truncated"`
}

// New returns a server whose tools run in opts.Target, the container of
// opts.Box's project. Servers of one project made by New share the
// per-member turns (they are this process's), so a handler may make one
// per request or share one.
func New(opts Options) *mcp.Server {
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.Version == "" {
		opts.Version = "dev"
	}
	h := &handlers{Options: opts, project: opts.Target.Workdir}
	s := mcp.NewServer(&mcp.Implementation{Name: "hutch-project", Title: "hutch project team", Version: opts.Version},
		&mcp.ServerOptions{Logger: opts.Log, SchemaCache: schemas, Instructions: instructions(h.project)})
	mcp.AddTool(s, mcptools.Bash(bashDescription(h.project)), h.bash)
	mcp.AddTool(s, mcptools.Read(readDescription(h.project)), h.read)
	mcp.AddTool(s, mcptools.Write(writeDescription(h.project)), h.write)
	mcp.AddTool(s, mcptools.Edit(editDescription(h.project)), h.edit)
	mcp.AddTool(s, &mcp.Tool{
		Name:        "members",
		Title:       "List the team's members",
		Description: membersDescription(h.project),
		Annotations: &mcp.ToolAnnotations{Title: "List the team's members", ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: new(false)},
	}, h.members)
	return s
}

// handlers are the tools of one project.
type handlers struct {
	Options
	// project is the project as the container sees it.
	project string
}

// bash runs a command. A client that gave the call a progress token is
// sent progress while it runs (mcptools.StartProgress); one that goes
// away cancels ctx, which kills the command's process group.
func (h *handlers) bash(ctx context.Context, req *mcp.CallToolRequest, in BashInput) (*mcp.CallToolResult, BashOutput, error) {
	ctx, cancel := withRequest(ctx)
	defer cancel()
	sb, unlock, err := h.lockedSandbox(ctx, in.Member)
	if err != nil {
		return fail[BashOutput](h, "bash", err)
	}
	defer unlock()
	p := mcptools.StartProgress(ctx, req, h.Log)
	defer p.Stop()
	out, err := tools.Bash(ctx, p.Sandbox(sb), tools.BashInput{Command: in.Command, Timeout: in.Timeout})
	bo := BashOutput{Text: out.Text, ExitCode: out.ExitCode, FullOutput: out.FullOutput}
	if res, ok := mcptools.CommandResult(out.Text, err); ok {
		return res, bo, nil
	}
	return fail[BashOutput](h, "bash", err)
}

func (h *handlers) read(ctx context.Context, _ *mcp.CallToolRequest, in ReadInput) (*mcp.CallToolResult, mcptools.ReadOutput, error) {
	sb, err := h.sandboxOf(ctx, in.Member)
	if err != nil {
		return fail[mcptools.ReadOutput](h, "read", err)
	}
	out, err := tools.Read(ctx, sb, tools.ReadInput{Path: in.Path, Offset: in.Offset, Limit: in.Limit, ByteOffset: in.ByteOffset})
	if err != nil {
		return fail[mcptools.ReadOutput](h, "read", err)
	}
	abs, _ := tools.Resolve(sb, in.Path)
	res, ro := mcptools.ReadResult(abs, out)
	return res, ro, nil
}

func (h *handlers) write(ctx context.Context, _ *mcp.CallToolRequest, in WriteInput) (*mcp.CallToolResult, tools.WriteOutput, error) {
	sb, unlock, err := h.lockedSandbox(ctx, in.Member)
	if err != nil {
		return fail[tools.WriteOutput](h, "write", err)
	}
	defer unlock()
	out, err := tools.Write(ctx, sb, tools.WriteInput{Path: in.Path, Content: in.Content})
	if err != nil {
		return fail[tools.WriteOutput](h, "write", err)
	}
	return &mcp.CallToolResult{Content: mcptools.Text(out.Text)}, out, nil
}

func (h *handlers) edit(ctx context.Context, _ *mcp.CallToolRequest, in EditInput) (*mcp.CallToolResult, tools.EditOutput, error) {
	sb, unlock, err := h.lockedSandbox(ctx, in.Member)
	if err != nil {
		return fail[tools.EditOutput](h, "edit", err)
	}
	defer unlock()
	out, err := tools.Edit(ctx, sb, tools.EditInput{Path: in.Path, OldText: in.OldText, NewText: in.NewText})
	if err != nil {
		return fail[tools.EditOutput](h, "edit", err)
	}
	return &mcp.CallToolResult{Content: mcptools.Text(out.Text)}, out, nil
}

func (h *handlers) members(ctx context.Context, _ *mcp.CallToolRequest, _ MembersInput) (*mcp.CallToolResult, MembersOutput, error) {
	out, err := listMembers(ctx, newMemberSandbox(h.Target, h.project, h.project))
	if err != nil {
		return fail[MembersOutput](h, "members", err)
	}
	return &mcp.CallToolResult{Content: mcptools.Text(out.Text)}, out, nil
}

// lockedSandbox waits for member's turn at the file-changing tools, then
// returns its sandbox and the unlock.
func (h *handlers) lockedSandbox(ctx context.Context, member string) (*memberSandbox, func(), error) {
	if err := h.checkMember(member); err != nil {
		return nil, nil, err
	}
	unlock, err := turns.Lock(ctx, h.Box.ProjectDir()+"\x00member\x00"+member)
	if err != nil {
		return nil, nil, err
	}
	sb, err := h.sandboxOf(ctx, member)
	if err != nil {
		unlock()
		return nil, nil, err
	}
	return sb, unlock, nil
}

// sandboxOf returns member's sandbox (the project root's for ""), making
// the member's worktree first when it has none.
func (h *handlers) sandboxOf(ctx context.Context, member string) (*memberSandbox, error) {
	if member == "" {
		return newMemberSandbox(h.Target, h.project, h.project), nil
	}
	if err := h.checkMember(member); err != nil {
		return nil, err
	}
	// One worktree is made at a time: git worktree add of two members at
	// once would race on the repository's administrative files.
	unlock, err := turns.Lock(ctx, h.Box.ProjectDir()+"\x00worktrees")
	if err != nil {
		return nil, err
	}
	defer unlock()
	if _, err := h.Box.Worktree(ctx, h.Target, member); err != nil {
		return nil, err
	}
	return newMemberSandbox(h.Target, path.Join(h.project, box.WorktreesDir, member), h.project), nil
}

// checkMember refuses a member name box.WorktreeDir refuses ("" is the
// project root, always fine).
func (h *handlers) checkMember(member string) error {
	if member == "" {
		return nil
	}
	_, err := box.WorktreeDir(h.Box.ProjectDir(), member)
	return err
}

// fail is mcptools.Fail with the server's log.
func fail[Out any](h *handlers, tool string, err error) (*mcp.CallToolResult, Out, error) {
	return mcptools.Fail[Out](h.Log, tool, err)
}

// instructions is what the server tells a client about itself.
func instructions(project string) string {
	return fmt.Sprintf(`These tools act on the project %s inside its hutch sandbox container: every command and file operation runs in the container, never on the host, and files outside the project cannot be reached. Give a tool a member to act as that team member, in the member's own git worktree .worktrees/<member>; without one, it acts in the project root. members lists the worktrees.`, project)
}
