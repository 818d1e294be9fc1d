package agent

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"time"

	"github.com/hutchsandbox/hutch/internal/errdefs"
)

// A microVM's virtio port carries one host session at a time, but not
// cleanly apart: when the host reconnects at once, the guest's previous
// session may still be running and read the new session's first bytes,
// and what it wrote last may reach the new host (QEMU holds what the
// guest wrote while no host was there, and hands it to the next one).
// So every session on such a channel starts with a sync line: the host
// writes SessionSyncPrefix, a fresh random nonce and "\n"; the guest ends
// any session still running when it reads a sync line where a new HTTP/2
// frame would start, answers with the very same line, and serves HTTP/2
// from there. The host discards everything before that echo: whatever it
// is, it belongs to an earlier session.
//
// SessionSyncPrefix starts with 0xFF, which cannot start an HTTP/2 frame
// the agent accepts (its length would be over 16 MiB; the agent reads at
// most 1 MiB frames) nor the client preface.
const SessionSyncPrefix = "\xffhutch-session-sync "

// MaxSessionSyncLine bounds a sync line, newline included.
const MaxSessionSyncLine = len(SessionSyncPrefix) + 64 + 1

// sessionSyncTimeout bounds SyncSession when ctx allows longer: a guest
// that has not answered by then will not, and the caller dials again.
const sessionSyncTimeout = 10 * time.Second

// maxSyncDiscard bounds what SyncSession throws away before the echo:
// the earlier session's leftovers are what the guest's and QEMU's buffers
// held, far less than this.
const maxSyncDiscard = 16 << 20

// SyncSession starts a session on c, a fresh connection to a microVM's
// agent port, and returns the connection to hand to the HTTP/2 client
// (dial functions of a Client call it last). It fails, of class
// ErrUnavailable, when the guest does not echo the sync in time: the
// caller closes c and dials again.
func SyncSession(ctx context.Context, c net.Conn) (net.Conn, error) {
	nonce := make([]byte, 16)
	if _, err := rand.Read(nonce); err != nil {
		return nil, fmt.Errorf("agent: session sync nonce: %w", err)
	}
	line := []byte(SessionSyncPrefix + hex.EncodeToString(nonce) + "\n")
	deadline, ctxDeadline := time.Now().Add(sessionSyncTimeout), false
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline, ctxDeadline = d, true
	}
	if err := c.SetDeadline(deadline); err != nil {
		return nil, fmt.Errorf("agent: session sync: %w", err)
	}
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	fail := func(err error) (net.Conn, error) {
		if ctxDeadline && errors.Is(err, os.ErrDeadlineExceeded) {
			<-ctx.Done() // the conn's deadline was ctx's: it ends now
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, errdefs.New(errdefs.ErrUnavailable, "agent session sync failed: "+err.Error())
	}
	if _, err := c.Write(line); err != nil {
		return fail(err)
	}
	var (
		got       []byte
		discarded int
		buf       = make([]byte, 32<<10)
	)
	for {
		n, err := c.Read(buf)
		got = append(got, buf[:n]...)
		if i := bytes.Index(got, line); i >= 0 {
			if !stop() && ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if err := c.SetDeadline(time.Time{}); err != nil {
				return fail(err)
			}
			return &prefixConn{Conn: c, pending: got[i+len(line):]}, nil
		}
		if err != nil {
			return fail(err)
		}
		// Keep only what could still be the start of the echo.
		if keep := len(line) - 1; len(got) > keep {
			discarded += len(got) - keep
			got = append(got[:0], got[len(got)-keep:]...)
		}
		if discarded > maxSyncDiscard {
			return fail(errors.New("no echo within 16 MiB"))
		}
	}
}

// prefixConn is a connection whose first reads return bytes already read
// from it.
type prefixConn struct {
	net.Conn

	mu      sync.Mutex
	pending []byte
}

func (c *prefixConn) Read(p []byte) (int, error) {
	c.mu.Lock()
	if len(c.pending) > 0 {
		n := copy(p, c.pending)
		c.pending = c.pending[n:]
		c.mu.Unlock()
		return n, nil
	}
	c.mu.Unlock()
	return c.Conn.Read(p)
}
