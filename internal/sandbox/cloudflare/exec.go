package cloudflare

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"mime"
	"net/http"
	"os"
	"path"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/term"

	"github.com/hutchsandbox/hutch/internal/bridge/protocol"
	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/supervise"
)

// RemoteRoot is the remote runtime's workspace: commands start there, and
// relative working directories resolve against it.
const RemoteRoot = protocol.DefaultCwd

const (
	// MaxStdin bounds the standard input one command takes through a
	// bridge: it travels inside the request, so it is read in full first.
	MaxStdin = 16 << 20
	// maxFrame bounds one line of a streamed answer.
	maxFrame = 32 << 20
	// maxBaseBody bounds a base bridge's answer, which holds all the output.
	maxBaseBody = 256 << 20
	// drainWait bounds the wait for the end of a streamed answer after
	// its exit line.
	drainWait = 100 * time.Millisecond
)

// baseAnswer is a base bridge's answer to POST /exec (protocol.ExecResponse
// with a code that may be missing).
type baseAnswer struct {
	Stdout string `json:"stdout"`
	Stderr string `json:"stderr"`
	Code   *int   `json:"code"`
	Error  string `json:"error"`
}

// RemoteSandboxID is the bridge sandbox id of one conversation: the mode's
// sandbox id and the office key, so conversations never share a runtime.
func RemoteSandboxID(sandboxID, officeKey string) string {
	return sandboxID + "-" + officeKey
}

// RemoteDir maps a request's working directory into the remote runtime:
// empty is /workspace, a relative path resolves against it, an absolute
// path is sent as it is.
func RemoteDir(dir string) string {
	switch {
	case dir == "":
		return RemoteRoot
	case path.IsAbs(dir):
		return dir
	}
	return path.Join(RemoteRoot, dir)
}

