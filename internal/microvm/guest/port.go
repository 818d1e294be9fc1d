package guest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/hutchsandbox/hutch/internal/errdefs"
)

// findPort returns the device name (vport0p1) of the virtio-serial port
// called name, in sysfs: the directory /sys/class/virtio-ports, whose
// entries each have a "name" file (empty for an unnamed port).
func findPort(sysfs fs.FS, name string) (string, error) {
	entries, err := fs.ReadDir(sysfs, ".")
	if err != nil {
		return "", fmt.Errorf("list the virtio ports: %w", err)
	}
	for _, e := range entries {
		b, err := fs.ReadFile(sysfs, path.Join(e.Name(), "name"))
		if err != nil {
			continue // a port without a name file is not ours
		}
		if strings.TrimSpace(string(b)) == name {
			return e.Name(), nil
		}
	}
	return "", errdefs.New(errdefs.ErrNotFound, fmt.Sprintf("No virtio port is named %s (the VM has no agent channel)", name))
}

// portDevice opens the agent's port. Linux virtio-console semantics: a
// port opens whether or not the host side is connected; while it is not,
// read returns 0 at once and poll reports POLLHUP, so there is nothing to
// block on and the guest polls.
type portDevice interface {
	open() (portHandle, error)
}

// portHandle is the port, open.
type portHandle interface {
	// hostConnected reports whether the host side is connected now.
	hostConnected() (bool, error)
	// conn is the port as a connection that supports deadlines (they end
	// a session without closing the port); closing it closes the port.
	conn() net.Conn
}

// The host is looked for every portPollMin at first, then less often up
// to every portPollMax, so a reconnect is quick and an absent host costs
// next to nothing.
const (
	portPollMin = 20 * time.Millisecond
	portPollMax = 100 * time.Millisecond
)

// Port hands out the host's sessions on the agent's virtio port: its
// Connect returns the next session as a connection. Serve one at a time
// (agent.Server.ServeConns).
//
// The port is opened once and stays open: QEMU stops reading the host's
// socket while the guest has the port closed, and does not always start
// again when it is reopened, so a host that connected in between would
// wait for nothing. Sessions therefore follow each other on the one open
// port, and each begins where the host's sync line or client preface does
// (see session).
type Port struct {
	dev portDevice
	log *slog.Logger

	mu      sync.Mutex
	h       portHandle
	raw     net.Conn
	pending []byte // read by an ended session, for the next one
}

// leave keeps what an ended session read and did not pass on.
func (p *Port) leave(b []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pending = append(p.pending, b...)
}

func (p *Port) takePending() []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	b := p.pending
	p.pending = nil
	return b
}

// Connect returns the next host session once the host side is connected
// and has begun one. A session that does not start (the host went at
// once) is dropped and the next one awaited. It returns only when ctx
// ends or the port fails, and closes the port then.
func (p *Port) Connect(ctx context.Context) (net.Conn, error) {
	if p.h == nil {
		h, err := p.dev.open()
		if err != nil {
			return nil, fmt.Errorf("open the agent port: %w", err)
		}
		p.h, p.raw = h, h.conn()
		// Sessions end by deadline; a port without them cannot be shared.
		if err := p.raw.SetDeadline(time.Time{}); err != nil {
			p.close()
			return nil, fmt.Errorf("agent port: no deadlines: %w", err)
		}
	}
	for {
		if err := p.waitHost(ctx); err != nil {
			p.close()
			return nil, err
		}
		s := newSession(p, p.raw, p.takePending())
		err := s.start(ctx)
		if err == nil {
			return s, nil
		}
		p.leave(s.buf)
		if ctx.Err() != nil {
			p.close()
			return nil, ctx.Err()
		}
		if !errors.Is(err, io.EOF) {
			p.log.Info("guest: a host session did not start", "err", err)
		}
		// Clear a deadline the failed start may have left.
		if err := p.raw.SetDeadline(time.Time{}); err != nil {
			p.close()
			return nil, fmt.Errorf("agent port: %w", err)
		}
	}
}

func (p *Port) close() {
	if p.raw != nil {
		_ = p.raw.Close()
	}
	p.h, p.raw = nil, nil
}

// waitHost polls until the host side is connected or ctx ends.
func (p *Port) waitHost(ctx context.Context) error {
	wait := portPollMin
	var waiting time.Time
	for {
		ok, err := p.h.hostConnected()
		if err != nil {
			return fmt.Errorf("poll the agent port: %w", err)
		}
		if ok {
			if !waiting.IsZero() {
				p.log.Info("guest: the host connected", "waited", time.Since(waiting).Round(time.Millisecond))
			}
			return nil
		}
		if waiting.IsZero() {
			waiting = time.Now()
			p.log.Info("guest: waiting for the host to connect")
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		wait = min(wait*2, portPollMax)
	}
}
