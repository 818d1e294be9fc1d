package agent

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"time"

	"github.com/hutchsandbox/hutch/internal/errdefs"
)

// EgressPump keeps one runtime's relay pump running on the client a
// process holds (see RelayEgress): the connections the runtime's
// commands open reach the host's proxy while the process holds the
// channel. The zero value pumps nothing; its methods are called under the
// caller's lock of the runtime.
type EgressPump struct {
	client *Client
	cancel context.CancelFunc
	done   chan struct{}
}

// Run pumps cl into offer, unless it already does. A pump that ended
// because the agent relays no egress (the runtime was re-created without
// --egress, and has been again with it since) is started anew. Between
// breaks (a restart, a lost connection) it tries again a second apart.
func (p *EgressPump) Run(cl *Client, offer func(net.Conn), log *slog.Logger) {
	if p.client == cl && p.done != nil {
		select {
		case <-p.done:
		default:
			return
		}
	}
	p.Stop()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	p.client, p.cancel, p.done = cl, cancel, done
	go func() {
		defer close(done)
		for {
			err := cl.RelayEgress(ctx, offer)
			if ctx.Err() != nil {
				return
			}
			if errors.Is(err, errdefs.ErrNotFound) {
				log.Debug("the agent relays no egress; the pump stops until the next command that needs it")
				return
			}
			log.Debug("egress relay ended; retrying", "error", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
		}
	}()
}

// Stop ends the pump, if one runs.
func (p *EgressPump) Stop() {
	if p.cancel != nil {
		p.cancel()
	}
	p.client, p.cancel, p.done = nil, nil, nil
}
