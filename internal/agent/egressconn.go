package agent

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"sync"
	"time"

	"github.com/hutchsandbox/hutch/internal/errdefs"
)

// The egress relay, the host's half (the agent's is in egress.go).
const (
	// egressPending is how many relay streams the host keeps waiting
	// for a connection, so that a command's connection rarely waits for
	// one to be opened.
	egressPending = 2
	// maxEgressStreams bounds the relay streams open at once, the pending
	// ones included; past it the pump waits for one to end.
	maxEgressStreams = 128
	// egressRetryMin and egressRetryMax bound the pause before a stream
	// is opened again after the agent could not be reached.
	egressRetryMin = 100 * time.Millisecond
	egressRetryMax = 10 * time.Second
	// egressCloseLinger bounds how long a closed relay conn's stream waits
	// for the command's side to finish (see egressConn.Close) before it
	// is reset.
	egressCloseLinger = 10 * time.Second
)

// errEgressBroken is what a relay conn reads when the command's side of
// the connection ended without finishing cleanly (a reset, the agent or
// its connection gone).
var errEgressBroken = errors.New("egress relay: the sandbox's side of the connection broke off")

// errEgressStreamEnded is what a relay conn's Write returns once the
// stream can carry nothing more.
var errEgressStreamEnded = errors.New("egress relay: the stream has ended")

// RelayEgress relays the connections commands make to the egress address
// of an agent started with --egress: each one is handed to offer as a
// net.Conn, whose reads are what the command sends and whose writes reach
// it. The conn also has CloseWrite (a half-close, seen by the command as
// EOF) and working deadlines, so net/http's server can serve it.
//
// offer is called from one of the two goroutines that keep a relay
// stream pending each, so it should hand the conn on (to a listener's
// Accept, say) and return: while it blocks, one stream fewer is pending.
// The conn is offer's to Close. At most 128 streams, pending ones
// included, are open at once; past that the pending ones wait for one to
// end.
//
// The streams use the client's connection like every other call, so they
// go only to an agent that passed the channel proof when one is required
// (see RequireProof). RelayEgress returns nil once ctx ends, which also
// resets every stream it opened. It returns an error of class
// ErrNotFound when the agent relays no egress (started without --egress),
// and the error of a proof the agent failed, without retrying either; an
// agent it cannot reach is tried again at growing intervals, up to 10 s.
func (c *Client) RelayEgress(ctx context.Context, offer func(net.Conn)) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	slots := make(chan struct{}, maxEgressStreams)
	errs := make(chan error, egressPending)
	for range egressPending {
		go func() { errs <- c.pumpEgress(ctx, slots, offer) }()
	}
	var first error
	for range egressPending {
		if err := <-errs; err != nil && first == nil {
			first = err
			cancel()
		}
	}
	return first
}

// pumpEgress keeps one relay stream pending until ctx ends or the agent
// refuses.
func (c *Client) pumpEgress(ctx context.Context, slots chan struct{}, offer func(net.Conn)) error {
	retry := egressRetryMin
	for {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return nil
		}
		conn, err := c.openEgress(ctx, func() { <-slots })
		if err != nil {
			<-slots
			if ctx.Err() != nil {
				return nil
			}
			if !errdefs.IsUnavailable(err) {
				return err
			}
			c.log.Debug("agent egress: cannot open a relay stream; trying again", "err", err, "in", retry)
			t := time.NewTimer(retry)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return nil
			}
			retry = min(2*retry, egressRetryMax)
			continue
		}
		retry = egressRetryMin
		offer(conn)
	}
}

// openEgress opens one relay stream and waits until the agent joins it to
// a connection. release frees the stream's slot once the stream ended.
func (c *Client) openEgress(ctx context.Context, release func()) (*egressConn, error) {
	cc, err := c.conn(ctx)
	if err != nil {
		return nil, err
	}
	sctx, cancel := context.WithCancel(ctx)
	ec := newEgressConn(cancel, release)
	req, err := http.NewRequestWithContext(sctx, http.MethodPost, "http://agent"+pathEgress, egressBody{ec})
	if err != nil {
		cancel()
		return nil, err
	}
	req.ContentLength = -1
	resp, err := cc.RoundTrip(req)
	if err != nil {
		cancel()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, connLost(err)
	}
	if resp.StatusCode != http.StatusOK {
		err := responseError(resp)
		_ = resp.Body.Close()
		cancel()
		if resp.StatusCode == http.StatusNotFound {
			// An agent without --egress, or one too old to know the path.
			return nil, errdefs.New(errdefs.ErrNotFound, "The agent relays no egress: it was started without --egress")
		}
		return nil, fmt.Errorf("agent egress relay: %w", err)
	}
	if ap, err := netip.ParseAddrPort(resp.Header.Get(headerEgressPeer)); err == nil {
		ec.peer = egressAddr(ap.String())
	}
	go ec.pump(resp.Body)
	return ec, nil
}

