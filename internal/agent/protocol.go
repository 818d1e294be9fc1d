package agent

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"path"
	"slices"
	"strings"

	"github.com/hutchsandbox/hutch/internal/errdefs"
)

// The wire protocol: HTTP/2 cleartext over one connection, versioned by
// path. Everything the daemon and the agent exchange is defined here.
const (
	pathPing = "/v1/ping"
	pathExec = "/v1/exec"
	// pathFile reads (GET) and writes (PUT) a file: ?path=...&mode=...
	pathFile = "/v1/file"
	// pathStat describes a path as a JSON FileInfo: ?path=...
	pathStat = "/v1/stat"
	// pathList lists a directory as a JSON array of FileInfo: ?path=...
	pathList = "/v1/list"

	// paramRoot, repeated, confines a file operation (pathFile, pathStat,
	// pathList) to the roots it names (see confine.go); none: unconfined.
	paramRoot = "root"

	// trailerResult carries an exec's execResult as JSON once the output
	// has ended.
	trailerResult = "Hutch-Result"
	// trailerError carries an errorBody when a file read fails after its
	// bytes have started to flow.
	trailerError = "Hutch-Error"

	// contentTypeStream is the exec response body: stdout and stderr
	// multiplexed with stdcopy, the framing Docker's attach streams use.
	contentTypeStream = "application/vnd.docker.multiplexed-stream"
	contentTypeJSON   = "application/json"
)

// The egress relay (see egress.go): the host opens a stream per
// connection a command makes to the agent's egress address.
const (
	// pathEgress is one relay stream: POST, answered once a connection
	// to the egress address is waiting for it. The request body is what
	// the host sends that connection, raw; its end is a half-close.
	pathEgress = "/v1/egress"
	// headerEgressPeer names the waiting connection's own address
	// (127.0.0.1:PORT), for the host's logs.
	headerEgressPeer = "Hutch-Egress-Peer"
	// contentTypeEgress is the relay's response body: what the
	// connection sent, in frames of a 4-byte big-endian length and that
	// many bytes, at most egressFrameMax. A frame of length 0 says the
	// connection finished sending (its half-close). The response itself
	// cannot say it: an HTTP/2 server that ends its response while the
	// request still flows resets the stream, and with it the other
	// direction.
	contentTypeEgress = "application/vnd.hutch.egress-frames"
	egressFrameMax    = 32 << 10
)

// Info is what an agent says about itself.
type Info struct {
	// Version is the agent binary's version.
	Version string `json:"version"`
	// PID is the agent's process id as its sandbox sees it (1 when it is
	// the sandbox's init).
	PID int `json:"pid"`
	// Init reports whether the agent does pid-1 duties (reaps every
	// orphan, kills every command on SIGTERM).
	Init bool `json:"init"`
}

// execRequest is the JSON object that opens a POST /v1/exec body; the
// command's stdin follows it.
type execRequest struct {
	Argv []string `json:"argv"`
	// ArgvBytes carries argv when an argument is not valid UTF-8, which
	// JSON strings cannot hold (they would arrive with U+FFFD in place of
	// the bytes): base64 per argument. When set it wins over Argv.
	ArgvBytes [][]byte          `json:"argvBytes,omitempty"`
	Dir       string            `json:"dir,omitempty"`
	Env       map[string]string `json:"env,omitempty"`
	TimeoutMs int64             `json:"timeoutMs,omitempty"`
}

// execResult is the Hutch-Result trailer of an exec.
type execResult struct {
	ExitCode  int    `json:"exitCode"`
	Signal    string `json:"signal,omitempty"`
	TimedOut  bool   `json:"timedOut,omitempty"`
	Aborted   bool   `json:"aborted,omitempty"`
	OOMKilled bool   `json:"oomKilled,omitempty"`
}

// errorBody is the JSON body of every non-2xx response.
type errorBody struct {
	Class   string `json:"class"`
	Message string `json:"message"`
}

// encodeError turns err into its wire form and status.
func encodeError(err error) (errorBody, int) {
	return errorBody{Class: errdefs.Code(err), Message: err.Error()}, errdefs.HTTPStatus(err)
}

// decodeError turns a wire error back into an error of the same class
// with the same text.
func (b errorBody) decodeError() error { return errdefs.FromCode(b.Class, b.Message) }

