package guest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"

	"github.com/hutchsandbox/hutch/internal/agent"
)

// frameHeaderLen is the size of an HTTP/2 frame header: a 24-bit payload
// length, type, flags and stream id.
const frameHeaderLen = 9

// session is one host session on the agent's port, as the HTTP/2 server
// sees it. The port itself stays open from one session to the next (see
// Port), so a session never closes it: it ends by refusing further reads
// and writes, after kicking the ones in progress off the port with a past
// deadline, and leaves what it read but did not pass on to the next one.
//
// It follows the frames the host sends, only to find their boundaries:
// where a new frame would start, a sync line (see agent.SyncSession) or a
// client preface means a new host has taken the port over while this
// session still ran (the guest never saw the old one go). The session then
// ends, and its reader sees EOF. Without that, the old HTTP/2 server would
// eat the new host's first bytes and answer them.
type session struct {
	port *Port
	raw  net.Conn

	rmu         sync.Mutex // held by the one reader while it reads raw
	buf         []byte     // read from raw, not yet passed on
	store       []byte     // buf's backing array, reused
	prefaceLeft int        // bytes of the client preface still to pass on
	frameLeft   int        // bytes of the current frame still to pass on

	wmu    sync.Mutex // held while a write is on raw
	ended  atomic.Bool
	finish sync.Once
}

func newSession(p *Port, raw net.Conn, pending []byte) *session {
	return &session{port: p, raw: raw, buf: pending, prefaceLeft: len(http2.ClientPreface)}
}

// errSessionEnded is what the reads and writes of an ended session get.
var errSessionEnded = fmt.Errorf("agent port session ended: %w", net.ErrClosed)

// start finds where the host's session begins and, when the host sent a
// sync line, echoes it before anything else is written. What comes before
// a sync line or a client preface is the earlier session's and is dropped.
func (s *session) start(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() { _ = s.raw.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	s.rmu.Lock()
	defer s.rmu.Unlock()
	dropped := 0
	defer func() { s.logDropped(dropped) }()
	for {
		i := sessionStart(s.buf)
		dropped += i
		s.buf = s.buf[i:]
		switch {
		case bytes.HasPrefix(s.buf, []byte(http2.ClientPreface)):
			return nil // a host that does not sync
		case bytes.HasPrefix(s.buf, []byte(agent.SessionSyncPrefix)):
			nl := bytes.IndexByte(s.buf, '\n')
			switch {
			case nl >= 0 && nl+1 <= agent.MaxSessionSyncLine:
				if _, err := s.raw.Write(s.buf[:nl+1]); err != nil {
					return fmt.Errorf("echo the session sync: %w", err)
				}
				s.buf = s.buf[nl+1:]
				return nil
			case nl >= 0 || len(s.buf) >= agent.MaxSessionSyncLine:
				s.buf, dropped = s.buf[1:], dropped+1 // not a sync line after all
				continue
			}
		}
		// Empty, or the beginning of a sync line or preface: read on.
		if err := s.fill(len(s.buf) + 1); err != nil {
			return err
		}
	}
}

func (s *session) logDropped(n int) {
	if n > 0 {
		s.port.log.Info("guest: dropped what an earlier host session left", "bytes", n)
	}
}

// sessionStart returns where in b a session may start: the first byte
// from which b begins with the sync prefix or the client preface, or
// with a beginning of one that b cut short; len(b) when there is none.
func sessionStart(b []byte) int {
	for i := range b {
		rest := b[i:]
		for _, p := range []string{agent.SessionSyncPrefix, http2.ClientPreface} {
			n := min(len(rest), len(p))
			if bytes.Equal(rest[:n], []byte(p)[:n]) {
				return i
			}
		}
	}
	return len(b)
}

// readChunk is how much one read from the port asks for at most.
const readChunk = 32 << 10

// fill reads until buf holds at least n bytes. The caller holds rmu.
func (s *session) fill(n int) error {
	for len(s.buf) < n {
		if s.ended.Load() {
			return errSessionEnded
		}
		if cap(s.buf)-len(s.buf) < readChunk {
			// Move what is left to the front of the session's store
			// (grown if need be): reads reuse it, no garbage per read.
			if len(s.buf)+readChunk > len(s.store) {
				s.store = make([]byte, len(s.buf)+2*readChunk)
			}
			s.buf = s.store[:copy(s.store, s.buf)]
		}
		m, err := s.raw.Read(s.buf[len(s.buf) : len(s.buf)+readChunk])
		s.buf = s.buf[:len(s.buf)+m]
		if err != nil && len(s.buf) < n {
			if s.ended.Load() {
				return errSessionEnded
			}
			return err
		}
	}
	return nil
}

func (s *session) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	s.rmu.Lock()
	defer s.rmu.Unlock()
	if s.ended.Load() {
		return 0, errSessionEnded
	}
	if s.prefaceLeft == 0 && s.frameLeft == 0 {
		if err := s.fill(1); err != nil {
			return 0, err
		}
		if s.newSessionStarts() {
			s.end()
			s.port.log.Info("guest: a new host took over the port")
			return 0, io.EOF
		}
		if err := s.fill(frameHeaderLen); err != nil {
			return 0, err
		}
		s.frameLeft = frameHeaderLen + (int(s.buf[0])<<16 | int(s.buf[1])<<8 | int(s.buf[2]))
	}
	left := &s.frameLeft
	if s.prefaceLeft > 0 {
		left = &s.prefaceLeft
	}
	if err := s.fill(1); err != nil {
		return 0, err
	}
	n := copy(p[:min(len(p), *left)], s.buf)
	s.buf = s.buf[n:]
	*left -= n
	return n, nil
}

