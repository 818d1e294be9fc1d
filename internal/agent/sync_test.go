package agent

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/internal/errdefs"
)

// fakePort answers a session sync the way the guest does, after sending
// what an earlier session left behind.
func fakePort(t *testing.T, stale string, after string) net.Conn {
	t.Helper()
	host, guest := net.Pipe()
	t.Cleanup(func() { _ = host.Close(); _ = guest.Close() })
	go func() {
		r := bufio.NewReader(guest)
		line, err := r.ReadString('\n')
		if err != nil || !strings.HasPrefix(line, SessionSyncPrefix) || len(line) > MaxSessionSyncLine {
			t.Errorf("sync line %q, %v", line, err)
			return
		}
		_, _ = guest.Write([]byte(stale + line + after))
	}()
	return host
}

func TestSyncSession(t *testing.T) {
	stale := strings.Repeat("\x00\x00\x04\x08\x00\x00\x00\x00\x00tick", 20000) + SessionSyncPrefix + "feedface\n"
	c, err := SyncSession(context.Background(), fakePort(t, stale, "SETTINGS-from-the-guest"))
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len("SETTINGS-from-the-guest"))
	if _, err := io.ReadFull(c, got); err != nil || string(got) != "SETTINGS-from-the-guest" {
		t.Errorf("after the echo read %q, %v", got, err)
	}
}

func TestSyncSession_Fails(t *testing.T) {
	t.Run("guest_silent", func(t *testing.T) {
		host, guest := net.Pipe()
		defer func() { _ = host.Close() }()
		defer func() { _ = guest.Close() }()
		go func() { _, _ = io.Copy(io.Discard, guest) }()
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		if _, err := SyncSession(ctx, host); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("SyncSession got %v, want the ctx's deadline", err)
		}
	})
	t.Run("guest_gone", func(t *testing.T) {
		host, guest := net.Pipe()
		defer func() { _ = host.Close() }()
		go func() {
			_, _ = bufio.NewReader(guest).ReadString('\n')
			_ = guest.Close()
		}()
		_, err := SyncSession(context.Background(), host)
		if !errdefs.IsUnavailable(err) || !strings.HasPrefix(err.Error(), "agent session sync failed: ") {
			t.Errorf("SyncSession got %v, want unavailable", err)
		}
	})
}