// writeError sends err as a JSON error response.
func writeError(w http.ResponseWriter, err error) {
	body, status := encodeError(err)
	w.Header().Set("Content-Type", contentTypeJSON)
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

// The guest endpoints, served only by an agent that is a microVM's init
// (Server.Guest set); any other agent answers them 404.
const (
	// pathGuestSetup applies a JSON GuestSetup; 204 when done.
	pathGuestSetup = "/v1/guest/setup"
	// pathGuestPowerOff kills every command and powers the VM off once
	// the 204 has been sent.
	pathGuestPowerOff = "/v1/guest/poweroff"

	// maxGuestSetupBody bounds a setup request: the files it carries are
	// credentials and small configuration, not workspace content.
	maxGuestSetupBody = 64 << 20
)

// GuestSetup is what the daemon asks of a microVM's guest once it is
// connected, and again after every reconnect: the same request applied
// twice leaves the guest as it was after the first (volatile tmpfs and
// mounts already there are kept, files are projected again, limits are
// set again).
type GuestSetup struct {
	// Withdraw names the files an earlier setup of the same root disk
	// projected and this one does not: each is removed first (a bind
	// mount on it undone), unless its path now passes through a symlink
	// or a non-directory or is a directory, which hutch did not put
	// there. The daemon keeps the list; the guest's disk is never asked.
	Withdraw []string `json:"withdraw,omitempty"`
	// Volatile are directories that get a fresh tmpfs of their own
	// before the mounts: what lands there (mount points, files, what a
	// command writes beside them) lives in the VM's memory and is gone
	// when it stops. A tmpfs of this kind already there is kept.
	Volatile []string `json:"volatile,omitempty"`
	// Mounts are virtiofs shares to mount, in order (a parent before a
	// mount inside it).
	Mounts []GuestMount `json:"mounts,omitempty"`
	// Files are projected after the mounts, so they may land inside one.
	Files []GuestFile `json:"files,omitempty"`
	// Pids > 0 is the commands' pids.max; 0 leaves it as it is.
	Pids int64 `json:"pids,omitempty"`
	// MemoryBytes > 0 is the commands' memory.max (the daemon computes it
	// as the VM's memory minus a reserve for the kernel and the agent), and
	// turns their swap off; 0 leaves both as they are.
	MemoryBytes int64 `json:"memoryBytes,omitempty"`
	// TimeZone, e.g. "Europe/Berlin", is set as TZ in every command's env
	// unless the exec request sets TZ itself; "" leaves it as it is.
	TimeZone string `json:"timeZone,omitempty"`
	// Network configures the VM's network card; nil leaves it as it is.
	Network *GuestNetwork `json:"network,omitempty"`
}

// GuestNetwork gives the guest's network card (its one card besides lo)
// an address, and the commands a proxy: QEMU's user-mode network of a
// hutch VM reaches nothing but the host's proxy.
type GuestNetwork struct {
	// Address is the card's IPv4 address and prefix, e.g. "10.0.2.15/24".
	Address string `json:"address"`
	// Proxy, e.g. "http://10.0.2.100:3128", is set as HTTP_PROXY,
	// HTTPS_PROXY, http_proxy and https_proxy (NO_PROXY and no_proxy:
	// loopback) in every command's env, unless the exec request sets them.
	Proxy string `json:"proxy,omitempty"`
}

// GuestMount mounts the virtiofs share Tag at Target (created 0755 when
// missing), always nosuid and nodev.
type GuestMount struct {
	Tag      string `json:"tag"`
	Target   string `json:"target"`
	ReadOnly bool   `json:"readOnly,omitempty"`
}

// GuestFile is one file the guest projects: its content is held in the
// VM's memory (a tmpfs file owned by root) and bind-mounted onto Path,
// where an empty file stands on the root disk (parents created 0755), so
// no byte of it reaches the disk. Its Data may be a credential: it is
// never logged.
type GuestFile struct {
	Path string `json:"path"`
	// Mode is the file's permission bits (nothing else); 0 means 0644.
	Mode uint32 `json:"mode,omitempty"`
	Data []byte `json:"data"`
	// ReadOnly bind-mounts the file read-only onto itself, so that even
	// root inside the guest cannot change it: commands have no
	// CAP_SYS_ADMIN to undo the mount.
	ReadOnly bool `json:"readOnly,omitempty"`
}

// maxTagLen is the longest virtiofs tag (the virtio-fs device's tag
// field is 36 bytes).
const maxTagLen = 36

// Validate checks a setup without touching anything: every path is
// absolute and clean (no "..", no "//", not "/"), no target or file path
// is named twice, tags and the time zone are plain names and the limits
// are not negative. Its errors are of class ErrInvalid.
func (g GuestSetup) Validate() error {
	invalid := func(format string, args ...any) error {
		return errdefs.New(errdefs.ErrInvalid, fmt.Sprintf(format, args...))
	}
	targets := make(map[string]bool, len(g.Mounts))
	for _, m := range g.Mounts {
		if m.Tag == "" || len(m.Tag) > maxTagLen || strings.ContainsAny(m.Tag, "\x00,/ \t\n") {
			return invalid("Guest mount tag %q is not valid (1 to %d bytes, no slash, comma or space)", m.Tag, maxTagLen)
		}
		if err := guestPath("Guest mount target", m.Target); err != nil {
			return err
		}
		if targets[m.Target] {
			return invalid("Guest mount target %s is named twice", m.Target)
		}
		targets[m.Target] = true
	}
	for _, p := range g.Withdraw {
		if err := guestPath("Guest withdrawn path", p); err != nil {
			return err
		}
	}
	volatile := make(map[string]bool, len(g.Volatile))
	for _, d := range g.Volatile {
		if err := guestPath("Guest volatile directory", d); err != nil {
			return err
		}
		if volatile[d] {
			return invalid("Guest volatile directory %s is named twice", d)
		}
		volatile[d] = true
	}
	paths := make(map[string]bool, len(g.Files))
	for _, f := range g.Files {
		if err := guestPath("Guest file path", f.Path); err != nil {
			return err
		}
		if paths[f.Path] {
			return invalid("Guest file %s is named twice", f.Path)
		}
		paths[f.Path] = true
		if f.Mode&^0o777 != 0 {
			return invalid("Guest file %s: mode %#o has more than permission bits", f.Path, f.Mode)
		}
	}
	if g.Pids < 0 {
		return invalid("Guest pids limit must not be negative: %d", g.Pids)
	}
	if g.MemoryBytes < 0 {
		return invalid("Guest memory limit must not be negative: %d", g.MemoryBytes)
	}
	if g.TimeZone != "" && !validTimeZone(g.TimeZone) {
		return invalid("Time zone %q is not a zone name like Europe/Berlin", g.TimeZone)
	}
	if n := g.Network; n != nil {
		if p, err := netip.ParsePrefix(n.Address); err != nil || !p.Addr().Is4() || p.Bits() == 0 {
			return invalid("Guest network address %q is not an IPv4 address with a prefix like 10.0.2.15/24", n.Address)
		}
		if n.Proxy != "" {
			u, err := url.Parse(n.Proxy)
			if err != nil || u.Scheme != "http" || u.Port() == "" || u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
				return invalid("Guest proxy %q is not a URL like http://10.0.2.100:3128 (http, a port, no credentials, no path)", n.Proxy)
			}
		}
	}
	return nil
}

// guestPath checks that p is absolute, clean and not the root.
func guestPath(what, p string) error {
	switch {
	case !path.IsAbs(p):
		return errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("%s must be absolute: %q", what, p))
	case strings.ContainsRune(p, 0):
		return errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("%s contains a NUL byte: %q", what, p))
	case path.Clean(p) != p || slices.Contains(strings.Split(p, "/"), ".."):
		return errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("%s must be clean (no .., . or //): %q", what, p))
	case p == "/":
		return errdefs.New(errdefs.ErrInvalid, what+" must not be /")
	}
	return nil
}

// validTimeZone accepts tz database names ("UTC", "Europe/Berlin",
// "Etc/GMT+5", "America/Port-au-Prince"): relative, no "..", nothing a
// shell or the TZ parser would read as something else.
func validTimeZone(tz string) bool {
	if len(tz) > 64 || strings.HasPrefix(tz, "/") || strings.HasSuffix(tz, "/") {
		return false
	}
	for _, part := range strings.Split(tz, "/") {
		if part == "" || part == "." || part == ".." {
			return false
		}
	}
	for _, r := range tz {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		case r == '/', r == '_', r == '+', r == '-':
		default:
			return false
		}
	}
	return true
}
