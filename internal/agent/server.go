package agent

import (
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"

	"github.com/hutchsandbox/hutch/internal/errdefs"
)

// defaultDrainGrace bounds how long an exec waits, once the command's
// process group is dead, for its output pipes to reach EOF. Only a process
// that left the group (setsid) can still hold them open by then.
const defaultDrainGrace = 2 * time.Second

// maxConcurrentStreams is how many requests (commands, file operations)
// one connection may carry at once; more wait for a free slot.
const maxConcurrentStreams = 1000

// Flow control of what the host sends. A stream whose handler stops
// reading (a command that reads neither its stdin nor an egress
// connection) holds up to uploadBufferPerStream of the connection's
// window until it reads again; with a connection window of the same size
// (the default), one such stream would stall every upload of the
// connection: other commands' stdin, file writes, every egress stream.
// The connection's window leaves room for every egress stream to stall
// and as much again for the rest. Memory is used only by what stalls.
const (
	uploadBufferPerStream = 1 << 20
	uploadBufferPerConn   = 2 * maxEgressStreams * uploadBufferPerStream
)

// Server serves the agent protocol. Set its fields before the first
// ServeConn or Serve and leave them alone after; it is then safe for
// concurrent use by any number of connections.
type Server struct {
	// Log receives what the agent does; nil discards. It never receives
	// env values or arguments beyond the program name.
	Log *slog.Logger
	// Version is what ping reports.
	Version string
	// Init is what ping reports: the agent does pid-1 duties. Run sets it.
	Init bool
	// OOMCounterPath is the cgroup file whose "oom_kill N" line counts the
	// sandbox's OOM kills; empty detects cgroup v2 then v1.
	OOMCounterPath string
	// Guest, when set, serves the /v1/guest endpoints with it: the agent
	// is a microVM's init. Without it they answer 404.
	Guest GuestOps
	// CommandCgroup, when set, is a cgroup v2 directory every command is
	// started in (clone3 CLONE_INTO_CGROUP, so not even its first
	// instruction runs outside it). A command cannot start when the
	// directory cannot be used.
	CommandCgroup string
	// Key, when set, is the channel key this agent proves it holds when
	// the host asks (GET /v1/hello; see channel.go).
	Key []byte
	// Egress, when set, is the egress relay's listener (see egress.go):
	// every connection accepted on it waits for a relay stream the host
	// opens (POST /v1/egress), and every command's env points HTTP_PROXY,
	// HTTPS_PROXY, http_proxy and https_proxy at its address (NO_PROXY
	// and no_proxy at loopback). The relay accepts from the first Serve,
	// ServeConn or ServeConns on, until its owner closes it, which also
	// closes the connections still waiting. Without it, POST /v1/egress
	// answers 404.
	Egress net.Listener
	// EgressCA is the egress proxy's CA certificate file, and
	// EgressCABundle a trust bundle holding it and the system's roots
	// (see writeEgressCABundle). When set, every command's env names the
	// bundle in SSL_CERT_FILE, REQUESTS_CA_BUNDLE, CURL_CA_BUNDLE and
	// GIT_SSL_CAINFO, and the CA file in NODE_EXTRA_CA_CERTS.
	EgressCA       string
	EgressCABundle string

	// usageDir, when set, is the cgroup whose use is read (tests).
	usageDir string
	// egressWait, when set, replaces egressWaitLimit (tests).
	egressWait time.Duration
	egress     *egressRelay      // set when Egress is
	egressEnv  map[string]string // the env the egress fields add
	once       sync.Once
	log        *slog.Logger
	h2         *http2.Server
	mux        *http.ServeMux
	reaper     *reaper
	oomPath    string
	drainGrace time.Duration
	timeZone   atomic.Pointer[string] // set by a guest setup
	proxy      atomic.Pointer[string] // set by a guest setup
	powerOff   sync.Once
}

