package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// SocketName is the name of the daemon's unix socket in its state dir.
const SocketName = "hutch.sock"

// Client talks to one daemon. The zero value talks to nothing: set
// Socket (the daemon's unix socket, no token needed: the socket is the
// state dir owner's), or BaseURL and Token (TCP), or use Local or Remote.
// A Client is safe for concurrent use; its fields must not change after
// the first call.
type Client struct {
	// Socket is the daemon's unix socket; used when BaseURL is empty.
	Socket string
	// BaseURL is a TCP daemon's address, e.g. http://127.0.0.1:7878.
	BaseURL string
	// Token is sent as a bearer token (required on TCP).
	Token string
	// Transport replaces the HTTP transport (a TLS configuration, a
	// test's); nil dials Socket, or uses http.DefaultTransport's settings
	// for BaseURL.
	Transport http.RoundTripper
	// Surface and Who, when set, name where the calls come from in the
	// daemon's event log (HeaderSurface, HeaderWho): hutch's own
	// commands send the surface "cli" and the user who ran them. The
	// daemon takes the claim on its unix socket only. Other clients
	// leave them empty and are the surface "api".
	Surface, Who string

	once sync.Once
	hc   *http.Client
}

// Local returns a client of the daemon of the state dir stateDir, on its
// unix socket; "" is the state dir hutch itself uses by default:
// $HUTCH_STATE_DIR, else ~/.hutch.
func Local(stateDir string) *Client {
	if stateDir == "" {
		stateDir = DefaultStateDir()
	}
	return &Client{Socket: filepath.Join(stateDir, SocketName)}
}

// DefaultStateDir is $HUTCH_STATE_DIR, else ~/.hutch ("" when neither
// is known).
func DefaultStateDir() string {
	if d := os.Getenv("HUTCH_STATE_DIR"); d != "" {
		return d
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return ""
	}
	return filepath.Join(home, ".hutch")
}

// Remote returns a client of the daemon serving HTTP at baseURL (e.g.
// http://127.0.0.1:7878, or https:// behind TLS) with the bearer token
// token.
func Remote(baseURL, token string) *Client {
	return &Client{BaseURL: baseURL, Token: token}
}

func (c *Client) http() *http.Client {
	c.once.Do(func() {
		tr := c.Transport
		if tr == nil && c.BaseURL == "" {
			sock := c.Socket
			tr = &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "unix", sock)
			}}
		}
		c.hc = &http.Client{Transport: tr}
	})
	return c.hc
}

func (c *Client) url(path string) string {
	if c.BaseURL != "" {
		return strings.TrimSuffix(c.BaseURL, "/") + path
	}
	return "http://hutch" + path
}

// ErrNoAnswer is wrapped by the error of a call the daemon did not
// answer, or stopped answering part way (as opposed to an *Error, which
// the daemon answered): no daemon listens, the connection broke.
var ErrNoAnswer = errors.New("the hutch daemon did not answer")

// noAnswerMessage begins the error of a call the daemon did not answer,
// as users read it.
const noAnswerMessage = "The hutch daemon did not answer"

// noAnswer is an error of ErrNoAnswer with what went wrong.
type noAnswer struct {
	msg string
	err error
}

func (e *noAnswer) Error() string   { return e.msg + ": " + e.err.Error() }
func (e *noAnswer) Unwrap() []error { return []error{ErrNoAnswer, e.err} }

// Answers reports whether a daemon answers GET /v1/health within
// timeout, and its answer.
func (c *Client) Answers(ctx context.Context, timeout time.Duration) (Health, bool) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	h, err := c.Health(ctx)
	return h, err == nil
}

// Health asks the daemon how it is (GET /v1/health).
func (c *Client) Health(ctx context.Context) (Health, error) {
	var h Health
	err := c.Get(ctx, "/v1/health", &h)
	return h, err
}

// Version asks the daemon what it was built from (GET /v1/version).
func (c *Client) Version(ctx context.Context) (Version, error) {
	var v Version
	err := c.Get(ctx, "/v1/version", &v)
	return v, err
}

// Call POSTs in as JSON to path (e.g. /v1/policy) and decodes the JSON
// answer into out (nil: the answer is dropped). It reaches any route,
// for what the typed methods do not cover.
func (c *Client) Call(ctx context.Context, path string, in, out any) error {
	return c.call(ctx, "POST", path, in, out)
}

// Get sends a GET to path and decodes the JSON answer into out.
func (c *Client) Get(ctx context.Context, path string, out any) error {
	return c.call(ctx, "GET", path, nil, out)
}

