package agent

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hutchsandbox/hutch/internal/errdefs"
)

// The egress relay, the agent's half. A runtime whose network is "none"
// reaches out only through hutch's egress proxy on the host, and the
// agent channel is its only link to the host. So the agent listens on a
// loopback address inside the runtime (its commands' HTTP_PROXY), and
// every connection a command makes there waits for the host to open a
// relay stream (POST /v1/egress; see Client.RelayEgress), which then
// carries its bytes both ways. The host keeps a few of those streams
// pending at all times, so a connection waits about one round trip.
const (
	// maxEgressWaiting bounds the connections waiting for a stream; past
	// it a new one is closed at once, so a command that opens connections
	// in a loop costs the agent nothing while the host is slow.
	maxEgressWaiting = 64
	// egressWaitLimit is how long a connection waits for a stream before
	// it is closed: the host is not relaying.
	egressWaitLimit = 30 * time.Second
)

// errNoEgress answers POST /v1/egress on an agent started without --egress.
var errNoEgress = errdefs.New(errdefs.ErrNotFound, "This agent relays no egress: it was started without --egress")

// parseEgressAddr checks an egress address: a loopback IP and a port.
// Anything else would let other hosts, or other containers of a shared
// network, use the relay.
func parseEgressAddr(s string) (netip.AddrPort, error) {
	ap, err := netip.ParseAddrPort(s)
	if err != nil || !ap.Addr().Unmap().IsLoopback() {
		return netip.AddrPort{}, errdefs.New(errdefs.ErrInvalid,
			fmt.Sprintf("Agent egress address must be a loopback IP and port, such as 127.0.0.1:3128: %q", s))
	}
	return ap, nil
}

// listenEgress listens on the egress address addr (checked first).
// SO_REUSEADDR lets an agent restarted in the same runtime take the port
// again while connections of its predecessor linger in TIME_WAIT (Go sets
// it on listeners anyway; it is set here so that it does not depend on that).
func listenEgress(addr string) (net.Listener, error) {
	ap, err := parseEgressAddr(addr)
	if err != nil {
		return nil, err
	}
	lc := net.ListenConfig{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		if err := rc.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEADDR, 1)
		}); err != nil {
			return err
		}
		return serr
	}}
	l, err := lc.Listen(context.Background(), "tcp", ap.String())
	if err != nil {
		return nil, fmt.Errorf("agent: listen for egress on %s: %w", ap, err)
	}
	return l, nil
}

// egressEnv is what every command's env gets from the egress flags: the
// proxy variables when the relay listens on addr ("" none), the trust
// variables when caFile and bundle are set.
func egressEnv(addr, caFile, bundle string) map[string]string {
	env := map[string]string{}
	if addr != "" {
		for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"} {
			env[k] = "http://" + addr
		}
		for _, k := range []string{"NO_PROXY", "no_proxy"} {
			env[k] = "localhost,127.0.0.1,::1"
		}
	}
	if bundle != "" {
		// OpenSSL and Go, Python requests, curl, git: a whole bundle,
		// since each replaces the system's with it.
		for _, k := range []string{"SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "GIT_SSL_CAINFO"} {
			env[k] = bundle
		}
	}
	if caFile != "" {
		// Node adds these to its own built-in roots.
		env["NODE_EXTRA_CA_CERTS"] = caFile
	}
	return env
}

// egressRelay pairs the connections accepted on the egress listener with
// the host's relay streams.
type egressRelay struct {
	l    net.Listener
	log  *slog.Logger
	wait time.Duration // egressWaitLimit unless a test says otherwise
	// handoff is unbuffered: a connection is either taken by a stream or
	// still waiting (and so closed when its time is up), never both.
	handoff chan net.Conn
	waiting atomic.Int32
	stop    chan struct{} // closed once the listener is
	done    chan struct{} // closed once no connection waits any more
}

func newEgressRelay(l net.Listener, wait time.Duration, log *slog.Logger) *egressRelay {
	if wait <= 0 {
		wait = egressWaitLimit
	}
	return &egressRelay{
		l:       l,
		log:     log,
		wait:    wait,
		handoff: make(chan net.Conn),
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
	}
}

