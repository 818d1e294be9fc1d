package agent

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"golang.org/x/sys/unix"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/procio"
)

const (
	// shell runs single-string commands.
	shell = "/bin/sh"
	// defaultPath is searched when the command's env has no PATH.
	defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
)

// command is an exec request checked and resolved, ready to start.
type command struct {
	path    string   // the program to execute
	args    []string // its argv
	prog    string   // the name logs may show
	dir     string
	env     []string
	envKeys []string // the request's env names, for logs
	timeout time.Duration
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
// own: the agent's, with what guest setups added (time zone, proxy).
func (s *Server) commandEnv() []string {
	return overlayEnv(os.Environ(), s.guestEnv())
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
	dir, err := workDir(req.Dir)
	if err != nil {
		return nil, err
	}
	env := overlayEnv(base, req.Env)
	cmd := &command{
		dir:     dir,
		env:     env,
		envKeys: slices.Sorted(maps.Keys(req.Env)),
		timeout: time.Duration(req.TimeoutMs) * time.Millisecond,
	}
	if len(argv) == 1 {
		cmd.path, cmd.args, cmd.prog = shell, []string{"sh", "-c", argv[0]}, "sh"
		return cmd, nil
	}
	pathEnv, ok := lookupEnv(env, "PATH")
	if !ok {
		pathEnv = defaultPath
	}
	cmd.path, err = lookPath(argv[0], dir, pathEnv)
	if err != nil {
		return nil, err
	}
	cmd.args, cmd.prog = argv, argv[0]
	return cmd, nil
}

// workDir resolves the command's working directory (default: the agent's
// own; relative: against it) and checks it is one.
func workDir(dir string) (string, error) {
	abs, err := filepath.Abs(dir) // "" is the agent's working directory
	if err != nil {
		return "", errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("Working directory %s cannot be resolved: %v", dir, err))
	}
	fi, err := os.Stat(abs)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", errdefs.New(errdefs.ErrInvalid, "Working directory does not exist: "+abs)
	case err != nil:
		return "", errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("Working directory %s cannot be used: %v", abs, err))
	case !fi.IsDir():
		return "", errdefs.New(errdefs.ErrInvalid, "Working directory is not a directory: "+abs)
	}
	return abs, nil
}

// overlayEnv returns base with overlay's variables set, in a stable order.
func overlayEnv(base []string, overlay map[string]string) []string {
	out := make([]string, 0, len(base)+len(overlay))
	at := make(map[string]int, len(base))
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if i, ok := at[k]; ok {
			out[i] = kv
			continue
		}
		at[k] = len(out)
		out = append(out, kv)
	}
	for _, k := range slices.Sorted(maps.Keys(overlay)) {
		kv := k + "=" + overlay[k]
		if i, ok := at[k]; ok {
			out[i] = kv
			continue
		}
		out = append(out, kv)
	}
	return out
}

// lookupEnv finds key in env (the last one wins, as for execve's users).
func lookupEnv(env []string, key string) (string, bool) {
	for i := len(env) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(env[i], "="); ok && k == key {
			return v, true
		}
	}
	return "", false
}

// lookPath finds prog the way a shell would for the command: a name with
// a slash is taken as it is (relative to dir), any other is searched in
// pathEnv, whose relative entries also resolve against dir.
func lookPath(prog, dir, pathEnv string) (string, error) {
	notFound := errdefs.New(errdefs.ErrInvalid, "Program not found: "+prog)
	if prog == "" {
		return "", notFound
	}
	if strings.Contains(prog, "/") {
		p := prog
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		switch err := executable(p); {
		case err == nil:
			return p, nil
		case errors.Is(err, fs.ErrNotExist):
			return "", notFound
		default:
			return "", errdefs.New(errdefs.ErrInvalid, "Program is not executable: "+prog)
		}
	}
	var denied bool
	for _, d := range filepath.SplitList(pathEnv) {
		if d == "" {
			d = "."
		}
		if !filepath.IsAbs(d) {
			d = filepath.Join(dir, d)
		}
		p := filepath.Join(d, prog)
		switch err := executable(p); {
		case err == nil:
			return p, nil
		case !errors.Is(err, fs.ErrNotExist):
			denied = true
		}
	}
	if denied {
		return "", errdefs.New(errdefs.ErrInvalid, "Program is not executable: "+prog)
	}
	return "", notFound
}

// executable reports whether p is a file someone may execute.
func executable(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	if fi.IsDir() || fi.Mode()&0o111 == 0 {
		return fs.ErrPermission
	}
	return nil
}

