package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/hutchsandbox/hutch/internal/atomicfile"
	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/project"
	"github.com/hutchsandbox/hutch/internal/project/box"
	"github.com/hutchsandbox/hutch/internal/vault"
)

// agentLaunch is what `hutch project exec --agent` adds to a command: an
// agent CLI launched as it would be on the host, with only where it runs
// changed.
type agentLaunch struct {
	name      string   // --agent
	mcpConfig string   // --mcp-config, a host path
	env       []string // --env KEY=VALUE
}

func (a agentLaunch) set() bool { return a.name != "" || a.mcpConfig != "" || len(a.env) > 0 }

// prepare restates the launch from the container's point of view:
// loopback URLs in its env and MCP config point at the gateway host, the
// MCP config is written where the container mounts it read-only, and
// argv names that copy. It returns the argv and the extra environment.
// validate checks the launch's flags before anything is brought up.
func (a agentLaunch) validate() error {
	if a.name == "" {
		return errdefs.New(errdefs.ErrInvalid, "--mcp-config and --env need --agent NAME, the name the agent runs under")
	}
	if _, err := box.WorktreeDir("/", a.name); err != nil {
		return errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("Agent name %q must be 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit", a.name))
	}
	for _, kv := range a.env {
		if k, _, ok := strings.Cut(kv, "="); !ok || vault.ValidateEnvName(k) != nil {
			return errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("--env %q must be KEY=VALUE with KEY a variable name", kv))
		}
	}
	if a.mcpConfig != "" {
		if _, err := os.Stat(a.mcpConfig); err != nil {
			return errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("--mcp-config: %v", err))
		}
	}
	return nil
}

func (p *projectCmd) prepareAgent(ctx context.Context, l *loaded, t *box.Target, a agentLaunch, argv []string) ([]string, []string, error) {
	spec := l.box.Spec()
	network := spec.Network
	if t.Foreign {
		network = project.NetworkBridge
	}
	gwHost := project.GatewayHost(string(l.eng.Flavor))
	rewrite := network == project.NetworkBridge
	if network == project.NetworkNone {
		p.printNotes([]string{"sandbox-network is " + string(spec.Egress.OrOpen()) + ": the agent cannot reach services on the host (its MCP servers or the relay included)."})
	}
	var endpoints []project.Endpoint
	env := []string{"HUTCH_AGENT=" + a.name}
	for _, kv := range a.env {
		k, v, _ := strings.Cut(kv, "=")
		if ep, ok := project.RewriteLoopback(v, gwHost); ok && rewrite {
			endpoints = append(endpoints, ep)
			v = ep.Rewritten
		}
		env = append(env, k+"="+v)
	}
	if a.mcpConfig != "" {
		if t.Foreign {
			return nil, nil, errdefs.New(errdefs.ErrFailedPrecondition, fmt.Sprintf("%s was not created by hutch and does not mount %s, so an MCP config cannot be handed to an agent in it.", t.Name, project.RelayTarget))
		}
		data, err := os.ReadFile(a.mcpConfig)
		if err != nil {
			return nil, nil, fmt.Errorf("read the MCP config: %w", err)
		}
		out := data
		if rewrite {
			var eps []project.Endpoint
			if out, eps, err = project.RewriteMCPConfig(data, gwHost); err != nil {
				return nil, nil, fmt.Errorf("%s: %w", a.mcpConfig, err)
			}
			endpoints = append(endpoints, eps...)
		}
		svc, err := p.g.service()
		if err != nil {
			return nil, nil, err
		}
		// Written on the host, in hutch's state dir (never in the
		// project), into the directory the container mounts read-only.
		dir := box.RelayDir(svc.Layout().StateDir, spec.Name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, nil, err
		}
		host := filepath.Join(dir, a.name+".mcp.json")
		// 0644: the container may run as any uid.
		if err := atomicfile.WriteFile(host, out, 0o644); err != nil {
			return nil, nil, err
		}
		inside := project.RelayTarget + "/" + a.name + ".mcp.json"
		if _, err := t.Agent().Stat(ctx, inside, nil); err != nil {
			return nil, nil, fmt.Errorf("the MCP config is not visible at %s inside %s (%v); run `hutch project rebuild` so the container mounts %s", inside, t.Name, err, project.RelayTarget)
		}
		env = append(env, "HUTCH_MCP_CONFIG="+inside)
		abs, _ := filepath.Abs(a.mcpConfig)
		argv = append([]string(nil), argv...)
		for i, arg := range argv {
			if arg == a.mcpConfig || arg == abs {
				argv[i] = inside
			}
		}
	}
	if rewrite && len(endpoints) > 0 {
		p.adviseListeners(ctx, l, t, endpoints)
	}
	return argv, env, nil
}

// adviseListeners warns about host services the sandbox cannot reach:
// those bound to loopback alone.
func (p *projectCmd) adviseListeners(ctx context.Context, l *loaded, t *box.Target, eps []project.Endpoint) {
	gw, err := l.box.GatewayIP(ctx, t)
	if err != nil || gw == "" {
		return
	}
	listeners, err := box.HostListeners()
	if err != nil {
		return
	}
	for _, ep := range eps {
		if advice := project.ListenerAdvice(ep, listeners, gw); advice != "" {
			note(p.g.stderr, "hutch: warning: %s\n", advice)
		}
	}
}