// Exec runs one command through the bridge and blocks until it ends.
//
// The command runs in the conversation's remote runtime
// (RemoteSandboxID), in RemoteDir(req.Dir), with req.Env added. With a
// bridge that streams, output reaches req.Stdout and req.Stderr as it
// comes; with a base bridge, once the command ended. Either way at most
// req.OutputLimit bytes of each stream are kept and the result says what
// was dropped.
//
// The timeout is sent to the bridge (in whole seconds, rounded up), and
// the request itself is bounded by the timeout plus a grace, so a bridge
// that stops answering cannot hold the command past it: the result then
// has TimedOut set. Cancelling ctx closes the request (a streaming bridge
// kills the command) and, with the cancel extension, also posts /cancel;
// the result has Aborted set.
//
// Errors: errdefs.ErrInvalid for a bad request (the bridge's 400, e.g. a
// missing working directory), errdefs.ErrNotSupported for what a base
// bridge cannot carry (stdin, arguments that are not UTF-8),
// errdefs.ErrConflict for an exec id the bridge already ran,
// errdefs.ErrFailedPrecondition for a refused token, and
// errdefs.ErrUnavailable when the bridge cannot be reached or went away
// while the command ran (its end is then unknown).
func (r *Runtime) Exec(ctx context.Context, spec sandbox.Spec, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	if len(req.Argv) == 0 || (len(req.Argv) == 1 && strings.TrimSpace(req.Argv[0]) == "") {
		return sandbox.ExecResult{}, errdefs.New(errdefs.ErrInvalid, "Command is empty")
	}
	if spec.OfficeKey == "" {
		return sandbox.ExecResult{}, errdefs.New(errdefs.ErrInvalid, "The conversation has no office key, which names its remote runtime")
	}
	for k, v := range req.Env {
		if !utf8.ValidString(k) || !utf8.ValidString(v) {
			return sandbox.ExecResult{}, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("Vault env variable %q is not valid UTF-8 (its name or its value), which the bridge protocol cannot carry", strings.ToValidUTF8(k, "?")))
		}
	}
	if ctx.Err() != nil {
		// The caller gave up before anything ran: nothing to kill.
		return sandbox.ExecResult{ExitCode: -1, Aborted: true, Timeout: req.Timeout}, nil
	}
	start := time.Now()
	// Everything, the health check and stdin included, is bounded by the
	// timeout plus a grace: a bridge that stops answering never holds the
	// caller past it.
	var rctx context.Context
	var stop context.CancelFunc
	if req.Timeout > 0 {
		rctx, stop = context.WithTimeout(ctx, req.Timeout+r.grace)
	} else {
		rctx, stop = context.WithCancel(ctx)
	}
	defer stop()
	e := &execution{r: r, ctx: ctx, rctx: rctx, req: req, start: start}
	// ended turns a failure into Aborted or TimedOut when the caller or
	// the deadline is what ended it.
	ended := func(err error) (sandbox.ExecResult, error) {
		if res, ok := e.interrupted(); ok {
			return res, nil
		}
		return sandbox.ExecResult{}, err
	}

	h, err := r.cachedHealth(rctx)
	if err != nil {
		return ended(err)
	}
	body := protocol.ExecRequest{
		SandboxID: RemoteSandboxID(r.cfg.SandboxID, spec.OfficeKey),
		Cwd:       RemoteDir(req.Dir),
		Env:       req.Env,
		TimeZone:  req.TimeZone,
		Stream:    h.Has(ExtStream),
	}
	if req.Timeout > 0 {
		// Whole seconds, as base bridges expect; the grace covers the rest.
		body.TimeoutSeconds = math.Ceil(req.Timeout.Seconds())
	}
	if err := r.encodeCommand(&body, req.Argv, h); err != nil {
		return sandbox.ExecResult{}, err
	}
	var stdinBytes int
	if req.Stdin != nil {
		data, err := readStdin(rctx, req.Stdin)
		if err != nil {
			return ended(err)
		}
		if len(data) > 0 {
			if !h.Has(ExtStdin) {
				return sandbox.ExecResult{}, errdefs.New(errdefs.ErrNotSupported, fmt.Sprintf(
					"The bridge at %s does not take standard input (it does not advertise the stdin extension); the command was not run", r.display))
			}
			body.Stdin = base64.StdEncoding.EncodeToString(data)
			stdinBytes = len(data)
		}
	}
	if h.Has(ExtExecID) {
		body.ExecID = newExecID()
	}
	e.health, e.sandboxID, e.execID = h, body.SandboxID, body.ExecID
	data, err := json.Marshal(body)
	if err != nil {
		return sandbox.ExecResult{}, fmt.Errorf("cloudflare: encoding the exec request: %w", err)
	}
	log := r.log.With("sandbox_id", body.SandboxID, "exec_id", body.ExecID)
	log.Debug("bridge exec", "cwd", body.Cwd, "stream", body.Stream, "env_keys", slices.Sorted(maps.Keys(req.Env)), "stdin_bytes", stdinBytes)
	e.log = log

	resp, sent, err := r.send(rctx, http.MethodPost, protocol.PathExec, data)
	if err != nil {
		e.sent = sent
		if res, ok := e.interrupted(); ok {
			return res, nil
		}
		r.forgetHealth()
		if !sent {
			return sandbox.ExecResult{}, errdefs.New(errdefs.ErrUnavailable, fmt.Sprintf("The bridge at %s is not reachable: %s; the command was not run", r.display, r.scrub(transportCause(err))))
		}
		log.Debug("bridge exec: request failed after it was sent", "err", transportCause(err))
		return sandbox.ExecResult{}, r.wentAway()
	}
	e.sent = true
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return sandbox.ExecResult{}, r.execRefusal(resp, body.ExecID)
	}
	stdout := sandbox.NewLimitWriter(supervise.NewLatch(req.Stdout), req.OutputLimit)
	stderr := sandbox.NewLimitWriter(supervise.NewLatch(req.Stderr), req.OutputLimit)
	e.stdout, e.stderr = stdout, stderr
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt == protocol.ContentTypeNDJSON {
		return e.stream(resp.Body)
	}
	return e.base(resp.Body)
}