func (s *Server) init() {
	s.once.Do(func() {
		s.log = s.Log
		if s.log == nil {
			s.log = slog.New(slog.DiscardHandler)
		}
		s.h2 = &http2.Server{
			MaxConcurrentStreams:         maxConcurrentStreams,
			MaxUploadBufferPerStream:     uploadBufferPerStream,
			MaxUploadBufferPerConnection: uploadBufferPerConn,
		}
		s.reaper = processReaper()
		s.oomPath = s.OOMCounterPath
		if s.oomPath == "" {
			s.oomPath = detectOOMCounter()
		}
		if s.drainGrace == 0 {
			s.drainGrace = defaultDrainGrace
		}
		s.mux = http.NewServeMux()
		s.mux.HandleFunc("GET "+pathPing, s.handlePing)
		s.mux.HandleFunc("GET "+pathHello, s.handleHello)
		s.mux.HandleFunc("POST "+pathExec, s.handleExec)
		s.mux.HandleFunc("GET "+pathFile, s.handleReadFile)
		s.mux.HandleFunc("PUT "+pathFile, s.handleWriteFile)
		s.mux.HandleFunc("GET "+pathStat, s.handleStat)
		s.mux.HandleFunc("GET "+pathIdentity, s.handleIdentity)
		s.mux.HandleFunc("GET "+pathList, s.handleList)
		s.mux.HandleFunc("GET "+pathUsage, s.handleUsage)
		s.mux.HandleFunc("POST "+pathGuestSetup, s.handleGuestSetup)
		s.mux.HandleFunc("POST "+pathGuestPowerOff, s.handleGuestPowerOff)
		s.mux.HandleFunc("POST "+pathEgress, s.handleEgress)
		addr := ""
		if s.Egress != nil {
			addr = s.Egress.Addr().String()
			s.egress = newEgressRelay(s.Egress, s.egressWait, s.log)
			go s.egress.acceptLoop()
		}
		s.egressEnv = egressEnv(addr, s.EgressCA, s.EgressCABundle)
	})
}

// ServeConn serves one connection until it ends or ctx is cancelled, and
// returns once every request it carried has finished: a command whose
// connection went away has been killed by then.
func (s *Server) ServeConn(ctx context.Context, c net.Conn) {
	s.init()
	var reqs requests
	stop := context.AfterFunc(ctx, func() { _ = c.Close() })
	defer stop()
	s.h2.ServeConn(c, &http2.ServeConnOpts{
		Context: ctx,
		// G112: the connection is hutch's own (a socket only it can reach,
		// an exec stream, a VM's port), with no slow client to time out.
		BaseConfig: &http.Server{ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelDebug)}, //nolint:gosec // G112, see above
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !reqs.enter() {
				writeError(w, errdefs.New(errdefs.ErrUnavailable, "Agent connection is closing"))
				return
			}
			defer reqs.exit()
			s.mux.ServeHTTP(w, r)
		}),
	})
	_ = c.Close()
	reqs.closeAndWait()
}

// Serve accepts connections on l and serves each until ctx is cancelled;
// it then closes l, waits for every connection's requests to finish and
// returns nil. Any other accept error is returned.
func (s *Server) Serve(ctx context.Context, l net.Listener) error {
	s.init()
	stop := context.AfterFunc(ctx, func() { _ = l.Close() })
	defer stop()
	var conns sync.WaitGroup
	defer conns.Wait()
	for {
		c, err := l.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		s.log.Debug("agent: connection accepted")
		conns.Go(func() { s.ServeConn(ctx, c) })
	}
}

// ServeConns serves the connections next returns, one after the other:
// each one to its end (its commands killed), then the next. It suits a
// channel that carries one connection at a time and is reopened for the
// next, such as a microVM's virtio port. It returns nil once ctx is
// cancelled, or next's error.
func (s *Server) ServeConns(ctx context.Context, next func(context.Context) (net.Conn, error)) error {
	s.init()
	for {
		c, err := next(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		s.log.Info("agent: connection opened")
		s.ServeConn(ctx, c)
		s.log.Info("agent: connection ended")
		if ctx.Err() != nil {
			return nil
		}
	}
}

func (s *Server) handlePing(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", contentTypeJSON)
	_ = json.NewEncoder(w).Encode(Info{Version: s.Version, PID: os.Getpid(), Init: s.Init})
}

// requests counts the requests of one connection in flight, so that the
// connection's end can wait for them.
type requests struct {
	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
}

func (r *requests) enter() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return false
	}
	r.wg.Add(1)
	return true
}

func (r *requests) exit() { r.wg.Done() }

func (r *requests) closeAndWait() {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	r.wg.Wait()
}
