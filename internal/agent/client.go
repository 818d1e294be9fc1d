package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/moby/moby/api/pkg/stdcopy"
	"golang.org/x/net/http2"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/supervise"
)

// Health checks of an idle connection: a ping after this long without a
// frame, and the connection is dropped when the answer takes longer than
// pingTimeout. Commands that print nothing for a while are not idle
// connections: the agent answers pings whatever its commands do.
const (
	readIdleTimeout = 30 * time.Second
	pingTimeout     = 15 * time.Second
)

// answerGrace is how long past a command's timeout the client waits for
// the agent's result before it stops waiting. The agent kills the group
// at the timeout and waits up to supervise.DefaultDrainGrace for its
// output; an agent still silent after this has stopped answering (its
// runtime paused, frozen, or starved by what it runs), and a caller must
// not wait on it for the connection's health check, or for ever.
const answerGrace = 5 * time.Second

// errNoAnswer is the cause of an exec's context when answerGrace passed.
var errNoAnswer = errors.New("the agent did not answer within the timeout and its grace")

// maxErrorBody bounds how much of an error response is read.
const maxErrorBody = 64 << 10

// Client talks to one agent over one HTTP/2 connection, which it dials
// on first use and again whenever the previous one broke. It is safe for
// concurrent use; concurrent calls share the connection.
type Client struct {
	dial func(ctx context.Context) (net.Conn, error)
	log  *slog.Logger
	tr   *http2.Transport

	dialing chan struct{} // held while the connection is checked or dialled

	// key, when set, is what every fresh connection's agent must prove it
	// holds (see RequireProof); refusal is the error text when it fails.
	key     []byte
	refusal string

	mu     sync.Mutex // guards the following
	cc     *http2.ClientConn
	closed bool
}

// NewClient returns a client that reaches the agent through dial (a unix
// socket, a hijacked exec stream, a pipe to a process). A nil log discards.
func NewClient(dial func(ctx context.Context) (net.Conn, error), log *slog.Logger) *Client {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Client{
		dial: dial,
		log:  log,
		tr: &http2.Transport{
			AllowHTTP:                  true,
			DisableCompression:         true,
			StrictMaxConcurrentStreams: true, // wait for a free stream, never open a second connection
			ReadIdleTimeout:            readIdleTimeout,
			PingTimeout:                pingTimeout,
		},
		dialing: make(chan struct{}, 1),
	}
}

// errClientClosed is returned by every call after Close.
var errClientClosed = fmt.Errorf("agent client is closed: %w", net.ErrClosed)

// conn returns a usable connection, dialling a new one when there is none
// or the last one broke (I/O error, closed, GOAWAY).
func (c *Client) conn(ctx context.Context) (*http2.ClientConn, error) {
	select {
	case c.dialing <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-c.dialing }()
	c.mu.Lock()
	cc, closed := c.cc, c.closed
	c.mu.Unlock()
	if closed {
		return nil, errClientClosed
	}
	if cc != nil && cc.CanTakeNewRequest() {
		return cc, nil
	}
	if cc != nil {
		c.log.Debug("agent client: connection broke; dialling again")
		_ = cc.Close()
	}
	nc, err := c.dial(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, errdefs.New(errdefs.ErrUnavailable, "agent unreachable: "+err.Error())
	}
	cc, err = c.tr.NewClientConn(nc)
	if err != nil {
		_ = nc.Close()
		return nil, errdefs.New(errdefs.ErrUnavailable, "agent unreachable: "+err.Error())
	}
	if c.key != nil {
		if err := c.hello(ctx, cc); err != nil {
			_ = cc.Close()
			return nil, err
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		_ = cc.Close()
		return nil, errClientClosed
	}
	c.cc = cc
	return cc, nil
}

// Close closes the connection; calls in flight fail with ErrUnavailable.
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	if c.cc == nil {
		return nil
	}
	err := c.cc.Close()
	c.cc = nil
	return err
}

// connLost is the error of a call whose connection broke under it.
func connLost(err error) error {
	return errdefs.New(errdefs.ErrUnavailable, "agent connection lost: "+err.Error())
}