// GetTo sends a GET to path and copies the answer's body, undecoded, to
// w as it comes, returning how many bytes it copied.
func (c *Client) GetTo(ctx context.Context, path string, w io.Writer) (int64, error) {
	resp, err := c.send(ctx, "GET", path, nil)
	if err != nil {
		return 0, err
	}
	defer func() { _ = resp.Body.Close() }()
	n, err := io.Copy(w, resp.Body)
	if err != nil && ctx.Err() != nil {
		return n, ctx.Err()
	}
	return n, err
}

func (c *Client) call(ctx context.Context, method, path string, in, out any) error {
	resp, err := c.send(ctx, method, path, in)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if out == nil {
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("decode %s answer: %w", path, err)
	}
	return nil
}

func (c *Client) send(ctx context.Context, method, path string, in any) (*http.Response, error) {
	var body io.Reader
	if in != nil {
		data, err := json.Marshal(in)
		if err != nil {
			return nil, err
		}
		body = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.url(path), body)
	if err != nil {
		return nil, err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return c.do(ctx, req)
}

// do sends req with the token and turns an error answer into an *Error.
func (c *Client) do(ctx context.Context, req *http.Request) (*http.Response, error) {
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	if c.Surface != "" {
		req.Header.Set(HeaderSurface, c.Surface)
		if c.Who != "" {
			req.Header.Set(HeaderWho, c.Who)
		}
	}
	resp, err := c.http().Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &noAnswer{msg: noAnswerMessage, err: err}
	}
	if resp.StatusCode >= 300 {
		defer func() { _ = resp.Body.Close() }()
		var eb ErrorBody
		ok := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&eb) == nil
		return nil, errorOf(resp.StatusCode, eb, ok)
	}
	return resp, nil
}

// MaxStdin is the most Exec reads from its stdin: the whole of it goes
// in the request, which the daemon bounds (8 MiB by default, JSON
// included).
const MaxStdin = 4 << 20

// Exec runs a command in the conversation's runtime (POST /v1/exec),
// writing its standard output and error to stdout and stderr as they
// come (nil drops them), and returns how it ended: a command that ran
// and failed is a result with its exit code, not an error.
//
// stdin, when not nil, is read to its end first (up to MaxStdin bytes,
// valid UTF-8: the API carries it as text) and fed to the command; give
// it or req.Stdin, not both.
//
// When ctx ends first the daemon aborts the command (its process group
// is killed) and ctx's error is returned. A writer that fails is given
// nothing more and the command runs on; its error is returned with the
// result.
func (c *Client) Exec(ctx context.Context, req ExecRequest, stdin io.Reader, stdout, stderr io.Writer) (ExecResult, error) {
	if stdin != nil {
		if req.Stdin != "" {
			return ExecResult{}, errors.New("give stdin or ExecRequest.Stdin, not both")
		}
		data, err := io.ReadAll(io.LimitReader(stdin, MaxStdin+1))
		if err != nil {
			return ExecResult{}, fmt.Errorf("reading stdin: %w", err)
		}
		if len(data) > MaxStdin {
			return ExecResult{}, fmt.Errorf("stdin is larger than %d bytes, the most one exec takes", MaxStdin)
		}
		if !utf8.Valid(data) {
			return ExecResult{}, errors.New("stdin is not valid UTF-8, which the API cannot carry: write the bytes to a file (WriteFile) and redirect from it")
		}
		req.Stdin = string(data)
	}
	resp, err := c.send(ctx, "POST", "/v1/exec", req)
	if err != nil {
		return ExecResult{}, err
	}
	defer func() { _ = resp.Body.Close() }()
	out, errOut := &latch{w: stdout}, &latch{w: stderr}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	for sc.Scan() {
		var f Frame
		if err := json.Unmarshal(sc.Bytes(), &f); err != nil {
			return ExecResult{}, fmt.Errorf("bad exec frame: %w", err)
		}
		switch {
		case f.Result != nil:
			return *f.Result, outputError(out, errOut)
		case f.Error != nil:
			return ExecResult{}, errorOf(resp.StatusCode, *f.Error, true)
		case f.Stream == "stdout":
			out.write(f.Data)
		case f.Stream == "stderr":
			errOut.write(f.Data)
		}
	}
	if ctx.Err() != nil {
		return ExecResult{}, ctx.Err()
	}
	if err := sc.Err(); err != nil {
		return ExecResult{}, &noAnswer{msg: "The hutch daemon went away mid-command", err: err}
	}
	return ExecResult{}, &noAnswer{msg: "The hutch daemon went away mid-command", err: io.ErrUnexpectedEOF}
}