// execution is one command in flight.
type execution struct {
	r *Runtime
	// ctx is the caller's; rctx bounds the request (timeout plus grace).
	ctx, rctx context.Context
	req       sandbox.ExecRequest
	start     time.Time
	log       *slog.Logger

	health            Health
	sandboxID, execID string
	sent              bool // the request may have reached the bridge
	stdout, stderr    *sandbox.LimitWriter
}

// result is the result with the output counts and the wall time filled in.
func (e *execution) result(res sandbox.ExecResult) sandbox.ExecResult {
	if e.stdout != nil {
		res.StdoutTruncated, res.StdoutBytes = e.stdout.Truncated(), e.stdout.Total()
		res.StderrTruncated, res.StderrBytes = e.stderr.Truncated(), e.stderr.Total()
	}
	res.Duration = time.Since(e.start)
	res.Timeout = e.req.Timeout
	return res
}

// interrupted reports whether the caller aborted or the deadline passed,
// and if so cancels the command on the bridge and returns its result.
func (e *execution) interrupted() (sandbox.ExecResult, bool) {
	var res sandbox.ExecResult
	switch {
	case e.ctx.Err() != nil:
		res = sandbox.ExecResult{ExitCode: -1, Aborted: true}
	case e.rctx.Err() != nil:
		res = sandbox.ExecResult{ExitCode: -1, TimedOut: true}
	default:
		return sandbox.ExecResult{}, false
	}
	if e.sent {
		e.r.cancelRemote(e.ctx, e.health, e.sandboxID, e.execID)
	}
	return e.result(res), true
}

// stream reads a streamed answer to its exit line.
func (e *execution) stream(body io.ReadCloser) (sandbox.ExecResult, error) {
	br := bufio.NewReaderSize(body, 64<<10)
	for {
		line, err := readLine(br)
		if len(line) > 0 {
			var f protocol.Frame
			if jerr := json.Unmarshal(line, &f); jerr != nil {
				if res, ok := e.interrupted(); ok {
					return res, nil
				}
				e.r.forgetHealth()
				return sandbox.ExecResult{}, errdefs.New(errdefs.ErrUnavailable, fmt.Sprintf(
					"The bridge at %s sent a line that is not a frame of the protocol (%v); the command's end is unknown", e.r.display, jerr))
			}
			// The writers never fail (a Latch keeps their errors).
			_, _ = e.stdout.Write(f.Stdout)
			_, _ = e.stderr.Write(f.Stderr)
			if x := f.Exit; x != nil {
				// Read the (empty) rest so the connection can be reused,
				// but never wait on a bridge that keeps the answer open.
				t := time.AfterFunc(drainWait, func() { _ = body.Close() })
				_, _ = io.Copy(io.Discard, io.LimitReader(br, 4<<10))
				t.Stop()
				res := sandbox.ExecResult{ExitCode: x.Code, Signal: x.Signal, TimedOut: x.TimedOut, OOMKilled: x.OOMKilled}
				if x.TimedOut {
					res.ExitCode, res.Signal = -1, ""
				}
				if x.Error != "" {
					e.log.Debug("bridge exec: the exit line carries an error", "error", x.Error)
				}
				res = e.result(res)
				e.log.Debug("bridge exec ended", "exit_code", res.ExitCode, "signal", res.Signal, "timed_out", res.TimedOut, "duration", res.Duration)
				return res, nil
			}
		}
		if err != nil {
			if res, ok := e.interrupted(); ok {
				return res, nil
			}
			e.log.Debug("bridge exec: the stream ended without an exit line", "err", err)
			if errors.Is(err, errFrameTooLong) {
				e.r.forgetHealth()
				return sandbox.ExecResult{}, errdefs.New(errdefs.ErrUnavailable, fmt.Sprintf(
					"The bridge at %s sent a stream line longer than %d MiB; the command's end is unknown", e.r.display, maxFrame>>20))
			}
			e.r.forgetHealth()
			return sandbox.ExecResult{}, e.r.wentAway()
		}
	}
}

