package tools

import (
	"strconv"
	"strings"
	"unicode"
)

// ToolError is a tool result the agent must see as a failure: the call
// itself worked (the command ran), but what it reports is an error. Text
// is the whole result, output included. The MCP layer returns it as a
// result with IsError set; it belongs to no errdefs class.
type ToolError struct {
	Text string
}

func (e *ToolError) Error() string { return e.Text }

// formatSize renders n bytes in the largest binary unit that keeps it
// readable: "512 B", "50.0 KiB", "1.5 MiB".
func formatSize(n int64) string {
	const unit = 1024
	if n < unit {
		return strconv.FormatInt(n, 10) + " B"
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return strconv.FormatFloat(float64(n)/float64(div), 'f', 1, 64) + " " + string("KMGTPE"[exp]) + "iB"
}

// showPath renders a path given by the agent for a message: as is, or
// quoted when it holds characters a message should not carry raw (NUL,
// newlines, other control characters).
func showPath(p string) string {
	if strings.IndexFunc(p, func(r rune) bool { return !unicode.IsPrint(r) && r != ' ' }) >= 0 {
		return strconv.Quote(p)
	}
	return p
}
