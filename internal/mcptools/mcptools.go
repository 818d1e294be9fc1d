// Package mcptools is the MCP side of the agent tools that both of
// hutch's MCP servers serve: the conversation server (internal/mcpserver)
// and the project team server (internal/project/teammcp). The tools
// themselves are package tools; here is what turns them into MCP tools
// the same way in both: their names, titles and annotations, the parts of
// their descriptions that do not depend on where they run, how a result
// becomes MCP content (an image as image content, another binary file as
// an embedded resource), how a failure becomes a tool error, and bash's
// progress notifications (StartProgress).
package mcptools

import (
	"errors"
	"fmt"
	"log/slog"
	"path"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/tools"
)

// Bash, Read, Write and Edit are the four file-and-command tools, with the
// description the server gives them.
func Bash(description string) *mcp.Tool {
	return &mcp.Tool{
		Name:        "bash",
		Title:       "Run a command",
		Description: description,
		Annotations: &mcp.ToolAnnotations{Title: "Run a command"},
	}
}

// Read is the read tool.
func Read(description string) *mcp.Tool {
	return &mcp.Tool{
		Name:        "read",
		Title:       "Read a file",
		Description: description,
		Annotations: &mcp.ToolAnnotations{Title: "Read a file", ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: new(false)},
	}
}

// Write is the write tool.
func Write(description string) *mcp.Tool {
	return &mcp.Tool{
		Name:        "write",
		Title:       "Write a file",
		Description: description,
		Annotations: &mcp.ToolAnnotations{Title: "Write a file", IdempotentHint: true, OpenWorldHint: new(false)},
	}
}

// Edit is the edit tool.
func Edit(description string) *mcp.Tool {
	return &mcp.Tool{
		Name:        "edit",
		Title:       "Edit a file",
		Description: description,
		Annotations: &mcp.ToolAnnotations{Title: "Edit a file", OpenWorldHint: new(false)},
	}
}

// The paragraphs of the descriptions that say what the tools do, the same
// wherever they run; each server writes the first paragraph, which says
// where.
var (
	// BashOutputParagraph follows bash's first paragraph; where names
	// where the whole output is saved ("in the office", "where the
	// command ran").
	BashOutputParagraph = func(where string) string {
		return fmt.Sprintf(`When the output exceeds %d lines or %d KiB, the whole output is saved %s as %s/<id>.log and only its tail is returned, followed by a line saying which lines are shown and where the full output is. An empty output is returned as "(no output)". A non-zero exit is a tool error ending with "Command exited with code N".`,
			tools.MaxLines, tools.MaxBytes>>10, where, tools.OutputDir)
	}

	// ReadParagraphs follow read's first paragraph.
	ReadParagraphs = fmt.Sprintf(`Text is returned from line offset (default 1), at most limit lines and never more than %d lines or %d KiB per call; when more remains, a last line says which lines are shown and the offset to continue from. A single line longer than %d KiB is returned in slices: the last line says the byteOffset to continue from. An offset past the end says how many lines the file has. Bytes that are not UTF-8 are shown as U+FFFD, and a last line says so.

PNG, JPEG, GIF and WebP images (at most %d MiB) are returned as image content. Other binary files (at most %d MiB) are returned as an embedded resource holding their bytes, with their size and media type; larger ones are refused with their size.`,
		tools.MaxLines, tools.MaxBytes>>10, tools.MaxBytes>>10, tools.MaxImageBytes>>20, tools.MaxBinaryBytes>>20)

	// WriteParagraph follows write's first paragraph.
	WriteParagraph = `Missing parent directories are created. The write is atomic: a reader sees the old content or the new, never a mix (a file mounted on its own, such as a shared MEMORY.md, is written in place). An existing file keeps its permissions.`

	// EditParagraph follows edit's first paragraph.
	EditParagraph = `oldText must match exactly, whitespace and line breaks included, and occur exactly once in the file. No match, several matches, or newText equal to oldText are errors that say what to do (for several matches: add surrounding lines to oldText).`
)

// ReadOutput is the read tool's structured result. An image's or another
// binary file's bytes are in the result's content only, not repeated
// here.
type ReadOutput struct {
	Text     string `json:"text" jsonschema:"The lines read, followed by a notice when more remains"`
	MIMEType string `json:"mimeType,omitempty" jsonschema:"The media type of an image or other binary file (its bytes are the result's image content or embedded resource)"`
	Size     int64  `json:"size,omitempty" jsonschema:"The size in bytes of a binary file that is not an image"`
}

// ReadResult turns a read of p (as the runtime sees it, absolute) into
// MCP content: the text, then an image as image content or another
// binary file as an embedded resource (file:// URI, its bytes as a blob).
func ReadResult(p string, out tools.ReadOutput) (*mcp.CallToolResult, ReadOutput) {
	res := &mcp.CallToolResult{Content: Text(out.Text)}
	ro := ReadOutput{Text: out.Text}
	switch {
	case out.Image != nil:
		res.Content = append(res.Content, &mcp.ImageContent{MIMEType: out.Image.MIMEType, Data: out.Image.Data})
		ro.MIMEType = out.Image.MIMEType
	case out.Binary != nil:
		res.Content = append(res.Content, &mcp.EmbeddedResource{Resource: &mcp.ResourceContents{
			URI:      "file://" + path.Clean("/"+p),
			MIMEType: out.Binary.MIMEType,
			Blob:     out.Binary.Data,
		}})
		ro.MIMEType, ro.Size = out.Binary.MIMEType, out.Binary.Size
	}
	return res, ro
}

// Text is a result's content of one text.
func Text(s string) []mcp.Content { return []mcp.Content{&mcp.TextContent{Text: s}} }

// CommandResult is the result of a bash call: a command that ran and
// failed (a *tools.ToolError) is a tool error whose text is the output
// and exit code; done reports whether err was that, or nil.
func CommandResult(text string, err error) (res *mcp.CallToolResult, done bool) {
	var te *tools.ToolError
	if errors.As(err, &te) {
		return &mcp.CallToolResult{IsError: true, Content: Text(te.Text)}, true
	}
	if err != nil {
		return nil, false
	}
	return &mcp.CallToolResult{Content: Text(text)}, true
}

// Fail is a call that could not be served, as a tool error with the
// error's text (the SDK sets IsError and the text content). The class
// goes to the log; an error of no class is logged as a warning, since it
// is a failure hutch did not foresee.
func Fail[Out any](log *slog.Logger, tool string, err error) (*mcp.CallToolResult, Out, error) {
	var zero Out
	if code := errdefs.Code(err); code == errdefs.CodeInternal {
		log.Warn("tool failed", "tool", tool, "error", err)
	} else {
		log.Debug("tool refused", "tool", tool, "class", code, "error", err)
	}
	return nil, zero, toolError{err.Error()}
}

// toolError is the text of a failed call. It is a plain error, never a
// *jsonrpc.Error, so the SDK always makes it a tool error.
type toolError struct{ text string }

func (e toolError) Error() string { return e.text }
