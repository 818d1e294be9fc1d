package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/keyedlock"
	"github.com/hutchsandbox/hutch/internal/office"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/service"
	"github.com/hutchsandbox/hutch/internal/tools"
)

// Version is the version the server announces; package cli sets it to
// hutch's own.
var Version = "dev"

// schemas caches the schemas inferred from the tools' structs: the
// streamable HTTP handler builds a server per session.
var schemas = mcp.NewSchemaCache()

// The tools' descriptions: what the agent reads to choose and call them.
var (
	bashDescription = fmt.Sprintf(`Run a shell command (sh -c) in this conversation's sandbox. It starts in the office, the conversation's own directory. Returns standard output, then standard error.

When the output exceeds %d lines or %d KiB, the whole output is saved in the office as %s/<id>.log and only its tail is returned, followed by a line saying which lines are shown and where the full output is. An empty output is returned as "(no output)". A non-zero exit is a tool error ending with "Command exited with code N".

timeout is in seconds (default %d, at most %d); when it passes, the command and every process it started are killed.`,
		tools.MaxLines, tools.MaxBytes>>10, tools.OutputDir, int(tools.DefaultBashTimeout.Seconds()), int(tools.MaxBashTimeout.Seconds()))

	readDescription = fmt.Sprintf(`Read a file in this conversation's sandbox. A relative path starts at the office; an absolute path is a path inside the sandbox. Nothing outside what the sandbox mounts can be reached, through symlinks neither.

Text is returned from line offset (default 1), at most limit lines and never more than %d lines or %d KiB per call; when more remains, a last line says which lines are shown and the offset to continue from. A single line longer than %d KiB is returned in slices: the last line says the byteOffset to continue from. An offset past the end says how many lines the file has.

PNG, JPEG, GIF and WebP images (at most %d MiB) are returned as image content. Other binary files are refused.`,
		tools.MaxLines, tools.MaxBytes>>10, tools.MaxBytes>>10, tools.MaxImageBytes>>20)

	writeDescription = `Create or replace a file in this conversation's sandbox with the given content. A relative path starts at the office; an absolute path is a path inside the sandbox, and nothing outside what the sandbox mounts can be reached.

Missing parent directories are created. The write is atomic: a reader sees the old content or the new, never a mix. An existing file keeps its permissions.`

	editDescription = `Replace one exact occurrence of oldText with newText in a file of this conversation's sandbox, and return a unified diff of the change. Paths are as for read and write.

oldText must match exactly, whitespace and line breaks included, and occur exactly once in the file. No match, several matches, or newText equal to oldText are errors that say what to do (for several matches: add surrounding lines to oldText).`

	sandboxDescription = `Show or change the resources of this conversation's sandbox.

action=status shows its state, its CPU, memory and process limits, and whether it is boosted or has temporary limits. action=set sets temporary limits (cpus, e.g. 2 or 0.5; memory, e.g. 512m or 4g) that last until the sandbox stops; it stops when idle, and starts again with the default limits at the next command.

Only managed sandboxes (image mode) have limits; in other modes the tool says so.`
)

