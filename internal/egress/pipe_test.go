package egress

import (
	"bytes"
	"context"
	"io"
	"net"
	"path/filepath"
	"strings"
	"testing"
)

// TestPipe: what comes in reaches the socket, the half-close is passed
// on, and the answer comes out.
func TestPipe(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "egress.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer func() { _ = c.Close() }()
		req, _ := io.ReadAll(c) // ends at the half-close
		_, _ = c.Write([]byte("got " + string(req)))
	}()
	var out bytes.Buffer
	if err := Pipe(context.Background(), sock, strings.NewReader("CONNECT x:443"), &out); err != nil {
		t.Fatal(err)
	}
	if out.String() != "got CONNECT x:443" {
		t.Errorf("out = %q", out.String())
	}
	if err := Pipe(context.Background(), filepath.Join(t.TempDir(), "none.sock"), strings.NewReader(""), io.Discard); err == nil || !strings.Contains(err.Error(), "egress proxy") {
		t.Errorf("Pipe to no socket: %v", err)
	}
}
