package guest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/internal/agent"
	"github.com/hutchsandbox/hutch/internal/sandbox"
)

// fakeChannel is a virtio-serial port and QEMU's socket chardev behind it,
// as the guest and the host see them:
//   - the port opens whether or not a host is connected, and reports
//     whether one is (POLLHUP); while none is, reads return EOF at once
//     and writes wait;
//   - what the guest wrote is handed to whichever host is connected when
//     it gets through, so a new host can receive an earlier session's
//     bytes (QEMU holds what it could not send and flushes it to the next
//     client);
//   - a host may replace another without the guest seeing a gap
//     (takeOver), as a fast reconnect does.
type fakeChannel struct {
	t *testing.T

	mu      sync.Mutex
	cond    *sync.Cond
	host    net.Conn // the relay's end of the connected host
	in      []byte   // host bytes the guest has not read
	out     []byte   // guest bytes no host has taken yet
	stopped bool     // the test ended
	pollErr error
	opens   int
	polls   int
	closes  int
}

func newFakeChannel(t *testing.T) *fakeChannel {
	f := &fakeChannel{t: t}
	f.cond = sync.NewCond(&f.mu)
	go f.pumpToHost()
	t.Cleanup(func() {
		f.mu.Lock()
		f.stopped = true
		if f.host != nil {
			_ = f.host.Close()
		}
		f.cond.Broadcast()
		f.mu.Unlock()
	})
	return f
}

func (f *fakeChannel) open() (portHandle, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.opens++
	return &fakeHandle{ch: f}, nil
}

// pumpToHost hands the guest's bytes to the host connected at the time.
func (f *fakeChannel) pumpToHost() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for {
		for !f.stopped && (f.host == nil || len(f.out) == 0) {
			f.cond.Wait()
		}
		if f.stopped {
			return
		}
		h, data := f.host, f.out
		f.out = nil
		f.mu.Unlock()
		_, err := h.Write(data)
		f.mu.Lock()
		if err != nil {
			f.out = append(data, f.out...) // that host went: keep them for the next
			if f.host == h {
				f.cond.Wait()
			}
		}
	}
}

// connect is a host connecting to the chardev: the returned conn is the
// host's end. takeOver replaces a connected host without a gap.
func (f *fakeChannel) connect(takeOver bool) net.Conn {
	hostEnd, relay := net.Pipe()
	f.mu.Lock()
	old := f.host
	if old != nil && !takeOver {
		f.mu.Unlock()
		f.t.Fatal("fakeChannel: a host is connected already")
	}
	f.host = relay
	f.cond.Broadcast()
	f.mu.Unlock()
	if old != nil {
		_ = old.Close()
	}
	go f.pumpFromHost(relay)
	return hostEnd
}

// pumpFromHost carries a host's bytes to the port; when the host goes
// (and no other took its place), the guest's reads end.
func (f *fakeChannel) pumpFromHost(relay net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := relay.Read(buf)
		f.mu.Lock()
		f.in = append(f.in, buf[:n]...)
		if err != nil && f.host == relay {
			f.host = nil
		}
		f.cond.Broadcast()
		f.mu.Unlock()
		if err != nil {
			return
		}
	}
}

func (f *fakeChannel) counts() (opens, polls, closes int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.opens, f.polls, f.closes
}

type fakeHandle struct {
	ch *fakeChannel

	once sync.Once
	c    *fakePortConn
}

func (h *fakeHandle) hostConnected() (bool, error) {
	h.ch.mu.Lock()
	defer h.ch.mu.Unlock()
	h.ch.polls++
	return h.ch.host != nil, h.ch.pollErr
}

func (h *fakeHandle) conn() net.Conn {
	h.once.Do(func() { h.c = &fakePortConn{ch: h.ch} })
	return h.c
}

// fakePortConn is the open port as the guest reads and writes it.
type fakePortConn struct {
	ch *fakeChannel

	rdl, wdl time.Time // deadlines, guarded by ch.mu
	timers   []*time.Timer
	closed   bool
}

var errFakeTimeout = fmt.Errorf("fake port: %w", os.ErrDeadlineExceeded)

func (c *fakePortConn) Read(p []byte) (int, error) {
	f := c.ch
	f.mu.Lock()
	defer f.mu.Unlock()
	for {
		switch {
		case c.closed:
			return 0, net.ErrClosed
		case !c.rdl.IsZero() && !time.Now().Before(c.rdl):
			return 0, errFakeTimeout
		case len(f.in) > 0:
			n := copy(p, f.in)
			f.in = f.in[n:]
			return n, nil
		case f.host == nil:
			return 0, io.EOF
		}
		f.cond.Wait()
	}
}

