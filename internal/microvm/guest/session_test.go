package guest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"testing"

	"golang.org/x/net/http2"

	"github.com/hutchsandbox/hutch/internal/agent"
)

// frames is an HTTP/2 client's byte stream: the preface, SETTINGS and
// DATA frames whose payloads hold what a new session starts with, which
// inside a frame is data, not a new session.
func frames(t *testing.T) []byte {
	t.Helper()
	var b bytes.Buffer
	b.WriteString(http2.ClientPreface)
	fr := http2.NewFramer(&b, nil)
	if err := fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	for _, payload := range [][]byte{
		[]byte(agent.SessionSyncPrefix + "0123\n"),
		[]byte(http2.ClientPreface),
		bytes.Repeat([]byte{0xff}, 40<<10),
		{},
	} {
		if err := fr.WriteData(1, false, payload); err != nil {
			t.Fatal(err)
		}
	}
	return b.Bytes()
}

// pipeSession is a session over one end of a pipe; the test plays the
// host on the other.
func pipeSession(t *testing.T) (*Port, *session, net.Conn) {
	t.Helper()
	guestEnd, hostEnd := net.Pipe()
	t.Cleanup(func() { _ = guestEnd.Close(); _ = hostEnd.Close() })
	p := &Port{log: testLogger(t)}
	return p, newSession(p, guestEnd, nil), hostEnd
}

func TestSession_PassesFramesAndHandsOver(t *testing.T) {
	for _, tt := range []struct {
		name, next string
	}{
		{"sync", agent.SessionSyncPrefix + "abcd\n" + http2.ClientPreface},
		{"preface", http2.ClientPreface + "rest"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p, s, host := pipeSession(t)
			stream := frames(t)
			go func() {
				_, _ = host.Write(stream)
				_, _ = host.Write([]byte(tt.next))
			}()
			got, err := io.ReadAll(readerOnly{s})
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, stream) {
				t.Errorf("the session passed %d bytes, want the %d of its frames unchanged", len(got), len(stream))
			}
			if _, err := s.Write([]byte("late")); !errors.Is(err, net.ErrClosed) {
				t.Errorf("a write after the hand-over got %v, want net.ErrClosed", err)
			}
			_ = s.Close() // the old server closes its conn: the port stays open
			rest := p.takePending()
			if missing := len(tt.next) - len(rest); missing > 0 {
				more := make([]byte, missing)
				if _, err := io.ReadFull(s.raw, more); err != nil {
					t.Fatalf("the port was closed: %v", err)
				}
				rest = append(rest, more...)
			}
			if string(rest) != tt.next {
				t.Errorf("handed over %q, want %q", rest, tt.next)
			}
		})
	}
}

// readerOnly hides WriteTo and friends, so io.ReadAll uses Read.
type readerOnly struct{ r io.Reader }

func (r readerOnly) Read(p []byte) (int, error) { return r.r.Read(p) }

func TestSession_Start(t *testing.T) {
	t.Run("sync_is_echoed_first", func(t *testing.T) {
		_, s, host := pipeSession(t)
		line := agent.SessionSyncPrefix + "00112233445566778899aabbccddeeff\n"
		go func() { _, _ = host.Write([]byte(line + http2.ClientPreface)) }()
		started := make(chan error, 1)
		go func() { started <- s.start(context.Background()) }()
		echo := make([]byte, len(line))
		if _, err := io.ReadFull(host, echo); err != nil || string(echo) != line {
			t.Fatalf("echo %q, %v; want %q", echo, err, line)
		}
		if err := <-started; err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len(http2.ClientPreface))
		if _, err := io.ReadFull(s, got); err != nil || string(got) != http2.ClientPreface {
			t.Errorf("after the sync read %q, %v; want the preface", got, err)
		}
	})
	t.Run("plain_host", func(t *testing.T) {
		_, s, host := pipeSession(t)
		go func() { _, _ = host.Write([]byte(http2.ClientPreface)) }()
		if err := s.start(context.Background()); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len(http2.ClientPreface))
		if _, err := io.ReadFull(s, got); err != nil || string(got) != http2.ClientPreface {
			t.Errorf("read %q, %v; want the preface", got, err)
		}
	})
	t.Run("leftovers_are_dropped", func(t *testing.T) {
		_, s, host := pipeSession(t)
		line := agent.SessionSyncPrefix + "00112233445566778899aabbccddeeff\n"
		junk := "\x00\x00\x04\x08\x00\x00\x00\x00\x01tick" + // a stale frame
			"\xffnot a sync\n" + "PRX" + agent.SessionSyncPrefix + strings.Repeat("a", 200) + "\n"
		go func() { _, _ = host.Write([]byte(junk + line + "after")) }()
		started := make(chan error, 1)
		go func() { started <- s.start(context.Background()) }()
		echo := make([]byte, len(line))
		if _, err := io.ReadFull(host, echo); err != nil || string(echo) != line {
			t.Fatalf("echo %q, %v; want %q", echo, err, line)
		}
		if err := <-started; err != nil {
			t.Fatal(err)
		}
		if string(s.buf) != "after" {
			t.Errorf("after the sync the session holds %q, want %q", s.buf, "after")
		}
	})
	t.Run("host_goes", func(t *testing.T) {
		_, s, host := pipeSession(t)
		_ = host.Close()
		if err := s.start(context.Background()); !errors.Is(err, io.EOF) {
			t.Errorf("start got %v, want EOF", err)
		}
	})
}
