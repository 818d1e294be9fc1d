package box

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"

	"github.com/hutchsandbox/hutch/internal/atomicfile"
	"github.com/hutchsandbox/hutch/internal/egress"
	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/netpolicy"
	"github.com/hutchsandbox/hutch/internal/project"
)

// Under sandbox-network allowlist or none, hutch's own project container
// is on the engine's none network (a loopback interface and nothing
// else), so a process that ignores HTTPS_PROXY, resolves names itself or
// sends raw TCP, UDP or IPv6 gets nowhere. Its agent listens on
// project.EgressAddr and relays each connection over the channel the
// host holds; the box pumps those into an egress proxy of its own, in the
// hutch process, whose policy is read from the settings file at every
// connection. So the proxy runs exactly while a hutch command (exec,
// shell, up, mcp, worktree) holds the channel; in between, nothing
// inside reaches anything. Projects have no vault: the proxy has no CA
// and no placeholders, and splices TLS as it is.

// egressRecord is the host file that says the running container relays
// (its network is none and its agent was started with --egress): the
// warm path, which has no engine to ask, reads it. It sits beside the
// socket dir, like the key file, out of the container's reach.
func (b *Box) egressRecord() string { return b.socketDir() + ".egress" }

// relaysRecorded reports whether the last Up found the container relaying.
func (b *Box) relaysRecorded() bool {
	data, err := os.ReadFile(b.egressRecord())
	return err == nil && bytes.Equal(data, []byte("relay\n"))
}

// recordRelays writes what Up found the container to be.
func (b *Box) recordRelays(relays bool) {
	var err error
	if relays {
		err = atomicfile.WriteFile(b.egressRecord(), []byte("relay\n"), 0o600)
	} else if err = os.Remove(b.egressRecord()); errors.Is(err, os.ErrNotExist) {
		err = nil
	}
	if err != nil {
		// The warm path then asks the engine instead: slower, as safe.
		b.opts.Log.Debug("egress record not written", "sandbox", b.spec.Name, "error", err)
	}
}

// containerRelays reports whether a container's config is that of one
// whose only way out is the relay.
func containerRelays(st containerState) bool {
	return st.networkMode == project.NetworkNone && slices.Contains(st.entrypoint, "--egress")
}

// checkEgress refuses a container that has a network of its own when the
// settings ask for none but the proxy; anything else it may say in a note.
func (b *Box) checkEgress(st containerState) (string, error) {
	mode := b.spec.Egress
	switch {
	case mode.Proxied() && st.networkMode != project.NetworkNone:
		return "", errdefs.New(errdefs.ErrFailedPrecondition, fmt.Sprintf(
			"sandbox-network is %s, but the sandbox %s was made with a network of its own, which its processes could use to go round hutch's egress proxy; nothing was run in it. Run `hutch project rebuild` to make it anew with no way out but the proxy (what runs in it is stopped).",
			mode, b.spec.Name))
	case mode.Proxied() && !containerRelays(st):
		return fmt.Sprintf("sandbox-network is %s, but the sandbox was made with no network and no egress relay, so nothing in it reaches any host; run `hutch project rebuild` to let the allowed hosts through.", mode), nil
	case !mode.Proxied() && containerRelays(st):
		return fmt.Sprintf("sandbox-network is %s, but the sandbox was made with no network of its own: it goes out through hutch's egress proxy, which lets every public host through, until `hutch project rebuild` makes it anew.", b.spec.Egress.OrOpen()), nil
	}
	return "", nil
}

// errForeignEgress refuses an editor's container under a proxied policy:
// hutch did not make it, so it has a network of its own.
func (b *Box) errForeignEgress(name string) error {
	return errdefs.New(errdefs.ErrFailedPrecondition, fmt.Sprintf(
		"sandbox-network is %s, which hutch can enforce only in a container it made, and %s is an editor's, with a network of its own; nothing was run in it. Stop that container, set sandbox-devcontainer to false so hutch uses its own, or set sandbox-network to open.",
		b.spec.Egress, name))
}

// policy is the project's egress policy as the settings file says now;
// what it said last when it cannot be read or an entry of the network
// keys was left out (see project.Settings.Policy), starting with the
// spec's. A missing or empty file keeps it too: an editor saving the file
// in place empties it for a moment.
func (b *Box) policy() netpolicy.Policy {
	b.egressMu.Lock()
	defer b.egressMu.Unlock()
	if b.opts.SettingsFile == "" {
		return b.live
	}
	data, err := os.ReadFile(b.opts.SettingsFile)
	if err != nil || len(bytes.TrimSpace(data)) == 0 {
		return b.live
	}
	s, _, err := project.ParseSettings(b.opts.SettingsFile, data)
	if err != nil {
		return b.live
	}
	if p, ok := s.Policy(b.project); ok {
		b.live = p
	}
	return b.live
}

// egressRelays returns the box's proxy, made on first use. There is one
// key, the container's name.
func (b *Box) egressRelays() *egress.Relays {
	b.egressMu.Lock()
	defer b.egressMu.Unlock()
	if b.relays == nil {
		b.relays = &egress.Relays{Log: b.opts.Log, New: func(key string) (*egress.Proxy, error) {
			return &egress.Proxy{Office: key, Policy: b.policy, Log: b.opts.Log, Dial: b.egressDial}, nil
		}}
	}
	return b.relays
}

// relay pumps what the agent of t relays into the box's proxy until t's
// agent client is closed (or Close). The agent retries an unreachable
// agent itself, a restarted container included; the pump ends for good
// only when the agent relays nothing (a container made without
// --egress) or fails the channel proof.
func (b *Box) relay(t *Target) {
	ctx, cancel := context.WithCancel(context.Background())
	b.egressMu.Lock()
	b.stops = append(b.stops, cancel)
	b.egressMu.Unlock()
	handler := b.egressRelays().Handler(b.spec.Name)
	cl, log := t.agent, b.opts.Log.With("sandbox", b.spec.Name)
	go func() {
		defer cancel()
		err := cl.RelayEgress(ctx, handler)
		switch {
		case err == nil, errors.Is(err, net.ErrClosed):
		case errdefs.IsNotFound(err):
			log.Debug("egress relay: the agent relays nothing", "error", err)
		default:
			log.Warn("egress relay ended", "error", err)
		}
	}()
}

// Close ends the box's relay pumps and its egress proxy, and waits for
// the proxy. A process that exits need not call it.
func (b *Box) Close() {
	b.egressMu.Lock()
	stops, relays := b.stops, b.relays
	b.stops, b.relays = nil, nil
	b.egressMu.Unlock()
	for _, stop := range stops {
		stop()
	}
	if relays != nil {
		relays.Close()
	}
}

// networkText is the Network line of status: the policy, and the hosts
// an allowlist lets through.
func networkText(s project.Spec) string {
	switch s.Egress {
	case netpolicy.ModeAllowlist:
		if len(s.Allow) == 0 {
			return "allowlist (no host listed: every connection out is refused)"
		}
		return "allowlist (" + strings.Join(s.Allow, ", ") + ")"
	case netpolicy.ModeNone:
		return "none (hutch's egress proxy refuses every connection out)"
	}
	if s.Network == project.NetworkHost {
		return "open, on the host's network (sandbox-network host)"
	}
	return "open"
}
