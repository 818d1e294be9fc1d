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
	"github.com/hutchsandbox/hutch/internal/sandbox/cloudflare"
	"github.com/hutchsandbox/hutch/internal/sandbox/container"
	"github.com/hutchsandbox/hutch/internal/sandbox/image"
	"github.com/hutchsandbox/hutch/internal/sandbox/microvm"
	"github.com/hutchsandbox/hutch/internal/tools"
)

// ToolSandbox returns the sandbox the agent tools (bash, read, write,
// edit) run against for one conversation in one mode: commands through
// the mode's runtime with the vault env, file operations through the
// agent (or, in host mode, the same code in this process), confined to
// what the door policy projects. In cloudflare mode the remote runtime
// sees nothing of the host: file operations run as commands through the
// bridge, confined to the remote /workspace, where its commands start.
func (s *Service) ToolSandbox(ctx context.Context, addr office.Address, mode sandbox.Mode, user string) (tools.Sandbox, error) {
	p, err := s.prepare(ctx, addr, mode, user)
	if err != nil {
		return nil, err
	}
	ts := &toolSandbox{p: p, office: p.spec.OfficeRuntimePath}
	if rt, ok := p.rt.(*cloudflare.Runtime); ok {
		files := rt.Files(p.spec, p.env)
		ts.office = cloudflare.RemoteRoot
		ts.roots = []string{cloudflare.RemoteRoot}
		ts.client = func(context.Context) (confinedFiles, error) { return files, nil }
		return ts, nil
	}
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
		ts.client = func(ctx context.Context) (confinedFiles, error) { return rt.Agent(ctx, p.spec) }
	case *microvm.Runtime:
		ts.client = func(ctx context.Context) (confinedFiles, error) { return rt.Agent(ctx, p.spec) }
	case *container.Runtime:
		ts.client = func(ctx context.Context) (confinedFiles, error) { return rt.Agent(ctx) }
	}
	return ts, nil
}

// confinedFiles are the confined file operations of a runtime: its agent
// (agent.Client), or commands through a bridge (cloudflare.Files).
type confinedFiles interface {
	ReadFileWithin(ctx context.Context, path string, roots []string, w io.Writer) error
	WriteFileWithin(ctx context.Context, path string, roots []string, r io.Reader, mode os.FileMode) error
	Stat(ctx context.Context, path string, roots []string) (agent.FileInfo, error)
	List(ctx context.Context, path string, roots []string) ([]agent.FileInfo, error)
}

var (
	_ confinedFiles = (*agent.Client)(nil)
	_ confinedFiles = (*cloudflare.Files)(nil)
)

// toolSandbox implements tools.Sandbox over a prepared conversation.
type toolSandbox struct {
	p *prepared
	// office is where relative paths and commands start, as the runtime
	// sees it.
	office string
	roots  []string
	// client returns the runtime's file operations; nil means host mode,
	// where the confined file functions run in this process.
	client func(ctx context.Context) (confinedFiles, error)
}

func (t *toolSandbox) Office() string  { return t.office }
func (t *toolSandbox) Roots() []string { return t.roots }

func (t *toolSandbox) Exec(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	req.Env, req.TimeZone = t.p.env, t.p.timeZone
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
		var c confinedFiles
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
		var c confinedFiles
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
