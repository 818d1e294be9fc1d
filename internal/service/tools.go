package service

import (
	"context"
	"path"

	"github.com/hutchsandbox/hutch/internal/office"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/tools"
)

// ToolSandbox returns the sandbox the agent tools (bash, read, write,
// edit) run against for one conversation in one mode: commands through
// the mode's runtime with the vault env, file operations through the
// mode's Files (its agent, its bridge, or in host mode this process),
// confined to what the door policy projects.
func (s *Service) ToolSandbox(ctx context.Context, addr office.Address, mode sandbox.Mode, user string) (tools.Sandbox, error) {
	p, err := s.prepare(ctx, addr, mode, user)
	if err != nil {
		return nil, err
	}
	return &toolSandbox{Files: p.rt.Files(p.spec), p: p}, nil
}

// toolSandbox implements tools.Sandbox over a prepared conversation.
type toolSandbox struct {
	sandbox.Files
	p *prepared
}

func (t *toolSandbox) Exec(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	req.Env, req.TimeZone = t.p.env, t.p.timeZone
	if req.Dir != "" && !path.IsAbs(req.Dir) {
		req.Dir = path.Join(t.Office(), req.Dir)
	}
	return t.p.rt.Exec(ctx, t.p.spec, req)
}