// New returns an MCP server whose tools run in the sandbox of conversation
// conv in mode; user is the platform user whose vault host mode uses. A
// nil log discards.
//
// Each call gets the conversation's sandbox from the service, so a door
// policy or vault changed meanwhile applies at the next call, and a
// stopped runtime starts again. bash, write and edit of one conversation
// run one at a time in this process (edit reads then writes the file);
// read and sandbox run alongside them.
func New(svc *service.Service, mode sandbox.Mode, conv office.Address, user string, log *slog.Logger) *mcp.Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("conversation", conv.String(), "office_key", string(conv.Key()), "mode", mode.String())
	h := &handlers{svc: svc, mode: mode, conv: conv, user: user, log: log}
	s := mcp.NewServer(&mcp.Implementation{Name: "hutch", Title: "hutch sandbox", Version: Version}, &mcp.ServerOptions{
		Instructions: "These tools run in the sandbox of one conversation. Its office (the conversation's own directory) is where commands start and relative paths begin.",
		Logger:       log,
		SchemaCache:  schemas,
	})
	mcp.AddTool(s, &mcp.Tool{
		Name:        "bash",
		Title:       "Run a command",
		Description: bashDescription,
		Annotations: &mcp.ToolAnnotations{Title: "Run a command"},
	}, h.bash)
	mcp.AddTool(s, &mcp.Tool{
		Name:        "read",
		Title:       "Read a file",
		Description: readDescription,
		Annotations: &mcp.ToolAnnotations{Title: "Read a file", ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: new(false)},
	}, h.read)
	mcp.AddTool(s, &mcp.Tool{
		Name:        "write",
		Title:       "Write a file",
		Description: writeDescription,
		Annotations: &mcp.ToolAnnotations{Title: "Write a file", IdempotentHint: true, OpenWorldHint: new(false)},
	}, h.write)
	mcp.AddTool(s, &mcp.Tool{
		Name:        "edit",
		Title:       "Edit a file",
		Description: editDescription,
		Annotations: &mcp.ToolAnnotations{Title: "Edit a file", OpenWorldHint: new(false)},
	}, h.edit)
	mcp.AddTool(s, &mcp.Tool{
		Name:        "sandbox",
		Title:       "Sandbox resources",
		Description: sandboxDescription,
		Annotations: &mcp.ToolAnnotations{Title: "Sandbox resources", DestructiveHint: new(false), OpenWorldHint: new(false)},
	}, h.sandbox)
	return s
}

// conversations serialises the file-changing tools of each conversation
// across every server of this process (the HTTP handler makes one per
// session, and two sessions may share a conversation).
var conversations keyedlock.Lock

// handlers are the tools of one conversation.
type handlers struct {
	svc  *service.Service
	mode sandbox.Mode
	conv office.Address
	user string
	log  *slog.Logger
}

// ReadOutput is the read tool's structured result. An image's bytes are
// in the result's image content only, not repeated here.
type ReadOutput struct {
	Text     string `json:"text" jsonschema:"The lines read, followed by a notice when more remains"`
	MIMEType string `json:"mimeType,omitempty" jsonschema:"The image's media type, when the file is an image (its bytes are the result's image content)"`
}

func (h *handlers) bash(ctx context.Context, _ *mcp.CallToolRequest, in tools.BashInput) (*mcp.CallToolResult, tools.BashOutput, error) {
	unlock, err := h.lock(ctx)
	if err != nil {
		return fail[tools.BashOutput](h, "bash", err)
	}
	defer unlock()
	sb, err := h.sandboxOf(ctx)
	if err != nil {
		return fail[tools.BashOutput](h, "bash", err)
	}
	out, err := tools.Bash(ctx, sb, in)
	if te := (*tools.ToolError)(nil); errors.As(err, &te) {
		// The command ran: its output and exit code are the result too.
		return &mcp.CallToolResult{IsError: true, Content: text(te.Text)}, out, nil
	}
	if err != nil {
		return fail[tools.BashOutput](h, "bash", err)
	}
	return &mcp.CallToolResult{Content: text(out.Text)}, out, nil
}

func (h *handlers) read(ctx context.Context, _ *mcp.CallToolRequest, in tools.ReadInput) (*mcp.CallToolResult, ReadOutput, error) {
	sb, err := h.sandboxOf(ctx)
	if err != nil {
		return fail[ReadOutput](h, "read", err)
	}
	out, err := tools.Read(ctx, sb, in)
	if err != nil {
		return fail[ReadOutput](h, "read", err)
	}
	res := &mcp.CallToolResult{Content: text(out.Text)}
	ro := ReadOutput{Text: out.Text}
	if out.Image != nil {
		res.Content = append(res.Content, &mcp.ImageContent{MIMEType: out.Image.MIMEType, Data: out.Image.Data})
		ro.MIMEType = out.Image.MIMEType
	}
	return res, ro, nil
}

