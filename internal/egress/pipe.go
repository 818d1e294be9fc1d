package egress

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
)

// Pipe joins one guest connection, given as in and out (QEMU hands the
// command it spawns per connection the connection as stdin and stdout),
// to the proxy listening on the unix socket sock, until both directions
// have ended. The end of in is passed on as a half-close, so a client
// that finished sending still gets its answer.
func Pipe(ctx context.Context, sock string, in io.Reader, out io.Writer) error {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", sock)
	if err != nil {
		return fmt.Errorf("egress proxy %s: %w", sock, err)
	}
	defer func() { _ = c.Close() }()
	up := make(chan error, 1)
	go func() {
		_, err := io.Copy(c, in)
		if uc, ok := c.(*net.UnixConn); ok {
			_ = uc.CloseWrite()
		}
		up <- err
	}()
	_, downErr := io.Copy(out, c)
	if downErr != nil {
		// The guest went away: stop sending for it too.
		_ = c.Close()
	}
	upErr := <-up
	if errors.Is(upErr, net.ErrClosed) {
		upErr = nil
	}
	return errors.Join(downErr, upErr)
}