// roundTrip sends one request. body, when not nil, builds the request
// body. A request that fails on a connection that turned out to be dead
// before any of the request's body was read, so before the agent can have
// acted on it, is sent once more on a new connection. Errors are ctx's
// own error when ctx ended, and of class ErrUnavailable otherwise.
func (c *Client) roundTrip(ctx context.Context, method, target string, body func() *lazyBody) (*http.Response, *lazyBody, error) {
	for attempt := 0; ; attempt++ {
		cc, err := c.conn(ctx)
		if err != nil {
			return nil, nil, err
		}
		var lb *lazyBody
		var rc io.ReadCloser = http.NoBody
		if body != nil {
			lb = body()
			rc = lb
		}
		req, err := http.NewRequestWithContext(ctx, method, "http://agent"+target, rc)
		if err != nil {
			return nil, nil, err
		}
		if lb != nil {
			req.ContentLength = -1
		}
		resp, err := cc.RoundTrip(req)
		if err == nil {
			return resp, lb, nil
		}
		if lb != nil {
			_ = lb.Close()
		}
		if ctx.Err() != nil {
			return nil, lb, ctx.Err()
		}
		if attempt == 0 && (lb == nil || !lb.started()) && !cc.CanTakeNewRequest() {
			continue
		}
		return nil, lb, connLost(err)
	}
}

// responseError turns a non-2xx response into an error of the class and
// with the text the agent sent.
func responseError(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	var eb errorBody
	if err := json.Unmarshal(b, &eb); err != nil || eb.Message == "" {
		return fmt.Errorf("agent: %s: %s", resp.Status, b)
	}
	return eb.decodeError()
}

// Exec runs one command in the agent's sandbox and blocks until it ends.
// stdout and stderr stream into req.Stdout and req.Stderr, each capped at
// req.OutputLimit (the rest is read, counted and dropped). Cancelling ctx
// cancels the request: the agent kills the command's process group and
// the result has Aborted set. A connection that breaks mid-command is an
// error of class ErrUnavailable (the agent kills the command); a command
// the agent refused to start is an error of the agent's class and text.
//
// A positive req.Timeout is also enforced here, whatever the agent does:
// with no result answerGrace past it, Exec gives up on the agent and
// returns a timeout with KillUnconfirmed set (the request is reset, so an
// agent that answers again kills the command).
func (c *Client) Exec(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	aborted := sandbox.ExecResult{ExitCode: -1, Aborted: true, Timeout: req.Timeout}
	if ctx.Err() != nil {
		return aborted, nil // the caller gave up before anything ran
	}
	caller := ctx
	if req.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, req.Timeout+answerGrace, errNoAnswer)
		defer cancel()
	}
	// gaveUp reports whether ctx ended because the agent did not answer
	// in time, not because the caller left.
	gaveUp := func() bool { return caller.Err() == nil && errors.Is(context.Cause(ctx), errNoAnswer) }
	er := execRequest{
		Argv:      req.Argv,
		Dir:       req.Dir,
		Env:       req.EnvWithTimeZone(),
		TimeoutMs: ceilMillis(req.Timeout),
	}
	if slices.ContainsFunc(req.Argv, func(a string) bool { return !utf8.ValidString(a) }) {
		er.ArgvBytes = make([][]byte, len(req.Argv))
		for i, a := range req.Argv {
			er.ArgvBytes[i] = []byte(a)
		}
	}
	head, err := json.Marshal(er)
	if err != nil {
		return sandbox.ExecResult{}, errdefs.New(errdefs.ErrInvalid, "Exec request cannot be encoded: "+err.Error())
	}
	start := time.Now()
	resp, body, err := c.roundTrip(ctx, http.MethodPost, pathExec, func() *lazyBody { return newLazyBody(head, req.Stdin) })
	if body != nil {
		defer func() { _ = body.Close() }()
	}
	if err != nil {
		if gaveUp() {
			return sandbox.ExecResult{ExitCode: -1, TimedOut: true, KillUnconfirmed: true, Duration: time.Since(start), Timeout: req.Timeout}, nil
		}
		if ctx.Err() != nil {
			aborted.Duration = time.Since(start)
			return aborted, nil
		}
		return sandbox.ExecResult{}, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return sandbox.ExecResult{}, responseError(resp)
	}

	outLatch, errLatch := supervise.NewLatch(req.Stdout), supervise.NewLatch(req.Stderr)
	stdout := sandbox.NewLimitWriter(outLatch, req.OutputLimit)
	stderr := sandbox.NewLimitWriter(errLatch, req.OutputLimit)
	_, copyErr := stdcopy.StdCopy(stdout, stderr, resp.Body)
	res := sandbox.ExecResult{
		ExitCode:        -1,
		StdoutTruncated: stdout.Truncated(),
		StderrTruncated: stderr.Truncated(),
		StdoutBytes:     stdout.Total(),
		StderrBytes:     stderr.Total(),
		Duration:        time.Since(start),
		Timeout:         req.Timeout,
	}
	for _, l := range []struct {
		name string
		l    *supervise.Latch
	}{{"stdout", outLatch}, {"stderr", errLatch}} {
		if err := l.l.Err(); err != nil {
			c.log.Warn("agent exec: output writer failed; the rest of the stream was dropped", "stream", l.name, "err", err)
		}
	}
	trailer := resp.Trailer.Get(trailerResult)
	if copyErr == nil && trailer == "" {
		copyErr = errors.New("the agent sent no result")
	}
	if copyErr != nil {
		if gaveUp() {
			res.TimedOut, res.KillUnconfirmed = true, true
			return res, nil
		}
		if ctx.Err() != nil {
			res.Aborted = true
			return res, nil
		}
		return sandbox.ExecResult{}, connLost(copyErr)
	}
	var r execResult
	if err := json.Unmarshal([]byte(trailer), &r); err != nil {
		return sandbox.ExecResult{}, connLost(fmt.Errorf("the agent's result is not valid JSON: %w", err))
	}
	res.ExitCode, res.Signal = r.ExitCode, r.Signal
	res.TimedOut, res.Aborted, res.OOMKilled = r.TimedOut, r.Aborted, r.OOMKilled
	return res, nil
}