func (h *handlers) write(ctx context.Context, _ *mcp.CallToolRequest, in tools.WriteInput) (*mcp.CallToolResult, tools.WriteOutput, error) {
	unlock, err := h.lock(ctx)
	if err != nil {
		return fail[tools.WriteOutput](h, "write", err)
	}
	defer unlock()
	sb, err := h.sandboxOf(ctx)
	if err != nil {
		return fail[tools.WriteOutput](h, "write", err)
	}
	out, err := tools.Write(ctx, sb, in)
	if err != nil {
		return fail[tools.WriteOutput](h, "write", err)
	}
	return &mcp.CallToolResult{Content: text(out.Text)}, out, nil
}

func (h *handlers) edit(ctx context.Context, _ *mcp.CallToolRequest, in tools.EditInput) (*mcp.CallToolResult, tools.EditOutput, error) {
	unlock, err := h.lock(ctx)
	if err != nil {
		return fail[tools.EditOutput](h, "edit", err)
	}
	defer unlock()
	sb, err := h.sandboxOf(ctx)
	if err != nil {
		return fail[tools.EditOutput](h, "edit", err)
	}
	out, err := tools.Edit(ctx, sb, in)
	if err != nil {
		return fail[tools.EditOutput](h, "edit", err)
	}
	return &mcp.CallToolResult{Content: text(out.Text)}, out, nil
}

func (h *handlers) sandbox(ctx context.Context, _ *mcp.CallToolRequest, in tools.SandboxInput) (*mcp.CallToolResult, tools.SandboxOutput, error) {
	var lim tools.Limiter
	if sandbox.CapabilitiesOf(h.mode.Kind).ManagedLifecycle && (in.Action == "status" || in.Action == "set") {
		m, err := h.svc.ManagedFor(ctx, h.mode)
		if err != nil {
			return fail[tools.SandboxOutput](h, "sandbox", err)
		}
		lim = &limiter{rt: m, key: string(h.conv.Key())}
	}
	out, err := tools.SandboxTool(ctx, lim, h.mode.String(), in)
	if err != nil {
		return fail[tools.SandboxOutput](h, "sandbox", err)
	}
	return &mcp.CallToolResult{Content: text(out.Text)}, out, nil
}

// sandboxOf returns the conversation's sandbox: admitted, with its office
// made and its runtime ready to provision.
func (h *handlers) sandboxOf(ctx context.Context) (tools.Sandbox, error) {
	return h.svc.ToolSandbox(ctx, h.conv, h.mode, h.user)
}

// lock waits for the conversation's turn at the file-changing tools.
func (h *handlers) lock(ctx context.Context) (func(), error) {
	return conversations.Lock(ctx, string(h.conv.Key()))
}

// fail is a call that could not be served, as a tool error with the
// error's text (the SDK sets IsError and the text content). The class
// goes to the log; an error of no class is logged as a warning, since
// it is a failure hutch did not foresee.
func fail[Out any](h *handlers, tool string, err error) (*mcp.CallToolResult, Out, error) {
	var zero Out
	if classOf(err) == "" {
		h.log.Warn("tool failed", "tool", tool, "error", err)
	} else {
		h.log.Debug("tool refused", "tool", tool, "class", classOf(err), "error", err)
	}
	return nil, zero, toolError{err.Error()}
}

// toolError is the text of a failed call. It is a plain error, never a
// *jsonrpc.Error, so the SDK always makes it a tool error.
type toolError struct{ text string }

func (e toolError) Error() string { return e.text }

func text(s string) []mcp.Content { return []mcp.Content{&mcp.TextContent{Text: s}} }

// classOf names an error's class as the HTTP API does ("" for none).
func classOf(err error) string {
	for _, c := range []struct {
		class error
		name  string
	}{
		{errdefs.ErrNotFound, "not_found"},
		{errdefs.ErrInvalid, "invalid"},
		{errdefs.ErrConflict, "conflict"},
		{errdefs.ErrNotSupported, "not_supported"},
		{errdefs.ErrUnavailable, "unavailable"},
		{errdefs.ErrFailedPrecondition, "failed_precondition"},
	} {
		if errors.Is(err, c.class) {
			return c.name
		}
	}
	return ""
}
