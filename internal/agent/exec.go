package agent

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"golang.org/x/sys/unix"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/supervise"
)

// command is an exec request checked and resolved, ready to start.
type command struct {
	supervise.Command
	envKeys []string // the request's env names, for logs
}

// handleExec runs one command. The body is the JSON request followed by
// the command's stdin; the response streams stdout and stderr multiplexed
// and ends with the Hutch-Result trailer.
func (s *Server) handleExec(w http.ResponseWriter, r *http.Request) {
	dec := json.NewDecoder(r.Body)
	var req execRequest
	if err := dec.Decode(&req); err != nil {
		writeError(w, errdefs.New(errdefs.ErrInvalid, "Exec request is not valid JSON: "+err.Error()))
		return
	}
	cmd, err := resolve(req, s.commandEnv())
	if err != nil {
		writeError(w, err)
		return
	}
	stdin := io.MultiReader(dec.Buffered(), r.Body)
	s.run(r.Context(), w, r.Body, stdin, cmd)
}

// commandEnv is the env every command starts from, before its request's
// own: the agent's, with what the egress fields add (proxy, trust) and
// what guest setups added (time zone, proxy; a guest's proxy wins).
func (s *Server) commandEnv() []string {
	env := maps.Clone(s.egressEnv)
	maps.Copy(env, s.guestEnv())
	return supervise.OverlayEnv(os.Environ(), env)
}

// resolve checks an exec request and turns it into a command whose env
// is base overlaid with the request's.
func resolve(req execRequest, base []string) (*command, error) {
	argv := req.Argv
	if len(req.ArgvBytes) > 0 {
		argv = make([]string, len(req.ArgvBytes))
		for i, a := range req.ArgvBytes {
			argv[i] = string(a)
		}
	}
	if len(argv) == 0 || (len(argv) == 1 && strings.TrimSpace(argv[0]) == "") {
		return nil, errdefs.New(errdefs.ErrInvalid, "Command is empty")
	}
	if req.TimeoutMs < 0 {
		return nil, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("Timeout must not be negative: %dms", req.TimeoutMs))
	}
	for k, v := range req.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return nil, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("Env name is not valid: %q", k))
		}
		if strings.ContainsRune(v, 0) {
			return nil, errdefs.New(errdefs.ErrInvalid, "Env value of "+k+" contains a NUL byte")
		}
	}
	dir, err := supervise.WorkDir(req.Dir) // "": the agent's own
	if err != nil {
		return nil, err
	}
	sc, err := supervise.Resolve(argv, dir, supervise.OverlayEnv(base, req.Env))
	if err != nil {
		return nil, err
	}
	sc.Timeout = time.Duration(req.TimeoutMs) * time.Millisecond
	return &command{Command: sc, envKeys: slices.Sorted(maps.Keys(req.Env))}, nil
}

// run starts cmd and sees it to its end, streaming its output into w and
// its result into the trailer. body is closed to stop the stdin copy.
func (s *Server) run(ctx context.Context, w http.ResponseWriter, body io.Closer, stdin io.Reader, cmd *command) {
	if ctx.Err() != nil {
		return // the caller left before anything ran: nothing to answer
	}
	out := &muxWriter{w: w, rc: http.NewResponseController(w)}
	sc := cmd.Command
	sc.Cgroup = s.CommandCgroup
	// Always a pipe, even for a caller that sends no stdin: the request
	// body is the stdin, and its end is the stdin's end.
	sc.Stdin, sc.StdinCloser = stdin, body
	sc.Stdout = &frameWriter{out: out, stream: stdcopy.Stdout}
	sc.Stderr = &frameWriter{out: out, stream: stdcopy.Stderr}
	sc.DrainGrace, sc.Log = s.drainGrace, s.log
	oomBefore, oomKnown := readOOMKills(s.oomPath)
	p, err := supervise.Start(sc)
	if err != nil {
		writeError(w, err)
		return
	}
	log := s.log.With("pid", p.Pid(), "program", sc.Prog)
	log.Debug("agent exec started", "dir", sc.Dir, "env", cmd.envKeys, "timeout", sc.Timeout)

	// The output is not read before Wait: the status and the trailer's
	// name go out first.
	w.Header().Set("Content-Type", contentTypeStream)
	w.Header().Set("Trailer", trailerResult)
	w.WriteHeader(http.StatusOK)
	out.flush()

	sr := p.Wait(ctx)
	res := execResult{ExitCode: sr.ExitCode, Signal: sr.Signal, TimedOut: sr.TimedOut, Aborted: sr.Aborted}
	if sr.Signal == unix.SignalName(unix.SIGKILL) && oomKnown {
		if after, ok := readOOMKills(s.oomPath); ok && after > oomBefore {
			res.OOMKilled = true
		}
	}
	if b, err := json.Marshal(res); err == nil {
		w.Header().Set(trailerResult, string(b))
	}
	if err := out.failed(); err != nil {
		log.Debug("agent exec: the caller stopped reading the output", "err", err)
	}
	log.Debug("agent exec ended", "exit_code", res.ExitCode, "signal", res.Signal,
		"timed_out", res.TimedOut, "aborted", res.Aborted, "oom_killed", res.OOMKilled, "duration", sr.Duration)
}

// muxWriter is the response body shared by both streams: one frame at a
// time, flushed as it comes. After the first error it swallows everything,
// so the output keeps draining (the command never blocks on a full pipe)
// until the command is killed.
type muxWriter struct {
	w  io.Writer
	rc *http.ResponseController

	mu  sync.Mutex
	err error
}

func (m *muxWriter) writeFrame(frame []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.err != nil {
		return
	}
	if _, err := m.w.Write(frame); err != nil {
		m.err = err
		return
	}
	if err := m.rc.Flush(); err != nil {
		m.err = err
	}
}

func (m *muxWriter) flush() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.err == nil {
		m.err = m.rc.Flush()
	}
}

func (m *muxWriter) failed() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.err
}

// frameWriter writes stdcopy frames of one stream: an 8-byte header (the
// stream, three zero bytes, the big-endian payload length) then the
// payload, as stdcopy.StdCopy reads them.
type frameWriter struct {
	out    *muxWriter
	stream stdcopy.StdType
	buf    []byte
}

func (f *frameWriter) Write(p []byte) (int, error) {
	const header = 8
	f.buf = slices.Grow(f.buf[:0], header+len(p))[:header+len(p)]
	f.buf[0] = byte(f.stream)
	f.buf[1], f.buf[2], f.buf[3] = 0, 0, 0
	binary.BigEndian.PutUint32(f.buf[4:header], uint32(len(p)))
	copy(f.buf[header:], p)
	f.out.writeFrame(f.buf)
	return len(p), nil
}