// egressConn is one relay stream as a net.Conn. Both directions hand
// bytes over one at a time (as net.Pipe does), so that a Read or Write
// that a deadline ends has moved nothing, and the conn stays usable: the
// response body is read by pump, which hands what it read to Read; the
// request body is read by the HTTP/2 transport, which takes what Write
// hands it.
type egressConn struct {
	peer    egressAddr
	cancel  context.CancelFunc // resets the stream
	release func()             // frees the stream's slot

	rdTx   chan []byte   // pump → Read: unread bytes
	rdRx   chan int      // Read → pump: how many were taken
	rdDone chan struct{} // closed once pump has nothing more; rdErr says why
	rdErr  error
	readDL deadline

	wrTx     chan []byte   // Write → the request body: bytes to send
	wrRx     chan int      // the request body → Write: how many were taken
	wrClosed chan struct{} // closed by CloseWrite: the request body ends
	bodyGone chan struct{} // closed once the transport closed the request body
	writeDL  deadline

	closed chan struct{} // closed by Close

	closeOnce, closeWriteOnce, bodyGoneOnce sync.Once

	mu       sync.Mutex // guards the following
	finished bool       // the stream has ended
	linger   *time.Timer
}

func newEgressConn(cancel context.CancelFunc, release func()) *egressConn {
	return &egressConn{
		peer:     "sandbox",
		cancel:   cancel,
		release:  release,
		rdTx:     make(chan []byte),
		rdRx:     make(chan int),
		rdDone:   make(chan struct{}),
		readDL:   makeDeadline(),
		wrTx:     make(chan []byte),
		wrRx:     make(chan int),
		wrClosed: make(chan struct{}),
		bodyGone: make(chan struct{}),
		writeDL:  makeDeadline(),
		closed:   make(chan struct{}),
	}
}

// pump reads the response body's frames and hands their bytes to Read
// (or drops them once the conn is closed). After the frame that says the
// command's side finished sending, it goes on reading to the end of the
// stream, which comes once this side finished too: closing the body
// earlier would reset the stream, and the other direction with it.
func (c *egressConn) pump(body io.ReadCloser) {
	defer c.finish()
	defer func() { _ = body.Close() }()
	c.rdErr = c.readFrames(body)
	close(c.rdDone)
	if c.rdErr == io.EOF {
		_, _ = io.Copy(io.Discard, body)
	}
}

// readFrames hands on the bytes of body's frames until the frame of
// length 0 (io.EOF) or a failure (errEgressBroken, or a protocol error).
func (c *egressConn) readFrames(body io.Reader) error {
	var head [4]byte
	buf := make([]byte, egressFrameMax)
	for {
		if _, err := io.ReadFull(body, head[:]); err != nil {
			return fmt.Errorf("%w: %v", errEgressBroken, err)
		}
		n := int(binary.BigEndian.Uint32(head[:]))
		if n == 0 {
			return io.EOF
		}
		if n > egressFrameMax {
			return fmt.Errorf("egress relay: the agent sent a frame of %d bytes, more than %d", n, egressFrameMax)
		}
		if _, err := io.ReadFull(body, buf[:n]); err != nil {
			return fmt.Errorf("%w: %v", errEgressBroken, err)
		}
		for b := buf[:n]; len(b) > 0; {
			select {
			case c.rdTx <- b:
				b = b[<-c.rdRx:]
			case <-c.closed:
				b = nil
			}
		}
	}
}

// finish runs once the stream has ended: it makes sure it is reset (a
// no-op when both sides ended it) and frees its slot.
func (c *egressConn) finish() {
	c.cancel()
	c.mu.Lock()
	c.finished = true
	if c.linger != nil {
		c.linger.Stop()
	}
	c.mu.Unlock()
	c.release()
}

// Read reads what the command's side sent. It returns io.EOF once that
// side finished sending (the host can still write), and an error wrapping
// errEgressBroken when it broke off.
func (c *egressConn) Read(p []byte) (int, error) {
	switch {
	case isClosedChan(c.closed):
		return 0, net.ErrClosed
	case isClosedChan(c.readDL.wait()):
		return 0, os.ErrDeadlineExceeded
	}
	select {
	case b := <-c.rdTx:
		n := copy(p, b)
		c.rdRx <- n
		return n, nil
	case <-c.rdDone:
		return 0, c.rdErr
	case <-c.closed:
		return 0, net.ErrClosed
	case <-c.readDL.wait():
		return 0, os.ErrDeadlineExceeded
	}
}

