package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/tools"
)

// ToolRequest is the body of /v1/tools/{bash,read,write,edit}: the
// conversation and the tool's input, as the MCP tools take it.
type ToolRequest struct {
	Conversation Conversation    `json:"conversation"`
	Input        json.RawMessage `json:"input"`
}

// ToolAnswer is a tool's result. A tool that ran but failed (a command
// exiting non-zero, an edit that matched nothing) answers 200 with
// IsError and Text, as an MCP tool error; a request that could not be
// served at all answers an error status.
type ToolAnswer struct {
	Output  any    `json:"output,omitempty"`
	IsError bool   `json:"isError,omitempty"`
	Text    string `json:"text,omitempty"`
}

func (s *Server) tool(w http.ResponseWriter, r *http.Request) error {
	var req ToolRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	addr, err := addressOf(r.Context(), req.Conversation)
	if err != nil {
		return err
	}
	if err := s.recordKind(addr, req.Conversation); err != nil {
		return err
	}
	run, ok := toolTable[r.PathValue("name")]
	if !ok {
		return errdefs.New(errdefs.ErrNotFound, "No such tool: "+r.PathValue("name")+" (bash, read, write, edit)")
	}
	sb, err := s.Service.ToolSandbox(r.Context(), addr, s.Mode, req.Conversation.User)
	if err != nil {
		return err
	}
	out, err := run(r.Context(), sb, req.Input)
	var te *tools.ToolError
	if errors.As(err, &te) {
		writeJSON(w, http.StatusOK, ToolAnswer{Output: out, IsError: true, Text: te.Text})
		return nil
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, ToolAnswer{Output: out})
	return nil
}

type toolFunc func(ctx context.Context, sb tools.Sandbox, input json.RawMessage) (any, error)

// typed adapts one typed tool to raw JSON input, strictly decoded.
func typed[In, Out any](f func(context.Context, tools.Sandbox, In) (Out, error)) toolFunc {
	return func(ctx context.Context, sb tools.Sandbox, raw json.RawMessage) (any, error) {
		var in In
		if len(raw) == 0 {
			return nil, errdefs.New(errdefs.ErrInvalid, "Give the tool's input")
		}
		dec := json.NewDecoder(bytesReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&in); err != nil {
			return nil, errdefs.New(errdefs.ErrInvalid, "Malformed tool input: "+err.Error())
		}
		return f(ctx, sb, in)
	}
}

var toolTable = map[string]toolFunc{
	"bash":  typed(tools.Bash),
	"read":  typed(tools.Read),
	"write": typed(tools.Write),
	"edit":  typed(tools.Edit),
}