// latch writes to w until a write fails, then keeps the error and drops
// the rest.
type latch struct {
	w   io.Writer
	err error
}

func (l *latch) write(p []byte) {
	if l.w == nil || l.err != nil {
		return
	}
	if _, err := l.w.Write(p); err != nil {
		l.err = err
	}
}

// outputError is the first error of the writer of stdout, else of stderr.
func outputError(stdout, stderr *latch) error {
	if stdout.err != nil {
		return fmt.Errorf("writing the command's standard output: %w", stdout.err)
	}
	if stderr.err != nil {
		return fmt.Errorf("writing the command's standard error: %w", stderr.err)
	}
	return nil
}

// StatFile describes path (relative to the conversation's office, or
// absolute in its runtime); a symlink is described, not followed.
func (c *Client) StatFile(ctx context.Context, conv Conversation, path string) (FileInfo, error) {
	var fi FileInfo
	err := c.Call(ctx, "/v1/files/stat", FileRequest{Conversation: conv, Path: path}, &fi)
	return fi, err
}

// ListFiles lists the directory path (the office when ""), sorted by
// name.
func (c *Client) ListFiles(ctx context.Context, conv Conversation, path string) ([]FileInfo, error) {
	var list []FileInfo
	err := c.Call(ctx, "/v1/files/list", FileRequest{Conversation: conv, Path: path}, &list)
	return list, err
}

// ReadFile copies the file path of the conversation's runtime into w,
// its bytes unchanged, as they come. A read the daemon could not finish
// is an error even when part of the file already reached w.
func (c *Client) ReadFile(ctx context.Context, conv Conversation, path string, w io.Writer) error {
	resp, err := c.send(ctx, "POST", "/v1/files/read", FileRequest{Conversation: conv, Path: path})
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if _, err := io.Copy(w, resp.Body); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("read %s: %w", path, err)
	}
	if t := resp.Trailer.Get(TrailerError); t != "" {
		var eb ErrorBody
		ok := json.Unmarshal([]byte(t), &eb) == nil
		if !ok || eb.Error == "" {
			return &Error{StatusCode: resp.StatusCode, Code: CodeUnavailable, Message: "The hutch daemon cut the file short: " + t}
		}
		return errorOf(resp.StatusCode, eb, true)
	}
	return nil
}