func (c *fakePortConn) Write(p []byte) (int, error) {
	f := c.ch
	f.mu.Lock()
	defer f.mu.Unlock()
	for {
		switch {
		case c.closed:
			return 0, net.ErrClosed
		case !c.wdl.IsZero() && !time.Now().Before(c.wdl):
			return 0, errFakeTimeout
		case f.host != nil:
			f.out = append(f.out, p...)
			f.cond.Broadcast()
			return len(p), nil
		}
		f.cond.Wait() // no host: a write waits, as on a real port
	}
}

func (c *fakePortConn) Close() error {
	f := c.ch
	f.mu.Lock()
	defer f.mu.Unlock()
	if !c.closed {
		c.closed = true
		f.closes++
		f.cond.Broadcast()
	}
	return nil
}

func (c *fakePortConn) setDeadline(read, write bool, t time.Time) {
	f := c.ch
	f.mu.Lock()
	defer f.mu.Unlock()
	if read {
		c.rdl = t
	}
	if write {
		c.wdl = t
	}
	f.cond.Broadcast()
	if !t.IsZero() {
		c.timers = append(c.timers, time.AfterFunc(time.Until(t), func() {
			f.mu.Lock()
			f.cond.Broadcast()
			f.mu.Unlock()
		}))
	}
}

func (c *fakePortConn) SetDeadline(t time.Time) error      { c.setDeadline(true, true, t); return nil }
func (c *fakePortConn) SetReadDeadline(t time.Time) error  { c.setDeadline(true, false, t); return nil }
func (c *fakePortConn) SetWriteDeadline(t time.Time) error { c.setDeadline(false, true, t); return nil }
func (c *fakePortConn) LocalAddr() net.Addr                { return fakeAddr{} }
func (c *fakePortConn) RemoteAddr() net.Addr               { return fakeAddr{} }

type fakeAddr struct{}

func (fakeAddr) Network() string { return "virtio" }
func (fakeAddr) String() string  { return "vport0p1" }

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// guestAgent serves the agent protocol on the channel's port, as the
// guest does, until the test ends.
func guestAgent(t *testing.T, ch *fakeChannel) {
	t.Helper()
	p := &Port{dev: ch, log: testLogger(t)}
	srv := &agent.Server{Log: testLogger(t)}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.ServeConns(ctx, p.Connect) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("ServeConns: %v", err)
		}
	})
}

// hostClient is a host session: a client whose one connection is made by
// connecting to the channel, with the session sync unless plain.
func hostClient(t *testing.T, ch *fakeChannel, takeOver, plain bool) *agent.Client {
	t.Helper()
	var once sync.Once
	c := agent.NewClient(func(ctx context.Context) (net.Conn, error) {
		err := errors.New("this host session's connection was used")
		var conn net.Conn
		once.Do(func() {
			conn, err = ch.connect(takeOver), nil
			if !plain {
				conn, err = agent.SyncSession(ctx, conn)
			}
		})
		return conn, err
	}, testLogger(t))
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func execOut(t *testing.T, c *agent.Client, cmd string) string {
	t.Helper()
	var out bytes.Buffer
	res, err := c.Exec(context.Background(), sandbox.ExecRequest{Argv: []string{cmd}, Stdout: &out})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("Exec(%q): %+v, %v", cmd, res, err)
	}
	return out.String()
}

func TestPort_WaitsForTheHost(t *testing.T) {
	ch := newFakeChannel(t)
	guestAgent(t, ch)
	time.Sleep(150 * time.Millisecond) // several polls find nobody
	c := hostClient(t, ch, false, false)
	if got := execOut(t, c, "echo hello"); got != "hello\n" {
		t.Errorf("output %q", got)
	}
	if _, polls, _ := ch.counts(); polls < 2 {
		t.Errorf("%d polls, want several", polls)
	}
}

// TestPort_Sessions: hosts one after the other, with and without the
// sync; each one's going ends its session (its command dies), and the
// next one's session starts on the same open port.
func TestPort_Sessions(t *testing.T) {
	ch := newFakeChannel(t)
	guestAgent(t, ch)
	for i, plain := range []bool{false, true, false} {
		c := hostClient(t, ch, false, plain)
		word := fmt.Sprintf("session-%d", i)
		if got := execOut(t, c, "echo "+word); got != word+"\n" {
			t.Errorf("session %d output %q", i, got)
		}
		pidfile := filepath.Join(t.TempDir(), "pid")
		go func() {
			_, _ = c.Exec(context.Background(), sandbox.ExecRequest{Argv: []string{fmt.Sprintf("echo $$ > %[1]s.tmp && mv %[1]s.tmp %[1]s; exec sleep 300", pidfile)}})
		}()
		pid := readPidFile(t, pidfile)
		_ = c.Close()
		waitGone(t, pid)
		time.Sleep(30 * time.Millisecond) // the guest polls for the next host
	}
	if opens, _, closes := ch.counts(); opens != 1 || closes != 0 {
		t.Errorf("port opened %d and closed %d times, want it opened once and kept", opens, closes)
	}
}