// Write sends p to the command's side; it returns once the HTTP/2
// transport has taken all of p.
func (c *egressConn) Write(p []byte) (int, error) {
	switch {
	case isClosedChan(c.closed):
		return 0, net.ErrClosed
	case isClosedChan(c.wrClosed):
		return 0, errors.New("egress relay: write after CloseWrite")
	case isClosedChan(c.writeDL.wait()):
		return 0, os.ErrDeadlineExceeded
	}
	n := 0
	for len(p) > 0 {
		select {
		case c.wrTx <- p:
			m := <-c.wrRx
			p, n = p[m:], n+m
		case <-c.closed:
			return n, net.ErrClosed
		case <-c.wrClosed:
			return n, errors.New("egress relay: write after CloseWrite")
		case <-c.bodyGone:
			return n, errEgressStreamEnded
		case <-c.writeDL.wait():
			return n, os.ErrDeadlineExceeded
		}
	}
	return n, nil
}

// CloseWrite ends what this side sends: the command's side reads EOF
// once it has read everything written before.
func (c *egressConn) CloseWrite() error {
	c.closeWriteOnce.Do(func() { close(c.wrClosed) })
	return nil
}

// Close ends the conn here at once: Read and Write fail from now on, and
// what the command's side still sends is dropped. The stream itself ends
// as a TCP close would: what was written still reaches the command's
// side, followed by EOF, and the stream ends once that side finished too,
// or is reset egressCloseLinger later. (Resetting it at once would lose
// the last writes, which may not have left the transport yet.)
func (c *egressConn) Close() error {
	c.closeOnce.Do(func() {
		close(c.closed)
		_ = c.CloseWrite()
		c.mu.Lock()
		defer c.mu.Unlock()
		if !c.finished {
			c.linger = time.AfterFunc(egressCloseLinger, c.cancel)
		}
	})
	return nil
}

// egressAddr names the ends of a relay conn: the agent, and the
// address the command's connection came from.
type egressAddr string

func (egressAddr) Network() string  { return "hutch-egress" }
func (a egressAddr) String() string { return string(a) }

func (c *egressConn) LocalAddr() net.Addr  { return egressAddr("agent") }
func (c *egressConn) RemoteAddr() net.Addr { return c.peer }

func (c *egressConn) SetDeadline(t time.Time) error {
	c.readDL.set(t)
	c.writeDL.set(t)
	return nil
}

func (c *egressConn) SetReadDeadline(t time.Time) error {
	c.readDL.set(t)
	return nil
}

func (c *egressConn) SetWriteDeadline(t time.Time) error {
	c.writeDL.set(t)
	return nil
}

// egressBody is a relay conn's request body: what Write hands over, until
// CloseWrite.
type egressBody struct{ c *egressConn }

func (b egressBody) Read(p []byte) (int, error) {
	select {
	case w := <-b.c.wrTx:
		n := copy(p, w)
		b.c.wrRx <- n
		return n, nil
	case <-b.c.wrClosed:
		return 0, io.EOF
	case <-b.c.bodyGone:
		return 0, errEgressStreamEnded
	}
}

// Close is the transport's: the stream is over, or being reset.
func (b egressBody) Close() error {
	b.c.bodyGoneOnce.Do(func() { close(b.c.bodyGone) })
	return nil
}

// deadline is a deadline as a channel closed when it passes (net.Pipe's
// pipeDeadline).
type deadline struct {
	mu     sync.Mutex // guards timer and cancel
	timer  *time.Timer
	cancel chan struct{} // never nil
}

func makeDeadline() deadline { return deadline{cancel: make(chan struct{})} }

// set sets the deadline to t; the zero time means none.
func (d *deadline) set(t time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.timer != nil && !d.timer.Stop() {
		<-d.cancel // the timer fired: wait for it to close cancel
	}
	d.timer = nil
	closed := isClosedChan(d.cancel)
	if t.IsZero() {
		if closed {
			d.cancel = make(chan struct{})
		}
		return
	}
	if dur := time.Until(t); dur > 0 {
		if closed {
			d.cancel = make(chan struct{})
		}
		cancel := d.cancel
		d.timer = time.AfterFunc(dur, func() { close(cancel) })
		return
	}
	if !closed {
		close(d.cancel)
	}
}

// wait returns a channel closed once the deadline has passed.
func (d *deadline) wait() chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.cancel
}

func isClosedChan(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