// ceilMillis is d in whole milliseconds, rounded up so that a positive
// timeout never becomes "none".
func ceilMillis(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}

// Ping asks the agent who it is.
func (c *Client) Ping(ctx context.Context) (Info, error) {
	resp, _, err := c.roundTrip(ctx, http.MethodGet, pathPing, nil)
	if err != nil {
		return Info{}, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return Info{}, responseError(resp)
	}
	var info Info
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxErrorBody)).Decode(&info); err != nil {
		if ctx.Err() != nil {
			return Info{}, ctx.Err()
		}
		return Info{}, connLost(err)
	}
	return info, nil
}

// maxListBody bounds a list response (about 200k entries).
const maxListBody = 64 << 20

// fileQuery is the query of a file operation on path confined to roots.
func fileQuery(path string, roots []string) url.Values {
	q := url.Values{"path": {path}}
	if len(roots) > 0 {
		q[paramRoot] = roots
	}
	return q
}

// ReadFile copies the file at path (absolute and clean, as the sandbox
// sees it) into w. A missing file is an error of class ErrNotFound. An
// error while the bytes flow leaves what already reached w there.
func (c *Client) ReadFile(ctx context.Context, path string, w io.Writer) error {
	return c.ReadFileWithin(ctx, path, nil, w)
}

// ReadFileWithin is ReadFile confined to roots as ReadFileWithin (the
// function) confines it, in the agent's sandbox; no roots: unconfined. A
// path that leads outside is an error of class ErrFailedPrecondition.
func (c *Client) ReadFileWithin(ctx context.Context, path string, roots []string, w io.Writer) error {
	resp, _, err := c.roundTrip(ctx, http.MethodGet, pathFile+"?"+fileQuery(path, roots).Encode(), nil)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return responseError(resp)
	}
	src := &errReader{r: resp.Body}
	if _, err := io.Copy(w, src); err != nil {
		switch {
		case src.err == nil:
			return fmt.Errorf("agent: read %s: %w", path, err) // w failed
		case ctx.Err() != nil:
			return ctx.Err()
		default:
			return connLost(src.err)
		}
	}
	if t := resp.Trailer.Get(trailerError); t != "" {
		var eb errorBody
		if err := json.Unmarshal([]byte(t), &eb); err != nil {
			return connLost(fmt.Errorf("the agent's error is not valid JSON: %w", err))
		}
		return eb.decodeError()
	}
	return nil
}

// WriteFile replaces the file at path (absolute and clean) with what r
// yields, atomically: the agent stages the content next to the file and
// renames it over the file only once all of it arrived and was synced, so
// a failing r or a broken connection leaves the old content whole. Missing
// parents are created. A zero mode keeps an existing file's mode (0644 for
// a new one); otherwise its permission bits are set.
func (c *Client) WriteFile(ctx context.Context, path string, r io.Reader, mode os.FileMode) error {
	return c.WriteFileWithin(ctx, path, nil, r, mode)
}

// WriteFileWithin is WriteFile confined to roots as WriteFileWithin (the
// function) confines it: parents are created only under a root, and a
// path that leads outside is an error of class ErrFailedPrecondition.
func (c *Client) WriteFileWithin(ctx context.Context, path string, roots []string, r io.Reader, mode os.FileMode) error {
	q := fileQuery(path, roots)
	if mode != 0 {
		q.Set("mode", "0"+strconv.FormatUint(uint64(mode.Perm()), 8))
	}
	resp, body, err := c.roundTrip(ctx, http.MethodPut, pathFile+"?"+q.Encode(), func() *lazyBody { return newLazyBody(nil, r) })
	if body != nil {
		defer func() { _ = body.Close() }()
		if srcErr := body.sourceErr(); srcErr != nil {
			if resp != nil {
				_ = resp.Body.Close()
			}
			return fmt.Errorf("agent: write %s: reading the content failed: %w", path, srcErr)
		}
	}
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode/100 != 2 {
		return responseError(resp)
	}
	return nil
}