// base reads a base bridge's answer, which comes once the command ended.
func (e *execution) base(body io.Reader) (sandbox.ExecResult, error) {
	data, err := io.ReadAll(io.LimitReader(body, maxBaseBody+1))
	if err != nil {
		if res, ok := e.interrupted(); ok {
			return res, nil
		}
		e.r.forgetHealth()
		return sandbox.ExecResult{}, e.r.wentAway()
	}
	if len(data) > maxBaseBody {
		return sandbox.ExecResult{}, errdefs.New(errdefs.ErrUnavailable, fmt.Sprintf(
			"The bridge at %s answered with more than %d MiB; the command ran but its output is lost", e.r.display, maxBaseBody>>20))
	}
	var a baseAnswer
	if err := json.Unmarshal(data, &a); err != nil {
		return sandbox.ExecResult{}, errdefs.New(errdefs.ErrUnavailable, fmt.Sprintf(
			"The bridge at %s answered /exec with something other than the protocol's JSON (%v); the command's end is unknown", e.r.display, err))
	}
	_, _ = io.WriteString(e.stdout, a.Stdout)
	_, _ = io.WriteString(e.stderr, a.Stderr)
	res := sandbox.ExecResult{ExitCode: -1}
	if a.Code != nil {
		res.ExitCode = *a.Code
	}
	if msg := strings.TrimSpace(a.Error); msg != "" {
		if strings.HasPrefix(msg, "Command timed out") {
			res.ExitCode, res.TimedOut = -1, true
		} else {
			// What the bridge says about the command (it was killed, its
			// output was truncated) is for the person reading the output.
			_, _ = io.WriteString(e.stderr, e.r.scrub(msg)+"\n")
		}
	}
	res = e.result(res)
	e.log.Debug("bridge exec ended", "exit_code", res.ExitCode, "timed_out", res.TimedOut, "duration", res.Duration)
	return res, nil
}

// wentAway is the error of a command whose bridge stopped answering
// after the request was sent.
func (r *Runtime) wentAway() error {
	return errdefs.New(errdefs.ErrUnavailable, fmt.Sprintf(
		"The bridge at %s went away while the command ran; its end is unknown (it may still run there)", r.display))
}

// execRefusal classes a non-2xx answer to POST /exec.
func (r *Runtime) execRefusal(resp *http.Response, execID string) error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	msg := r.scrub(bridgeMessage(resp.StatusCode, body))
	switch resp.StatusCode {
	case http.StatusBadRequest:
		// The bridge says what is wrong with the request, e.g. a working
		// directory that does not exist: its words are the message.
		return errdefs.New(errdefs.ErrInvalid, msg)
	case http.StatusUnauthorized, http.StatusForbidden:
		return errdefs.New(errdefs.ErrFailedPrecondition, r.refusalText(resp.StatusCode, body, ""))
	case http.StatusConflict:
		return errdefs.New(errdefs.ErrConflict, fmt.Sprintf(
			"The bridge at %s has already run exec id %s, so it did not run it again (%s)", r.display, execID, msg))
	case http.StatusNotFound:
		return errdefs.New(errdefs.ErrFailedPrecondition, fmt.Sprintf(
			"The bridge at %s has no /exec (%s); check %s (or %s)", r.display, msg, EnvURL, EnvCloudflareURL))
	}
	// 5xx and anything else: the bridge or its runtime failed; the next
	// command checks its health again.
	r.forgetHealth()
	return errdefs.New(errdefs.ErrUnavailable, fmt.Sprintf("The bridge at %s failed (HTTP %d): %s", r.display, resp.StatusCode, msg))
}

// cancelRemote asks the bridge to kill a command (POST /cancel), with a
// deadline of its own, when the bridge advertises cancel and the command
// has an exec id. Closing the request already asked the same of a bridge
// the close reaches; this one reaches bridges behind proxies too.
func (r *Runtime) cancelRemote(ctx context.Context, h Health, sandboxID, execID string) {
	if !h.Has(ExtCancel) || execID == "" {
		return
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cancelTimeout)
	defer cancel()
	data, _ := json.Marshal(protocol.CancelRequest{SandboxID: sandboxID, ExecID: execID})
	resp, _, err := r.send(cctx, http.MethodPost, protocol.PathCancel, data)
	if err != nil {
		r.log.Debug("bridge cancel failed", "sandbox_id", sandboxID, "exec_id", execID, "err", transportCause(err))
		return
	}
	defer func() { _ = resp.Body.Close() }()
	var out protocol.CancelResponse
	_ = json.NewDecoder(io.LimitReader(resp.Body, maxErrorBody)).Decode(&out)
	r.log.Debug("bridge cancel", "sandbox_id", sandboxID, "exec_id", execID, "status", resp.StatusCode, "cancelled", out.Cancelled)
}

