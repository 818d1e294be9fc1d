package tools

import (
	"context"
	"fmt"
	"strings"
)

// WriteInput is the write tool's input.
type WriteInput struct {
	Path    string `json:"path" jsonschema:"The file to write, relative to the office or absolute; missing parent directories are created"`
	Content string `json:"content" jsonschema:"The file's whole new content"`
}

// WriteOutput is the write tool's result.
type WriteOutput struct {
	Text  string `json:"text" jsonschema:"What was written"`
	Bytes int    `json:"bytes" jsonschema:"How many bytes were written"`
}

// Write replaces (or creates) a file with in.Content, creating missing
// parent directories. The write is atomic (Sandbox.WriteFile stages and
// renames): a reader sees the old content or the new, never a mix. An
// existing file keeps its mode; a new one is 0644. The result is
// `Wrote N bytes to <path>`, with the path as the agent gave it.
func Write(ctx context.Context, sb Sandbox, in WriteInput) (WriteOutput, error) {
	abs, err := Resolve(sb, in.Path)
	if err != nil {
		return WriteOutput{}, err
	}
	if err := sb.WriteFile(ctx, abs, strings.NewReader(in.Content), 0); err != nil {
		return WriteOutput{}, err
	}
	return WriteOutput{
		Text:  fmt.Sprintf("Wrote %d bytes to %s", len(in.Content), showPath(in.Path)),
		Bytes: len(in.Content),
	}, nil
}
