package service

import (
	"context"
	"io"
	"os"
	"path"

	"github.com/hutchsandbox/hutch/internal/agent"
	"github.com/hutchsandbox/hutch/internal/office"
	"github.com/hutchsandbox/hutch/internal/projection"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/sandbox/container"
	"github.com/hutchsandbox/hutch/internal/sandbox/image"
	"github.com/hutchsandbox/hutch/internal/tools"
)

// ToolSandbox returns the sandbox the agent tools (bash, read, write,
// edit) run against for one conversation in one mode: commands through
// the mode's runtime with the vault env, file operations through the
// agent (or, in host mode, the same code in this process), confined to
// what the door policy projects.
func (s *Service) ToolSandbox(ctx context.Context, addr office.Address, mode sandbox.Mode, user string) (tools.Sandbox, error) {
	p, err := s.prepare(ctx, addr, mode, user)
	if err != nil {
		return nil, err
	}
	ts := &toolSandbox{p: p}
	for _, m := range p.spec.Mounts {
		ts.roots = append(ts.roots, m.RuntimePath)
	}
	if len(ts.roots) == 0 {
		// An existing container manages its own mounts; it is expected to
		// have the workspace at /workspace, so the policy's plan there is
		// what file operations may reach.
		for _, m := range projection.Plan(p.pol.Decision.Policy, s.layout.Workspace, p.spec.OfficeKey, RuntimeRoot) {
			ts.roots = append(ts.roots, m.RuntimePath)
		}
	}
	switch rt := p.rt.(type) {
	case *image.Runtime:
		ts.client = func(ctx context.Context) (*agent.Client, error) { return rt.Agent(ctx, p.spec) }
	case *container.Runtime:
		ts.client = rt.Agent
	}
	return ts, nil
}

// toolSandbox implements tools.Sandbox over a prepared conversation.
type toolSandbox struct {
	p     *prepared
	roots []string
	// client returns the runtime's agent; nil means host mode, where the
	// confined file functions run in this process.
	client func(ctx context.Context) (*agent.Client, error)
}

func (t *toolSandbox) Office() string  { return t.p.spec.OfficeRuntimePath }
func (t *toolSandbox) Roots() []string { return t.roots }

func (t *toolSandbox) Exec(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	req.Env = t.p.env
	if req.Dir != "" && !path.IsAbs(req.Dir) {
		req.Dir = path.Join(t.Office(), req.Dir)
	}
	return t.p.rt.Exec(ctx, t.p.spec, req)
}

func (t *toolSandbox) ReadFile(ctx context.Context, p string, w io.Writer) error {
	if t.client == nil {
		return agent.ReadFileWithin(p, t.roots, w)
	}
	c, err := t.client(ctx)
	if err != nil {
		return err
	}
	return c.ReadFileWithin(ctx, p, t.roots, w)
}

func (t *toolSandbox) WriteFile(ctx context.Context, p string, r io.Reader, mode os.FileMode) error {
	if t.client == nil {
		return agent.WriteFileWithin(p, t.roots, r, mode)
	}
	c, err := t.client(ctx)
	if err != nil {
		return err
	}
	return c.WriteFileWithin(ctx, p, t.roots, r, mode)
}

func (t *toolSandbox) Stat(ctx context.Context, p string) (tools.FileInfo, error) {
	var fi agent.FileInfo
	var err error
	if t.client == nil {
		fi, err = agent.StatWithin(p, t.roots)
	} else {
		var c *agent.Client
		if c, err = t.client(ctx); err == nil {
			fi, err = c.Stat(ctx, p, t.roots)
		}
	}
	return tools.FileInfo(fi), err
}

func (t *toolSandbox) List(ctx context.Context, p string) ([]tools.FileInfo, error) {
	var list []agent.FileInfo
	var err error
	if t.client == nil {
		list, err = agent.ListWithin(p, t.roots)
	} else {
		var c *agent.Client
		if c, err = t.client(ctx); err == nil {
			list, err = c.List(ctx, p, t.roots)
		}
	}
	out := make([]tools.FileInfo, len(list))
	for i, fi := range list {
		out[i] = tools.FileInfo(fi)
	}
	return out, err
}
