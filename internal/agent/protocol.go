package agent

import (
	"encoding/json"
	"errors"
	"net/http"

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

// classes maps errdefs classes to their wire names and HTTP statuses.
var classes = []struct {
	err    error
	name   string
	status int
}{
	{errdefs.ErrInvalid, "invalid", http.StatusBadRequest},
	{errdefs.ErrNotFound, "not_found", http.StatusNotFound},
	{errdefs.ErrConflict, "conflict", http.StatusConflict},
	{errdefs.ErrFailedPrecondition, "failed_precondition", http.StatusPreconditionFailed},
	{errdefs.ErrNotSupported, "not_supported", http.StatusNotImplemented},
	{errdefs.ErrUnavailable, "unavailable", http.StatusServiceUnavailable},
}

// classInternal names an error of no class.
const classInternal = "internal"

// encodeError turns err into its wire form and status.
func encodeError(err error) (errorBody, int) {
	for _, c := range classes {
		if errors.Is(err, c.err) {
			return errorBody{Class: c.name, Message: err.Error()}, c.status
		}
	}
	return errorBody{Class: classInternal, Message: err.Error()}, http.StatusInternalServerError
}

// decodeError turns a wire error back into an error of the same class
// with the same text.
func (b errorBody) decodeError() error {
	for _, c := range classes {
		if b.Class == c.name {
			return errdefs.New(c.err, b.Message)
		}
	}
	return errors.New(b.Message)
}

// writeError sends err as a JSON error response.
func writeError(w http.ResponseWriter, err error) {
	body, status := encodeError(err)
	w.Header().Set("Content-Type", contentTypeJSON)
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}