// Stat describes what path resolves to in the agent's sandbox, confined
// to roots (none: unconfined); see StatWithin. Missing: ErrNotFound.
func (c *Client) Stat(ctx context.Context, path string, roots []string) (sandbox.FileInfo, error) {
	var fi sandbox.FileInfo
	err := c.getJSON(ctx, pathStat, fileQuery(path, roots), maxErrorBody, &fi)
	return fi, err
}

// List returns the entries of the directory path resolves to, sorted by
// name, confined to roots (none: unconfined); see ListWithin.
func (c *Client) List(ctx context.Context, path string, roots []string) ([]sandbox.FileInfo, error) {
	var infos []sandbox.FileInfo
	if err := c.getJSON(ctx, pathList, fileQuery(path, roots), maxListBody, &infos); err != nil {
		return nil, err
	}
	return infos, nil
}

// getJSON GETs target?q and decodes at most limit bytes of JSON into v.
func (c *Client) getJSON(ctx context.Context, target string, q url.Values, limit int64, v any) error {
	resp, _, err := c.roundTrip(ctx, http.MethodGet, target+"?"+q.Encode(), nil)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return responseError(resp)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, limit)).Decode(v); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return connLost(err)
	}
	return nil
}

// lazyBody is a request body: a head, then what src yields. src is read by
// a goroutine of its own through a pipe, started on the first read past
// the head, so that Close (by the transport, when the stream ends) never
// waits for a Read on src that blocks, and so that a request that never
// started sending has consumed nothing of src.
type lazyBody struct {
	head   []byte
	src    io.Reader
	pr     *io.PipeReader
	pw     *io.PipeWriter
	once   sync.Once
	asked  atomic.Bool
	mu     sync.Mutex
	srcErr error
}

func newLazyBody(head []byte, src io.Reader) *lazyBody {
	pr, pw := io.Pipe()
	return &lazyBody{head: head, src: src, pr: pr, pw: pw}
}

func (b *lazyBody) Read(p []byte) (int, error) {
	b.asked.Store(true)
	if len(b.head) > 0 {
		n := copy(p, b.head)
		b.head = b.head[n:]
		return n, nil
	}
	if b.src == nil {
		return 0, io.EOF
	}
	b.once.Do(func() { go b.copy() })
	return b.pr.Read(p)
}

func (b *lazyBody) copy() {
	src := &errReader{r: b.src}
	_, err := io.Copy(b.pw, src)
	if src.err != nil {
		b.mu.Lock()
		b.srcErr = src.err
		b.mu.Unlock()
		b.pw.CloseWithError(src.err)
		return
	}
	b.pw.CloseWithError(err) // nil: EOF for the reader
}

// Close ends the body: a pending Read returns, and the copy from src stops
// at its next write.
func (b *lazyBody) Close() error {
	_ = b.pr.Close()
	return nil
}

// started reports whether the transport has read any of the body, so
// whether the agent may have seen the request.
func (b *lazyBody) started() bool { return b.asked.Load() }

// sourceErr is the error src returned, if any.
func (b *lazyBody) sourceErr() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.srcErr
}

// GuestSetup asks a microVM's agent to apply setup (see GuestSetup). The
// setup is validated here first, so a bad one never leaves the daemon. An
// agent that is no microVM's init answers with an error of class
// ErrNotFound.
func (c *Client) GuestSetup(ctx context.Context, setup GuestSetup) error {
	if err := setup.Validate(); err != nil {
		return err
	}
	head, err := json.Marshal(setup)
	if err != nil {
		return errdefs.New(errdefs.ErrInvalid, "Guest setup cannot be encoded: "+err.Error())
	}
	resp, _, err := c.roundTrip(ctx, http.MethodPost, pathGuestSetup, func() *lazyBody { return newLazyBody(head, nil) })
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode/100 != 2 {
		return responseError(resp)
	}
	return nil
}

// GuestPowerOff asks a microVM's agent to kill every command and power
// the VM off. It is sent once, never retried on a new connection, and a
// connection that drops before the answer arrives counts as success: the
// guest may well have gone before its answer left. The caller still waits
// for the VM to exit, and ends it itself after a grace period.
func (c *Client) GuestPowerOff(ctx context.Context) error {
	cc, err := c.conn(ctx)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://agent"+pathGuestPowerOff, http.NoBody)
	if err != nil {
		return err
	}
	resp, err := cc.RoundTrip(req)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		c.log.Debug("agent guest poweroff: the connection dropped before the answer; taking it as done", "err", err)
		return nil
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode/100 != 2 {
		return responseError(resp)
	}
	return nil
}