// newSessionStarts reports whether the bytes at a frame boundary are a
// new host's: a sync line (its first byte cannot start a frame the agent
// accepts) or a client preface (nor can "PRI", a 5 MiB frame). The caller
// holds rmu.
func (s *session) newSessionStarts() bool {
	switch s.buf[0] {
	case agent.SessionSyncPrefix[0]:
		return true
	case http2.ClientPreface[0]:
		if err := s.fill(len(http2.ClientPreface)); err != nil {
			return false // too short: the server refuses the frame itself
		}
		return bytes.HasPrefix(s.buf, []byte(http2.ClientPreface))
	}
	return false
}

func (s *session) Write(p []byte) (int, error) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.ended.Load() {
		return 0, errSessionEnded
	}
	n, err := s.raw.Write(p)
	if err != nil && s.ended.Load() {
		err = errSessionEnded
	}
	return n, err
}

// Close ends the session; the port stays open for the next one.
func (s *session) Close() error {
	if s.ended.Load() {
		return nil
	}
	s.ended.Store(true)
	// Kick a read or write in progress off the port, wait until it has
	// left, and hand what was read on.
	_ = s.raw.SetDeadline(time.Unix(1, 0))
	s.rmu.Lock()
	defer s.rmu.Unlock()
	s.end()
	return nil
}

// end makes sure no write of this session reaches the port any more,
// passes the bytes read and not passed on to the port, and clears the
// deadlines for the next session. The caller holds rmu.
func (s *session) end() {
	s.finish.Do(func() {
		s.ended.Store(true)
		_ = s.raw.SetWriteDeadline(time.Unix(1, 0))
		s.wmu.Lock()
		s.port.leave(s.buf)
		s.buf = nil
		_ = s.raw.SetDeadline(time.Time{})
		s.wmu.Unlock()
	})
}

func (s *session) LocalAddr() net.Addr  { return s.raw.LocalAddr() }
func (s *session) RemoteAddr() net.Addr { return s.raw.RemoteAddr() }

// The HTTP/2 server sets no deadlines; the session uses them itself to
// end, so it takes none.
func (s *session) SetDeadline(time.Time) error      { return nil }
func (s *session) SetReadDeadline(time.Time) error  { return nil }
func (s *session) SetWriteDeadline(time.Time) error { return nil }