// run starts cmd and sees it to its end, streaming its output into w and
// its result into the trailer. body is closed to stop the stdin copy.
func (s *Server) run(ctx context.Context, w http.ResponseWriter, body io.Closer, stdin io.Reader, cmd *command) {
	if ctx.Err() != nil {
		return // the caller left before anything ran: nothing to answer
	}
	var toClose []*os.File
	closeAll := func() {
		for _, f := range toClose {
			f.Close()
		}
	}
	defer closeAll()
	var pipes [3][2]*os.File // stdin, stdout, stderr: read end, write end
	for i := range pipes {
		pr, pw, err := os.Pipe()
		if err != nil {
			writeError(w, errdefs.New(errdefs.ErrUnavailable, fmt.Sprintf("Cannot create a pipe for the command: %v", err)))
			return
		}
		toClose = append(toClose, pr, pw)
		pipes[i] = [2]*os.File{pr, pw}
	}
	stdinR, stdinW := pipes[0][0], pipes[0][1]
	stdoutR, stdoutW := pipes[1][0], pipes[1][1]
	stderrR, stderrW := pipes[2][0], pipes[2][1]

	sys := &syscall.SysProcAttr{Setpgid: true}
	if s.CommandCgroup != "" {
		fd, err := openCgroup(s.CommandCgroup)
		if err != nil {
			writeError(w, err)
			return
		}
		defer unix.Close(fd)
		sys.UseCgroupFD, sys.CgroupFD = true, fd
	}
	oomBefore, oomKnown := readOOMKills(s.oomPath)
	attr := &syscall.ProcAttr{
		Dir:   cmd.dir,
		Env:   cmd.env,
		Files: []uintptr{stdinR.Fd(), stdoutW.Fd(), stderrW.Fd()},
		Sys:   sys,
	}
	start := time.Now()
	pid, exited, err := s.reaper.start(cmd.path, cmd.args, attr)
	// The child has its copies; ours of its ends must go so EOF can come.
	stdinR.Close()
	stdoutW.Close()
	stderrW.Close()
	if err != nil {
		writeError(w, startError(err, cmd.prog, s.CommandCgroup))
		return
	}
	log := s.log.With("pid", pid, "program", cmd.prog)
	log.Debug("agent exec started", "dir", cmd.dir, "env", cmd.envKeys, "timeout", cmd.timeout)

	w.Header().Set("Content-Type", contentTypeStream)
	w.Header().Set("Trailer", trailerResult)
	w.WriteHeader(http.StatusOK)
	out := &muxWriter{w: w, rc: http.NewResponseController(w)}
	out.flush()

	var copies sync.WaitGroup
	copies.Go(func() { procio.Drain(stdoutR, &frameWriter{out: out, stream: stdcopy.Stdout}) })
	copies.Go(func() { procio.Drain(stderrR, &frameWriter{out: out, stream: stdcopy.Stderr}) })
	var stdinDone sync.WaitGroup
	stdinDone.Go(func() {
		// Errors are expected (EPIPE when the command does not read it
		// all, a closed body once it ended) and mean nothing more.
		_, _ = io.Copy(stdinW, stdin)
		stdinW.Close()
	})

	var timeout <-chan time.Time
	if cmd.timeout > 0 {
		t := time.NewTimer(cmd.timeout)
		defer t.Stop()
		timeout = t.C
	}
	var (
		ws                unix.WaitStatus
		timedOut, aborted bool
	)
	select {
	case ws = <-exited:
	case <-timeout:
		timedOut = true
	case <-ctx.Done():
		aborted = true
	}
	if timedOut || aborted {
		select {
		case ws = <-exited: // it ended on its own at the same moment
			timedOut, aborted = false, false
		default:
			if err := s.reaper.killGroup(pid); err != nil {
				log.Warn("agent exec: killing the process group failed", "err", err)
			}
			ws = <-exited
		}
	}
	// The reaper killed what was left of the group before reaping the
	// leader. End the stdin copy: at its next write, or now if it waits
	// for the caller's next bytes.
	stdinW.Close()
	body.Close()
	stdinDone.Wait()

	// Drain the output up to EOF, but bounded: only a process that escaped
	// the group can still hold a pipe open now, and it must not hold the
	// command's result hostage.
	drained := make(chan struct{})
	go func() {
		copies.Wait()
		close(drained)
	}()
	grace := time.NewTimer(s.drainGrace)
	select {
	case <-drained:
	case <-grace.C:
		log.Debug("agent exec: a process that left the group holds the output open; closing it")
	}
	grace.Stop()
	stdoutR.Close()
	stderrR.Close()
	<-drained

	res := execResult{ExitCode: -1, TimedOut: timedOut, Aborted: aborted}
	switch {
	case timedOut || aborted:
	case ws.Exited():
		res.ExitCode = ws.ExitStatus()
	case ws.Signaled():
		res.Signal = unix.SignalName(ws.Signal())
		if ws.Signal() == unix.SIGKILL && oomKnown {
			if after, ok := readOOMKills(s.oomPath); ok && after > oomBefore {
				res.OOMKilled = true
			}
		}
	}
	if b, err := json.Marshal(res); err == nil {
		w.Header().Set(trailerResult, string(b))
	}
	if err := out.failed(); err != nil {
		log.Debug("agent exec: the caller stopped reading the output", "err", err)
	}
	log.Debug("agent exec ended", "exit_code", res.ExitCode, "signal", res.Signal,
		"timed_out", timedOut, "aborted", aborted, "oom_killed", res.OOMKilled, "duration", time.Since(start))
}

// openCgroup opens the cgroup v2 directory dir for clone3's
// CLONE_INTO_CGROUP, and refuses anything else: a plain directory would
// only fail later, with an errno that names nothing.
func openCgroup(dir string) (int, error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, errdefs.New(errdefs.ErrFailedPrecondition, fmt.Sprintf("Commands' cgroup %s cannot be opened: %v", dir, err))
	}
	var st unix.Statfs_t
	if err := unix.Fstatfs(fd, &st); err != nil || st.Type != unix.CGROUP2_SUPER_MAGIC {
		unix.Close(fd)
		return -1, errdefs.New(errdefs.ErrFailedPrecondition, "Commands' cgroup is not a cgroup v2 directory: "+dir)
	}
	return fd, nil
}

// startError is procio.StartError, except for the errors with which
// clone3 refuses the cgroup (one with processes and child controllers
// enabled, a removed one): those name the cgroup, not the program.
func startError(err error, prog, cgroup string) error {
	if cgroup != "" && (errors.Is(err, unix.EBUSY) || errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EBADF) || errors.Is(err, unix.ENODEV)) {
		return errdefs.New(errdefs.ErrFailedPrecondition, fmt.Sprintf("Command %s cannot start in the cgroup %s: %v", prog, cgroup, err))
	}
	return procio.StartError(err, prog)
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
