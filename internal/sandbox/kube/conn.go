package kube

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/streaming/pkg/httpstream"
)

// dial starts `hutch agent --stdio [args]` in the office's pod through
// one exec stream and returns the stream as a connection. The stream lives as long
// as the connection (not ctx, which only bounds the start); when it ends
// (hutch goes away, the pod is deleted) the agent's stdin ends and it
// kills what it was running.
func (r *Runtime) dial(ctx context.Context, key string, args ...string) (net.Conn, error) {
	req := r.cluster.Client.CoreREST().Post().
		Resource("pods").Namespace(r.cluster.Namespace).Name(PodName(key)).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{
			Container: containerName,
			Command:   append([]string{agentPath, "agent", "--stdio"}, args...),
			Stdin:     true,
			Stdout:    true,
			Stderr:    true,
		}, codecs().params)
	// WebSocket is what current API servers speak; SPDY is the fallback
	// for those that do not (or a proxy in between that cannot upgrade).
	ws, err := remotecommand.NewWebSocketExecutor(r.cluster.Config, "GET", req.URL().String())
	if err != nil {
		return nil, err
	}
	spdy, err := remotecommand.NewSPDYExecutor(r.cluster.Config, "POST", req.URL())
	if err != nil {
		return nil, err
	}
	ex, err := remotecommand.NewFallbackExecutor(ws, spdy, upgradeFailed)
	if err != nil {
		return nil, err
	}
	c := newStreamConn()
	go c.run(ex)
	select {
	case <-c.started:
		return c, nil
	case <-c.done:
		_ = c.Close()
		select {
		case <-c.started:
		default:
		}
		return nil, fmt.Errorf("pod %s: the agent exec ended before it answered: %s", PodName(key), c.failure())
	case <-ctx.Done():
		_ = c.Close()
		return nil, ctx.Err()
	}
}

// upgradeFailed says whether a WebSocket exec failed where SPDY may not:
// the API server, or a proxy in between, did not upgrade the connection.
// client-go reports that with k8s.io/streaming's UpgradeFailureError,
// which apimachinery's deprecated copy of httpstream does not match.
func upgradeFailed(err error) bool {
	return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
}

// streamConn is an exec stream seen as a connection: writes go to the
// agent's stdin, reads come from its stdout; the start of its stderr is
// kept for errors.
type streamConn struct {
	ctx    context.Context
	cancel context.CancelFunc

	inR  *io.PipeReader // the executor reads the agent's stdin here
	inW  *io.PipeWriter
	outR *io.PipeReader // the agent's stdout, read by the HTTP/2 client
	outW *io.PipeWriter

	started   chan struct{} // closed at the first byte of stdout
	startOnce sync.Once
	done      chan struct{} // closed when the stream ended

	mu     sync.Mutex
	err    error // why the stream ended
	stderr bytes.Buffer
}

func newStreamConn() *streamConn {
	c := &streamConn{started: make(chan struct{}), done: make(chan struct{})}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.inR, c.inW = io.Pipe()
	c.outR, c.outW = io.Pipe()
	return c
}

func (c *streamConn) run(ex remotecommand.Executor) {
	err := ex.StreamWithContext(c.ctx, remotecommand.StreamOptions{
		Stdin:  c.inR,
		Stdout: stdoutWriter{c},
		Stderr: stderrWriter{c},
	})
	if err == nil {
		err = io.EOF
	}
	c.mu.Lock()
	c.err = err
	c.mu.Unlock()
	c.outW.CloseWithError(err)
	c.inR.CloseWithError(err)
	close(c.done)
}

// failure describes why the stream ended: the agent's stderr, else the
// stream's error.
func (c *streamConn) failure() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s := bytes.TrimSpace(c.stderr.Bytes()); len(s) > 0 {
		return string(s)
	}
	if c.err != nil {
		return c.err.Error()
	}
	return "no output"
}

type stdoutWriter struct{ c *streamConn }

func (w stdoutWriter) Write(p []byte) (int, error) {
	if len(p) > 0 {
		w.c.startOnce.Do(func() { close(w.c.started) })
	}
	return w.c.outW.Write(p)
}

// stderrWriter keeps the first 4 KiB of the agent's stderr (it logs
// nothing there unless it fails to start).
type stderrWriter struct{ c *streamConn }

func (w stderrWriter) Write(p []byte) (int, error) {
	w.c.mu.Lock()
	if room := 4096 - w.c.stderr.Len(); room > 0 {
		w.c.stderr.Write(p[:min(len(p), room)])
	}
	w.c.mu.Unlock()
	return len(p), nil
}

func (c *streamConn) Read(p []byte) (int, error)  { return c.outR.Read(p) }
func (c *streamConn) Write(p []byte) (int, error) { return c.inW.Write(p) }

// Close ends the stream: the agent sees its stdin close (and the stream
// go), and kills its commands.
func (c *streamConn) Close() error {
	_ = c.inW.Close()
	c.cancel()
	c.outR.CloseWithError(net.ErrClosed)
	return nil
}

type streamAddr struct{}

func (streamAddr) Network() string { return "kube-exec" }
func (streamAddr) String() string  { return "kube-exec" }

func (c *streamConn) LocalAddr() net.Addr  { return streamAddr{} }
func (c *streamConn) RemoteAddr() net.Addr { return streamAddr{} }

// Deadlines are ignored, as on the agent's own stdio connection: the
// HTTP/2 client sets none, and finds a dead stream with pings.
func (c *streamConn) SetDeadline(time.Time) error      { return nil }
func (c *streamConn) SetReadDeadline(time.Time) error  { return nil }
func (c *streamConn) SetWriteDeadline(time.Time) error { return nil }
