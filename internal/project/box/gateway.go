package box

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"sort"
	"strings"

	"github.com/moby/moby/client"

	"github.com/hutchsandbox/hutch/internal/engine"
	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/project"
)

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// GatewayIP returns the host's address on the target container's network:
// where a host service must listen for the container to reach it (the
// engine's gateway host name, host.docker.internal or
// host.containers.internal, resolves there on a bridge). It is "" for a
// container on the host's network, where loopback is the host's.
func (b *Box) GatewayIP(ctx context.Context, t *Target) (string, error) {
	res, err := b.opts.Engine.Client.ContainerInspect(ctx, t.ID, client.ContainerInspectOptions{})
	if err != nil {
		return "", engine.Classify(err, "inspect the sandbox "+t.Name)
	}
	c := res.Container
	if c.HostConfig != nil && c.HostConfig.NetworkMode == "host" {
		return "", nil
	}
	noNetwork := c.NetworkSettings == nil || len(c.NetworkSettings.Networks) == 0 || (c.HostConfig != nil && c.HostConfig.NetworkMode == "none")
	if !noNetwork {
		_, noNetwork = c.NetworkSettings.Networks["none"]
	}
	if noNetwork {
		return "", errdefs.New(errdefs.ErrFailedPrecondition, fmt.Sprintf("The sandbox %s has no network (sandbox-network is %s): nothing on the host can be reached from it.", t.Name, cmpOr(string(b.spec.Egress), project.NetworkNone)))
	}
	// Where the gateway host name resolves inside is the truth (Podman
	// may point it at another of the host's addresses than the bridge's
	// gateway); the network's gateway is the fallback.
	if t.agent != nil {
		var hosts bytes.Buffer
		if err := t.agent.ReadFile(ctx, "/etc/hosts", &hosts); err == nil {
			if ip := gatewayInHosts(hosts.String()); ip != "" {
				return ip, nil
			}
		}
	}
	names := make([]string, 0, len(c.NetworkSettings.Networks))
	for n := range c.NetworkSettings.Networks {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if ep := c.NetworkSettings.Networks[n]; ep != nil && ep.Gateway.IsValid() {
			return ep.Gateway.String(), nil
		}
	}
	return "", errdefs.New(errdefs.ErrFailedPrecondition, fmt.Sprintf("The sandbox %s has no gateway to the host on its network.", t.Name))
}

// gatewayInHosts finds the address of host.docker.internal or
// host.containers.internal in an /etc/hosts file.
func gatewayInHosts(hosts string) string {
	for _, line := range strings.Split(hosts, "\n") {
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		for _, name := range f[1:] {
			if name == "host.docker.internal" || name == "host.containers.internal" {
				if a, err := netip.ParseAddr(f[0]); err == nil {
					return a.String()
				}
			}
		}
	}
	return ""
}
