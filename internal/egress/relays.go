package egress

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync"
)

// Listener is a net.Listener fed by Offer rather than by accept(2): the
// connections a sandbox without a route of its own opens to its
// loopback proxy port arrive at the host relayed over the runtime's
// agent channel, and are offered here one by one.
type Listener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

// NewListener returns an open Listener.
func NewListener() *Listener {
	return &Listener{conns: make(chan net.Conn), done: make(chan struct{})}
}

// Offer hands c to the next Accept, waiting for one; once the listener is
// closed it closes c instead.
func (l *Listener) Offer(c net.Conn) {
	select {
	case l.conns <- c:
	case <-l.done:
		_ = c.Close()
	}
}

// Accept waits for an offered connection.
func (l *Listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close ends Accept and refuses later offers.
func (l *Listener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

// Addr names the listener for logs: there is no address to dial.
func (l *Listener) Addr() net.Addr { return relayAddr{} }

type relayAddr struct{}

func (relayAddr) Network() string { return "relay" }
func (relayAddr) String() string  { return "agent-channel" }

// Relays runs one egress proxy per office, made on the office's first
// relayed connection and kept for the life of the process: a proxy's
// policy and secrets are read per decision, so it never needs re-making.
type Relays struct {
	// New makes the proxy of an office.
	New func(officeKey string) (*Proxy, error)
	// Log receives a line when a proxy cannot be made or ends on error.
	Log *slog.Logger

	mu      sync.Mutex
	closed  bool
	offices map[string]*Listener
	cancel  []context.CancelFunc
	wg      sync.WaitGroup
}

// Offer hands a relayed connection to the proxy of officeKey, making the
// proxy first if it has none. A connection that cannot be served is closed.
func (r *Relays) Offer(officeKey string, c net.Conn) {
	l, err := r.listener(officeKey)
	if err != nil {
		r.log().Warn("egress: no proxy for a relayed connection", "office_key", officeKey, "error", err)
		_ = c.Close()
		return
	}
	l.Offer(c)
}

// Handler is Offer for one office, the shape an agent client's relay
// pump takes.
func (r *Relays) Handler(officeKey string) func(net.Conn) {
	return func(c net.Conn) { r.Offer(officeKey, c) }
}

var errRelaysClosed = errors.New("egress relays are closed")

func (r *Relays) listener(officeKey string) (*Listener, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, errRelaysClosed
	}
	if l, ok := r.offices[officeKey]; ok {
		return l, nil
	}
	p, err := r.New(officeKey)
	if err != nil {
		return nil, err
	}
	if r.offices == nil {
		r.offices = map[string]*Listener{}
	}
	l := NewListener()
	ctx, cancel := context.WithCancel(context.Background())
	r.offices[officeKey] = l
	r.cancel = append(r.cancel, cancel)
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		if err := p.Serve(ctx, l); err != nil {
			r.log().Warn("egress proxy ended", "office_key", officeKey, "error", err)
		}
	}()
	return l, nil
}

// Close stops every proxy and waits for them.
func (r *Relays) Close() {
	r.mu.Lock()
	r.closed = true
	cancels := r.cancel
	r.cancel = nil
	r.mu.Unlock()
	for _, c := range cancels {
		c()
	}
	r.wg.Wait()
}

func (r *Relays) log() *slog.Logger {
	if r.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return r.Log
}
