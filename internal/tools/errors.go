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

// showPath renders a path given by the agent for a message: as is, or
// quoted when it holds characters a message should not carry raw (NUL,
// newlines, other control characters).
func showPath(p string) string {
	if strings.IndexFunc(p, func(r rune) bool { return !unicode.IsPrint(r) && r != ' ' }) >= 0 {
		return strconv.Quote(p)
	}
	return p
}
