package cli

import (
	"context"
	"strconv"

	"github.com/hutchsandbox/hutch/client"
	"github.com/hutchsandbox/hutch/internal/api"
	"github.com/hutchsandbox/hutch/internal/office"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/service"
)

// lifecycle is what the hutch sandbox commands need: the daemon's view
// when one answers (it knows which commands are running, so a stop
// waits for none and idle clocks stay right), this process's otherwise.
type lifecycle interface {
	List(ctx context.Context) ([]sandbox.Status, error)
	Status(ctx context.Context, key string) (sandbox.Status, error)
	Stop(ctx context.Context, key string) error
	Remove(ctx context.Context, key string) error
	Boost(ctx context.Context, key string, l sandbox.Limits) (sandbox.Status, error)
	SetLimits(ctx context.Context, key string, l sandbox.Limits) (sandbox.Status, error)
}

// managed returns the daemon's lifecycle (as an API client) when a
// daemon in a managed mode answers for this state dir, else the
// in-process one of $HUTCH_SANDBOX's mode when that is managed, else of
// image mode. In-process, gondolin's VMs are those of this process (none
// run): it lists the offices with a root disk as stopped and removes them.
func (g *globals) managed(ctx context.Context, svc *service.Service, addr *office.Address) (lifecycle, error) {
	if c, ok := g.daemon(ctx, svc, ""); ok {
		if h, err := c.Health(ctx); err == nil {
			if m, err := sandbox.ParseMode(h.Mode); err == nil && sandbox.CapabilitiesOf(m.Kind).ManagedLifecycle {
				return &daemonLifecycle{c: c, addr: addr}, nil
			}
		}
	}
	if m, err := g.sandboxMode(""); err == nil && sandbox.CapabilitiesOf(m.Kind).ManagedLifecycle {
		return svc.ManagedFor(ctx, m)
	}
	return svc.ManagedFor(ctx, sandbox.Mode{Kind: sandbox.KindImage})
}

// daemonLifecycle speaks the daemon's /v1/sandbox API for one conversation.
type daemonLifecycle struct {
	c    *client.Client
	addr *office.Address
}

func (d *daemonLifecycle) req(l sandbox.Limits) api.LimitsRequest {
	r := api.LimitsRequest{}
	if d.addr != nil {
		r.Conversation = api.Conversation{Platform: string(d.addr.Platform), ConversationID: d.addr.ConversationID}
	}
	if l.CPUs != 0 {
		r.CPUs = formatFloat(l.CPUs)
	}
	if l.MemoryBytes != 0 {
		r.Memory = formatInt(l.MemoryBytes)
	}
	if l.Pids != 0 {
		r.Pids = formatInt(l.Pids)
	}
	return r
}

func (d *daemonLifecycle) call(ctx context.Context, op string, l sandbox.Limits) (sandbox.Status, error) {
	var st api.Status
	if err := d.c.Call(ctx, "/v1/sandbox/"+op, d.req(l), &st); err != nil {
		return sandbox.Status{}, classed(err)
	}
	return api.SandboxStatus(st), nil
}

func (d *daemonLifecycle) List(ctx context.Context) ([]sandbox.Status, error) {
	list, err := d.c.Runtimes(ctx)
	if err != nil {
		return nil, classed(err)
	}
	out := make([]sandbox.Status, len(list))
	for i, st := range list {
		out[i] = api.SandboxStatus(st)
	}
	return out, nil
}

func (d *daemonLifecycle) Status(ctx context.Context, _ string) (sandbox.Status, error) {
	return d.call(ctx, "status", sandbox.Limits{})
}

func (d *daemonLifecycle) Stop(ctx context.Context, _ string) error {
	_, err := d.call(ctx, "stop", sandbox.Limits{})
	return err
}

func (d *daemonLifecycle) Remove(ctx context.Context, _ string) error {
	_, err := d.call(ctx, "remove", sandbox.Limits{})
	return err
}

func (d *daemonLifecycle) Boost(ctx context.Context, _ string, l sandbox.Limits) (sandbox.Status, error) {
	return d.call(ctx, "boost", l)
}

func (d *daemonLifecycle) SetLimits(ctx context.Context, _ string, l sandbox.Limits) (sandbox.Status, error) {
	return d.call(ctx, "limits", l)
}

func formatFloat(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }
func formatInt(n int64) string     { return strconv.FormatInt(n, 10) }