// WriteFile replaces the file path of the conversation's runtime with
// what r yields, streamed (missing parents are made; the write is atomic
// where the runtime allows; mode 0 keeps an existing file's mode, 0644
// for a new one).
func (c *Client) WriteFile(ctx context.Context, conv Conversation, path string, r io.Reader, mode os.FileMode) (WriteAnswer, error) {
	q := url.Values{"platform": {conv.Platform}, "conversationId": {conv.ConversationID}, "path": {path}}
	if conv.User != "" {
		q.Set("user", conv.User)
	}
	if mode != 0 {
		q.Set("mode", "0"+strconv.FormatUint(uint64(mode.Perm()), 8))
	}
	req, err := http.NewRequestWithContext(ctx, "POST", c.url("/v1/files/write?"+q.Encode()), r)
	if err != nil {
		return WriteAnswer{}, err
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	var wa WriteAnswer
	resp, err := c.do(ctx, req)
	if err != nil {
		return wa, err
	}
	defer func() { _ = resp.Body.Close() }()
	if err := json.NewDecoder(resp.Body).Decode(&wa); err != nil {
		if ctx.Err() != nil {
			return wa, ctx.Err()
		}
		return wa, fmt.Errorf("decode /v1/files/write answer: %w", err)
	}
	return wa, nil
}

// Offices lists the registered offices (GET /v1/offices).
func (c *Client) Offices(ctx context.Context) ([]OfficeEntry, error) {
	var list []OfficeEntry
	err := c.Get(ctx, "/v1/offices", &list)
	return list, err
}

// Policy is the conversation's effective door policy and the projection
// it gives (POST /v1/policy).
func (c *Client) Policy(ctx context.Context, conv Conversation) (PolicyAnswer, error) {
	var p PolicyAnswer
	err := c.Call(ctx, "/v1/policy", ConversationRequest{Conversation: conv}, &p)
	return p, err
}

// SetDoor sets the conversation's door policy (default, isolated, shared,
// shared-private or full) and answers the policy now in effect (POST
// /v1/door). A runtime that sees another projection is re-created at its
// next command.
func (c *Client) SetDoor(ctx context.Context, conv Conversation, policy string) (PolicyAnswer, error) {
	var p PolicyAnswer
	err := c.Call(ctx, "/v1/door", DoorRequest{Conversation: &conv, Policy: policy}, &p)
	return p, err
}

// SetGlobalDoor sets the door policy of every conversation that has none
// of its own.
func (c *Client) SetGlobalDoor(ctx context.Context, policy string) error {
	return c.Call(ctx, "/v1/door", DoorRequest{Global: true, Policy: policy}, nil)
}

// SetChannelKind records the kind of channel the conversation is
// (conv.ChannelKind) and answers its policy now (POST /v1/channel-kind).
func (c *Client) SetChannelKind(ctx context.Context, conv Conversation) (PolicyAnswer, error) {
	var p PolicyAnswer
	err := c.Call(ctx, "/v1/channel-kind", ConversationRequest{Conversation: conv}, &p)
	return p, err
}

// VaultList lists the entries of the vault v names (a conversation's, a
// user's or a container's): names and kinds, never values.
func (c *Client) VaultList(ctx context.Context, v VaultRequest) ([]VaultEntry, error) {
	var list []VaultEntry
	err := c.Call(ctx, "/v1/vault/list", v, &list)
	return list, err
}

// VaultSet sets env variables in the vault v names and lists its entries
// after; values go in, never come back.
func (c *Client) VaultSet(ctx context.Context, v VaultRequest, vars map[string]string) ([]VaultEntry, error) {
	v.Vars = vars
	var list []VaultEntry
	err := c.Call(ctx, "/v1/vault/set", v, &list)
	return list, err
}

// VaultRemove removes the entry name from the vault v names and lists its
// entries after.
func (c *Client) VaultRemove(ctx context.Context, v VaultRequest, name string) ([]VaultEntry, error) {
	v.Name = name
	var list []VaultEntry
	err := c.Call(ctx, "/v1/vault/remove", v, &list)
	return list, err
}

// sandboxCall is one of /v1/sandbox/*'s calls.
func (c *Client) sandboxCall(ctx context.Context, op string, req LimitsRequest) (Status, error) {
	var st Status
	err := c.Call(ctx, "/v1/sandbox/"+op, req, &st)
	return st, err
}

// SandboxStatus is the state of the conversation's runtime, in a managed
// mode (image, gondolin, kube); other modes answer CodeNotSupported.
func (c *Client) SandboxStatus(ctx context.Context, conv Conversation) (Status, error) {
	return c.sandboxCall(ctx, "status", LimitsRequest{Conversation: conv})
}

// SandboxBoost raises the runtime's limits until it stops; what l leaves
// "" is the daemon's boost size.
func (c *Client) SandboxBoost(ctx context.Context, l LimitsRequest) (Status, error) {
	return c.sandboxCall(ctx, "boost", l)
}

// SandboxLimits sets the runtime's limits until it stops; give at least
// one of l's numbers.
func (c *Client) SandboxLimits(ctx context.Context, l LimitsRequest) (Status, error) {
	return c.sandboxCall(ctx, "limits", l)
}

// SandboxStop stops the conversation's runtime (its next command starts
// it again) and answers its state after.
func (c *Client) SandboxStop(ctx context.Context, conv Conversation) (Status, error) {
	return c.sandboxCall(ctx, "stop", LimitsRequest{Conversation: conv})
}

// SandboxRemove removes the conversation's runtime (its office stays)
// and answers its state after; no runtime is CodeNotFound.
func (c *Client) SandboxRemove(ctx context.Context, conv Conversation) (Status, error) {
	return c.sandboxCall(ctx, "remove", LimitsRequest{Conversation: conv})
}

// Runtimes lists the runtimes of the daemon's managed mode (GET
// /v1/sandbox/runtimes).
func (c *Client) Runtimes(ctx context.Context) ([]Status, error) {
	var list []Status
	err := c.Get(ctx, "/v1/sandbox/runtimes", &list)
	return list, err
}

// Chat hands the daemon a chat message a bot received in the
// conversation (e.g. "/sandbox status") and answers the text to post
// back (POST /v1/chat).
func (c *Client) Chat(ctx context.Context, conv Conversation, message string) (string, error) {
	var r ChatReply
	err := c.Call(ctx, "/v1/chat", ChatRequest{Conversation: conv, Message: message}, &r)
	return r.Text, err
}

// AdminLink asks for a one-time sign-in link to the admin portal.
func (c *Client) AdminLink(ctx context.Context, req AdminLinkRequest) (AdminLinkResponse, error) {
	var r AdminLinkResponse
	err := c.Call(ctx, "/v1/admin/link", req, &r)
	return r, err
}
