package image

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"

	"github.com/hutchsandbox/hutch/internal/engine"
	"github.com/hutchsandbox/hutch/internal/errdefs"
)

// Docker keeps its bridge networks apart (its DOCKER-ISOLATION chains).
// Podman 4.3 with netavark 1.4, Debian 12's, does not: a container on one
// office network reaches a server on another through the host's routing
// (measured; netavark learned network isolation in a later version). So
// on Podman hutch adds one rule of its own: the host drops what it would
// forward from one subnet of the office network pool to another. Every
// office network holds one container, so nothing legitimate travels
// between two of them; a container's own network, the host and the world
// are untouched.
//
// The rule must come before netavark's, which accept a network's traffic
// as it is made: it is checked, and put first again, whenever hutch makes
// an office network. It stays when hutch is gone (it names only the
// pool's traffic). Where hutch cannot add it (not root, or an engine on
// another host), it says so once, and runtimes are not kept apart on the
// network (docs/security.md).

// isolationComment marks hutch's rule in iptables listings.
const isolationComment = "hutch: office networks apart"

// isolation holds what a Runtime learnt about the rule.
type isolation struct {
	mu     sync.Mutex
	warned bool
}

// isolateNetworks makes sure the pool's rule is the first of the host's
// FORWARD chain, on Podman.
func (r *Runtime) isolateNetworks(ctx context.Context) error {
	if r.cfg.Engine.Flavor != engine.FlavorPodman {
		return nil
	}
	r.iso.mu.Lock()
	defer r.iso.mu.Unlock()
	if why := cannotIsolate(r.cfg.Engine.Host); why != "" {
		if !r.iso.warned {
			r.iso.warned = true
			r.log.Warn("office networks are not kept apart on this Podman: "+why, "pool", r.cfg.NetworkPool.String())
		}
		return nil
	}
	pool := r.cfg.NetworkPool.String()
	spec := []string{"-s", pool, "-d", pool, "-m", "comment", "--comment", isolationComment, "-j", "DROP"}
	out, err := exec.CommandContext(ctx, "iptables", "-w", "-S", "FORWARD").Output()
	if err != nil {
		return isolationError("list the FORWARD chain", err)
	}
	first := ""
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(line, "-A FORWARD ") {
			first = line
			break
		}
	}
	if strings.Contains(first, isolationComment) && strings.Contains(first, "-s "+pool+" -d "+pool+" ") {
		return nil
	}
	// Remove the rule wherever it is (it may have been pushed down), then
	// put it first.
	for strings.Contains(string(out), isolationComment) {
		if err := exec.CommandContext(ctx, "iptables", append([]string{"-w", "-D", "FORWARD"}, spec...)...).Run(); err != nil {
			break
		}
		if out, err = exec.CommandContext(ctx, "iptables", "-w", "-S", "FORWARD").Output(); err != nil {
			return isolationError("list the FORWARD chain", err)
		}
	}
	if msg, err := exec.CommandContext(ctx, "iptables", append([]string{"-w", "-I", "FORWARD", "1"}, spec...)...).CombinedOutput(); err != nil {
		return isolationError("add the rule", fmt.Errorf("%w: %s", err, strings.TrimSpace(string(msg))))
	}
	return nil
}

// cannotIsolate says why hutch cannot add the rule here; "" when it can.
func cannotIsolate(host string) string {
	if host != "" && !strings.HasPrefix(host, "unix://") {
		return "the engine runs on another host (" + host + ")"
	}
	if os.Geteuid() != 0 {
		return "hutch is not root, so it cannot add the host's rule that drops traffic between office networks"
	}
	return ""
}

func isolationError(what string, err error) error {
	return errdefs.New(errdefs.ErrUnavailable, fmt.Sprintf(
		"Cannot keep office networks apart on Podman: could not %s with iptables (%v). Podman 4.3 routes between its networks; hutch drops that traffic with an iptables rule, so it needs the iptables command (Debian: apt-get install iptables).", what, err))
}