// acceptLoop accepts until the listener is closed, then closes the
// connections still waiting.
func (e *egressRelay) acceptLoop() {
	var waits sync.WaitGroup
	defer func() {
		close(e.stop)
		waits.Wait()
		close(e.done)
	}()
	backoff := 5 * time.Millisecond
	for {
		c, err := e.l.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of descriptors, most likely: the commands hold them,
			// and will let go.
			e.log.Warn("agent egress: accept failed", "err", err)
			time.Sleep(backoff)
			backoff = min(2*backoff, time.Second)
			continue
		}
		backoff = 5 * time.Millisecond
		if e.waiting.Add(1) > maxEgressWaiting {
			e.waiting.Add(-1)
			e.log.Debug("agent egress: too many connections waiting for the host; closed a new one", "waiting", maxEgressWaiting)
			_ = c.Close()
			continue
		}
		waits.Go(func() { e.hold(c) })
	}
}

// hold keeps c until a stream takes it, its time is up or the listener
// closes.
func (e *egressRelay) hold(c net.Conn) {
	defer e.waiting.Add(-1)
	t := time.NewTimer(e.wait)
	defer t.Stop()
	select {
	case e.handoff <- c:
		return
	case <-t.C:
		e.log.Debug("agent egress: no relay stream from the host in time; connection closed", "wait", e.wait, "peer", c.RemoteAddr().String())
	case <-e.stop:
	}
	_ = c.Close()
}

// handleEgress is one relay stream: it waits for a connection, then
// joins the two until both directions have ended.
func (s *Server) handleEgress(w http.ResponseWriter, r *http.Request) {
	e := s.egress
	if e == nil {
		writeError(w, errNoEgress)
		return
	}
	var c net.Conn
	select {
	case c = <-e.handoff:
	case <-r.Context().Done():
		return // the host gave up on this stream: nothing to answer
	case <-e.stop:
		writeError(w, errdefs.New(errdefs.ErrUnavailable, "This agent's egress listener is closed"))
		return
	}
	e.relay(w, r, c)
}

// relay copies the request body to c, and what c sends into the response
// as frames (see contentTypeEgress). The end of the request body is passed
// on as c's half-close, the end of what c sends as the frame of length 0;
// it returns once both have ended, or at once when either side fails, the
// stream included.
func (e *egressRelay) relay(w http.ResponseWriter, r *http.Request, c net.Conn) {
	defer func() { _ = c.Close() }()
	stop := context.AfterFunc(r.Context(), func() { _ = c.Close() })
	defer stop()
	log := e.log.With("peer", c.RemoteAddr().String())
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", contentTypeEgress)
	w.Header().Set(headerEgressPeer, c.RemoteAddr().String())
	w.WriteHeader(http.StatusOK)
	if err := rc.Flush(); err != nil {
		log.Debug("agent egress: the host left before the relay started", "err", err)
		return
	}
	log.Debug("agent egress: relay started")

	up := make(chan error, 1)
	go func() {
		_, err := io.Copy(c, r.Body)
		if err == nil {
			err = closeWrite(c) // the host finished sending
		}
		if err != nil {
			_ = c.Close() // and so the other direction ends too
		}
		up <- err
	}()
	downErr := copyEgressFrames(w, rc, c)
	if downErr != nil {
		// Either side failed: end the other direction too. Closing the
		// body ends a Read of it blocked in the copy above.
		_ = c.Close()
		_ = r.Body.Close()
	}
	upErr := <-up
	log.Debug("agent egress: relay ended", "to_host", errText(downErr), "from_host", errText(upErr))
}

// copyEgressFrames sends what c sends as frames into w, flushing each, and
// the frame of length 0 once c's read side reached EOF. It returns nil
// then, or the first error.
func copyEgressFrames(w io.Writer, rc *http.ResponseController, c net.Conn) error {
	buf := make([]byte, 4+egressFrameMax)
	for {
		n, err := c.Read(buf[4:])
		if n > 0 || errors.Is(err, io.EOF) {
			binary.BigEndian.PutUint32(buf[:4], uint32(n)) //nolint:gosec // G115: n <= egressFrameMax
			if _, werr := w.Write(buf[:4+n]); werr != nil {
				return werr
			}
			if n > 0 && errors.Is(err, io.EOF) {
				binary.BigEndian.PutUint32(buf[:4], 0)
				if _, werr := w.Write(buf[:4]); werr != nil {
					return werr
				}
			}
			if ferr := rc.Flush(); ferr != nil {
				return ferr
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// closeWrite half-closes c when it can, and closes it otherwise.
func closeWrite(c net.Conn) error {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Close()
}

// errText is err's text for a log, "" for none.
func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
