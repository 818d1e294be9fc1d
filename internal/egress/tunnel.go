package egress

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// splice copies between the guest's connection and the upstream one until
// both directions have ended, or until neither has carried a byte for idle.
// An EOF from one side is passed on as a half-close where the other side
// supports it, so a client that shuts down its sending side still gets the
// reply; any error, or a side that cannot half-close, closes both.
func splice(guest, upstream net.Conn, idle time.Duration) {
	closeBoth := sync.OnceFunc(func() {
		_ = guest.Close()
		_ = upstream.Close()
	})
	defer closeBoth()

	// One timer checks a shared clock instead of a deadline per direction:
	// a long download is traffic for the tunnel even though the guest's
	// side sends nothing.
	start := time.Now()
	var last atomic.Int64 // time since start of the latest read, in ns
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTimer(idle)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				quiet := time.Since(start) - time.Duration(last.Load())
				if quiet >= idle {
					closeBoth()
					return
				}
				t.Reset(idle - quiet)
			}
		}
	})

	pipe := func(dst, src net.Conn) {
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				last.Store(int64(time.Since(start)))
				if _, werr := dst.Write(buf[:n]); werr != nil {
					closeBoth()
					return
				}
			}
			if err == io.EOF {
				if cw, ok := dst.(interface{ CloseWrite() error }); ok && cw.CloseWrite() == nil {
					return
				}
			}
			if err != nil {
				closeBoth()
				return
			}
		}
	}
	var pipes sync.WaitGroup
	pipes.Go(func() { pipe(upstream, guest) })
	pipe(guest, upstream)
	pipes.Wait()
	close(done)
	wg.Wait()
}