// TestPort_HostTakesOver is the fast reconnect: a new host connects
// before the guest saw the old one go, while the old session's command
// still streams output that reaches the new host. The old session hands
// the port over, its command dies, and the new host, which discards what
// came before the sync's echo, gets clean answers.
func TestPort_HostTakesOver(t *testing.T) {
	ch := newFakeChannel(t)
	guestAgent(t, ch)
	first := hostClient(t, ch, false, false)
	pidfile := filepath.Join(t.TempDir(), "pid")
	go func() {
		_, _ = first.Exec(context.Background(), sandbox.ExecRequest{
			Argv:   []string{fmt.Sprintf("echo $$ > %[1]s.tmp && mv %[1]s.tmp %[1]s; while :; do echo tick; done", pidfile)},
			Stdout: io.Discard,
		})
	}()
	pid := readPidFile(t, pidfile)

	second := hostClient(t, ch, true, false)
	for i := range 3 {
		if got := execOut(t, second, "echo taken over"); got != "taken over\n" {
			t.Errorf("exec %d output %q", i, got)
		}
	}
	waitGone(t, pid)
	if opens, _, closes := ch.counts(); opens != 1 || closes != 0 {
		t.Errorf("port opened %d and closed %d times; want it kept open across the take-over", opens, closes)
	}

	t.Run("plain_host", func(t *testing.T) {
		third := hostClient(t, ch, true, true)
		if got := execOut(t, third, "echo plain"); got != "plain\n" {
			t.Errorf("output %q", got)
		}
	})
}

func TestPort_ConnectEnds(t *testing.T) {
	t.Run("ctx", func(t *testing.T) {
		ch := newFakeChannel(t)
		p := &Port{dev: ch, log: testLogger(t)}
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		if _, err := p.Connect(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Connect got %v, want the ctx's error", err)
		}
		if _, _, closes := ch.counts(); closes != 1 {
			t.Errorf("the port was closed %d times, want 1", closes)
		}
	})
	t.Run("ctx_while_the_host_is_silent", func(t *testing.T) {
		ch := newFakeChannel(t)
		p := &Port{dev: ch, log: testLogger(t)}
		host := ch.connect(false)
		defer func() { _ = host.Close() }()
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		if _, err := p.Connect(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Connect got %v, want the ctx's error", err)
		}
	})
	t.Run("poll_error", func(t *testing.T) {
		ch := newFakeChannel(t)
		ch.pollErr = errors.New("EIO")
		p := &Port{dev: ch, log: testLogger(t)}
		if _, err := p.Connect(context.Background()); err == nil || err.Error() != "poll the agent port: EIO" {
			t.Errorf("Connect got %v", err)
		}
		if _, _, closes := ch.counts(); closes != 1 {
			t.Errorf("the port was closed %d times, want 1", closes)
		}
	})
}

// readPidFile waits for a pid a test command wrote.
func readPidFile(t *testing.T, path string) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, err := os.ReadFile(path)
		if err == nil {
			pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err != nil {
				t.Fatalf("pid file %s: %v", path, err)
			}
			return pid
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not appear", path)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitGone waits until pid no longer runs (gone, or a zombie nobody here
// reaps: the agent's reaper does).
func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return
		}
		if f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:])); len(f) > 0 && (f[0] == "Z" || f[0] == "X") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d still runs", pid)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestPort_LargeStreams sends a command 4 MiB of stdin through a session
// and gets it back, so every kind of frame boundary passes the session's
// frame tracking.
func TestPort_LargeStreams(t *testing.T) {
	ch := newFakeChannel(t)
	guestAgent(t, ch)
	c := hostClient(t, ch, false, false)
	in := bytes.Repeat([]byte("0123456789abcdef\xff"+agent.SessionSyncPrefix), 4<<20/37)
	var out bytes.Buffer
	res, err := c.Exec(context.Background(), sandbox.ExecRequest{Argv: []string{"cat"}, Stdin: bytes.NewReader(in), Stdout: &out})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("Exec: %+v, %v", res, err)
	}
	if !bytes.Equal(out.Bytes(), in) {
		t.Errorf("cat returned %d bytes, want the %d sent", out.Len(), len(in))
	}
}
