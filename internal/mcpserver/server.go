package mcpserver

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/hutchsandbox/hutch/internal/events"
	"github.com/hutchsandbox/hutch/internal/keyedlock"
	"github.com/hutchsandbox/hutch/internal/mcptools"
	"github.com/hutchsandbox/hutch/internal/metrics"
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
	bashDescription = `Run a shell command (sh -c) in this conversation's sandbox. It starts in the office, the conversation's own directory. Returns standard output, then standard error.

` + mcptools.BashOutputParagraph("in the office") + fmt.Sprintf(`

timeout is in seconds (default %d, at most %d); when it passes, the command and every process it started are killed.`, int(tools.DefaultBashTimeout.Seconds()), int(tools.MaxBashTimeout.Seconds()))

	readDescription = `Read a file in this conversation's sandbox. A relative path starts at the office; an absolute path is a path inside the sandbox. Nothing outside what the sandbox mounts can be reached, through symlinks neither.

` + mcptools.ReadParagraphs

	writeDescription = `Create or replace a file in this conversation's sandbox with the given content. A relative path starts at the office; an absolute path is a path inside the sandbox, and nothing outside what the sandbox mounts can be reached.

` + mcptools.WriteParagraph

	editDescription = `Replace one exact occurrence of oldText with newText in a file of this conversation's sandbox, and return a unified diff of the change. Paths are as for read and write.

` + mcptools.EditParagraph

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
	return newServer(h, instructions, log)
}

// instructions is what the server tells the client at the handshake.
const instructions = "These tools run in the sandbox of one conversation. Its office (the conversation's own directory) is where commands start and relative paths begin."

// RefusalPrefix starts the text of every call a Refusing server answers.
const RefusalPrefix = "hutch mcp cannot run any tool here: "

// Refusing returns a server for `hutch mcp` when it cannot serve at all
// (no state dir, a mode or door policy it refuses): it completes the
// handshake, lists the tools New serves, and answers every tools/call,
// whatever its tool and arguments, with a tool error of RefusalPrefix
// and the refusal's text, which its instructions carry too. An MCP
// client that starts hutch then shows the reason to its user and model,
// instead of a closed connection. A nil log discards.
func Refusing(refusal error, log *slog.Logger) *mcp.Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	text := RefusalPrefix + refusal.Error()
	s := newServer(nil, text, log)
	s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "tools/call" {
				return &mcp.CallToolResult{Content: mcptools.Text(text), IsError: true}, nil
			}
			return next(ctx, method, req)
		}
	})
	return s
}

// newServer registers the tools of h; a nil h serves only a Refusing
// server, whose middleware answers every call before a handler would run.
func newServer(h *handlers, instructions string, log *slog.Logger) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "hutch", Title: "hutch sandbox", Version: Version}, &mcp.ServerOptions{
		Instructions: instructions,
		Logger:       log,
		SchemaCache:  schemas,
	})
	mcp.AddTool(s, mcptools.Bash(bashDescription), h.bash)
	mcp.AddTool(s, mcptools.Read(readDescription), h.read)
	mcp.AddTool(s, mcptools.Write(writeDescription), h.write)
	mcp.AddTool(s, mcptools.Edit(editDescription), h.edit)
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

// bash runs a command. A client that gave the call a progress token is
// sent progress while it runs (mcptools.StartProgress). A client's
// notifications/cancelled naming the call cancels ctx (the SDK does
// that), which kills the command's process group as its timeout would.
func (h *handlers) bash(ctx context.Context, req *mcp.CallToolRequest, in tools.BashInput) (*mcp.CallToolResult, tools.BashOutput, error) {
	ctx = h.actor(ctx)
	unlock, err := h.lock(ctx)
	if err != nil {
		return fail[tools.BashOutput](h, "bash", err)
	}
	defer unlock()
	sb, err := h.sandboxOf(ctx)
	if err != nil {
		return fail[tools.BashOutput](h, "bash", err)
	}
	p := mcptools.StartProgress(ctx, req, h.log)
	defer p.Stop()
	out, err := tools.Bash(ctx, p.Sandbox(sb), in)
	if res, ok := mcptools.CommandResult(out.Text, err); ok {
		return res, out, nil
	}
	return fail[tools.BashOutput](h, "bash", err)
}

func (h *handlers) read(ctx context.Context, _ *mcp.CallToolRequest, in tools.ReadInput) (*mcp.CallToolResult, mcptools.ReadOutput, error) {
	ctx = h.actor(ctx)
	sb, err := h.sandboxOf(ctx)
	if err != nil {
		return fail[mcptools.ReadOutput](h, "read", err)
	}
	out, err := tools.Read(ctx, sb, in)
	if err != nil {
		return fail[mcptools.ReadOutput](h, "read", err)
	}
	abs, _ := tools.Resolve(sb, in.Path)
	res, ro := mcptools.ReadResult(abs, out)
	return res, ro, nil
}

func (h *handlers) write(ctx context.Context, _ *mcp.CallToolRequest, in tools.WriteInput) (*mcp.CallToolResult, tools.WriteOutput, error) {
	ctx = h.actor(ctx)
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
	return &mcp.CallToolResult{Content: mcptools.Text(out.Text)}, out, nil
}

func (h *handlers) edit(ctx context.Context, _ *mcp.CallToolRequest, in tools.EditInput) (*mcp.CallToolResult, tools.EditOutput, error) {
	ctx = h.actor(ctx)
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
	return &mcp.CallToolResult{Content: mcptools.Text(out.Text)}, out, nil
}

func (h *handlers) sandbox(ctx context.Context, _ *mcp.CallToolRequest, in tools.SandboxInput) (*mcp.CallToolResult, tools.SandboxOutput, error) {
	ctx = h.actor(ctx)
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
	return &mcp.CallToolResult{Content: mcptools.Text(out.Text)}, out, nil
}

// actor names MCP, and the user when known, as the surface of what a
// tool call changes (the event log).
func (h *handlers) actor(ctx context.Context) context.Context {
	return events.WithTarget(events.WithActor(ctx, events.Actor{Surface: events.SurfaceMCP, Who: h.user}), h.conv.String())
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

// fail is mcptools.Fail with this conversation's log; a refusal is
// counted in the daemon's metrics.
func fail[Out any](h *handlers, tool string, err error) (*mcp.CallToolResult, Out, error) {
	h.svc.CountRefusal(h.actor(context.Background()), metrics.SurfaceMCP, err)
	return mcptools.Fail[Out](h.log, tool, err)
}