// encodeCommand puts argv into the request: a single element is the
// shell string of the base protocol; more elements go as argv when the
// bridge takes it, else as one shell string quoted so that sh -c passes
// each argument as it is. Arguments that are not UTF-8 need the argv
// extension (argvBase64).
func (r *Runtime) encodeCommand(body *protocol.ExecRequest, argv []string, h Health) error {
	valid := true
	for _, a := range argv {
		valid = valid && utf8.ValidString(a)
	}
	argvExt := h.Has(ExtArgv)
	switch {
	case len(argv) == 1 && valid:
		body.Command = argv[0]
	case !valid && !argvExt:
		return errdefs.New(errdefs.ErrNotSupported, fmt.Sprintf(
			"The bridge at %s cannot run a command that is not valid UTF-8 (it does not advertise the argv extension)", r.display))
	case !valid:
		if len(argv) == 1 {
			argv = []string{"sh", "-c", argv[0]}
		}
		for _, a := range argv {
			body.ArgvBase64 = append(body.ArgvBase64, base64.StdEncoding.EncodeToString([]byte(a)))
		}
	case argvExt:
		body.Argv = argv
	default:
		body.Command = ShellQuote(argv)
	}
	return nil
}

// ShellQuote renders argv as one sh command line that runs argv[0] with
// exactly the arguments given: each is single-quoted, and a single quote
// inside one closes the quoting, is escaped with a backslash, and reopens
// it. The program is exec'ed, so the shell does not stay between it and
// its exit status (except for a program whose name starts with '-', which
// exec would take for an option).
func ShellQuote(argv []string) string {
	var b strings.Builder
	if !strings.HasPrefix(argv[0], "-") {
		b.WriteString("exec ")
	}
	for i, a := range argv {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteByte('\'')
		b.WriteString(strings.ReplaceAll(a, "'", `'\''`))
		b.WriteByte('\'')
	}
	return b.String()
}

// readStdin reads a command's standard input in full, up to MaxStdin. A
// terminal is not read (it would wait for the user): the command gets an
// empty stdin, as through the daemon. The read gives up when ctx ends.
func readStdin(ctx context.Context, in io.Reader) ([]byte, error) {
	if f, ok := in.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		return nil, nil
	}
	type read struct {
		data []byte
		err  error
	}
	done := make(chan read, 1)
	go func() {
		// When ctx ends first this goroutine stays until the reader
		// returns; Exec does not wait for it.
		data, err := io.ReadAll(io.LimitReader(in, MaxStdin+1))
		done <- read{data, err}
	}()
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case rd := <-done:
		if rd.err != nil {
			return nil, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("Standard input cannot be read: %v", rd.err))
		}
		if len(rd.data) > MaxStdin {
			return nil, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("Standard input is larger than %d MiB, the most a command takes through a bridge", MaxStdin>>20))
		}
		return rd.data, nil
	}
}

// newExecID returns 32 random hex digits.
func newExecID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// errFrameTooLong: a stream line passed maxFrame.
var errFrameTooLong = errors.New("stream line too long")

// readLine returns the next line without its newline; at the end of the
// stream it returns what is left (possibly a last line without a newline)
// with the error.
func readLine(br *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > maxFrame {
			return nil, errFrameTooLong
		}
		switch {
		case err == nil:
			return trimLine(line), nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		default:
			return trimLine(line), err
		}
	}
}

func trimLine(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r' || b[len(b)-1] == ' ') {
		b = b[:len(b)-1]
	}
	return b
}
