// Package client is the Go client of hutch's HTTP API (internal/api). The
// zero value talks to nothing; set Socket (the daemon's unix socket) or
// BaseURL and Token (TCP). The CLI uses it when a daemon answers.
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
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hutchsandbox/hutch/internal/api"
	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/supervise"
)

// Client talks to one daemon.
type Client struct {
	// Socket is the daemon's unix socket; used when BaseURL is empty.
	Socket string
	// BaseURL is a TCP daemon's address, e.g. http://127.0.0.1:7878.
	BaseURL string
	// Token is sent as a bearer token (required on TCP).
	Token string
	// Transport replaces the HTTP transport, primarily for tests.
	Transport http.RoundTripper

	once sync.Once
	hc   *http.Client
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

// Answers reports whether a daemon answers within timeout.
func (c *Client) Answers(ctx context.Context, timeout time.Duration) (api.Health, bool) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	h, err := c.Health(ctx)
	return h, err == nil
}

// Health asks the daemon how it is.
func (c *Client) Health(ctx context.Context) (api.Health, error) {
	var h api.Health
	err := c.call(ctx, "GET", "/v1/health", nil, &h)
	return h, err
}

// Version asks the daemon what it was built from (GET /v1/version).
func (c *Client) Version(ctx context.Context) (api.Version, error) {
	var v api.Version
	err := c.call(ctx, "GET", "/v1/version", nil, &v)
	return v, err
}

// Call sends a JSON request and decodes a JSON answer; an error answer
// becomes an error of its class with the daemon's text.
func (c *Client) Call(ctx context.Context, path string, in, out any) error {
	return c.call(ctx, "POST", path, in, out)
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

// do sends req with the token and turns an error answer into an error of
// its class with the daemon's text.
func (c *Client) do(ctx context.Context, req *http.Request) (*http.Response, error) {
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	resp, err := c.http().Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, errdefs.New(errdefs.ErrUnavailable, fmt.Sprintf("The hutch daemon did not answer: %v", err))
	}
	if resp.StatusCode >= 300 {
		defer func() { _ = resp.Body.Close() }()
		var eb api.ErrorBody
		if json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&eb) != nil || eb.Error == "" {
			return nil, fmt.Errorf("hutch daemon answered %s", resp.Status)
		}
		return nil, api.ClassError(eb)
	}
	return resp, nil
}

// Exec runs a command through the daemon, writing its streams as they
// come, and returns the result. When ctx ends first the daemon aborts
// the command (its process group is killed) and ctx's error is returned.
// A writer that fails is given nothing more, as in every mode, and the
// command runs on; its error is returned with the result.
func (c *Client) Exec(ctx context.Context, req api.ExecRequest, stdout, stderr io.Writer) (api.ExecResult, error) {
	resp, err := c.send(ctx, "POST", "/v1/exec", req)
	if err != nil {
		return api.ExecResult{}, err
	}
	defer func() { _ = resp.Body.Close() }()
	outLatch, errLatch := supervise.NewLatch(stdout), supervise.NewLatch(stderr)
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	for sc.Scan() {
		var f api.Frame
		if err := json.Unmarshal(sc.Bytes(), &f); err != nil {
			return api.ExecResult{}, fmt.Errorf("bad exec frame: %w", err)
		}
		switch {
		case f.Result != nil:
			return *f.Result, outputError(outLatch, errLatch)
		case f.Error != nil:
			return api.ExecResult{}, api.ClassError(*f.Error)
		// A Latch reports every write done and keeps the first error.
		case f.Stream == "stdout":
			_, _ = outLatch.Write(f.Data)
		case f.Stream == "stderr":
			_, _ = errLatch.Write(f.Data)
		}
	}
	if ctx.Err() != nil {
		return api.ExecResult{}, ctx.Err()
	}
	if err := sc.Err(); err != nil {
		return api.ExecResult{}, errdefs.New(errdefs.ErrUnavailable, fmt.Sprintf("The hutch daemon went away mid-command: %v", err))
	}
	return api.ExecResult{}, errors.New("the hutch daemon ended the answer without a result")
}

// outputError is the first error of the writer of stdout, else of stderr.
func outputError(stdout, stderr *supervise.Latch) error {
	if err := stdout.Err(); err != nil {
		return fmt.Errorf("writing the command's standard output: %w", err)
	}
	if err := stderr.Err(); err != nil {
		return fmt.Errorf("writing the command's standard error: %w", err)
	}
	return nil
}

// Get sends a GET and decodes a JSON answer.
func (c *Client) Get(ctx context.Context, path string, out any) error {
	return c.call(ctx, "GET", path, nil, out)
}

// GetTo sends a GET and copies the answer's body, undecoded, to w as it
// comes, returning how many bytes it copied.
func (c *Client) GetTo(ctx context.Context, path string, w io.Writer) (int64, error) {
	resp, err := c.send(ctx, "GET", path, nil)
	if err != nil {
		return 0, err
	}
	defer func() { _ = resp.Body.Close() }()
	return io.Copy(w, resp.Body)
}

// StatFile describes path (relative to the conversation's office, or
// absolute in its runtime).
func (c *Client) StatFile(ctx context.Context, conv api.Conversation, path string) (sandbox.FileInfo, error) {
	var fi sandbox.FileInfo
	err := c.Call(ctx, "/v1/files/stat", api.FileRequest{Conversation: conv, Path: path}, &fi)
	return fi, err
}

// ListFiles lists the directory path (the office when "").
func (c *Client) ListFiles(ctx context.Context, conv api.Conversation, path string) ([]sandbox.FileInfo, error) {
	var list []sandbox.FileInfo
	err := c.Call(ctx, "/v1/files/list", api.FileRequest{Conversation: conv, Path: path}, &list)
	return list, err
}

// ReadFile copies the file path of the conversation's runtime into w,
// its bytes unchanged. A read the daemon could not finish is an error
// even when part of the file already reached w.
func (c *Client) ReadFile(ctx context.Context, conv api.Conversation, path string, w io.Writer) error {
	resp, err := c.send(ctx, "POST", "/v1/files/read", api.FileRequest{Conversation: conv, Path: path})
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
	if t := resp.Trailer.Get(api.TrailerError); t != "" {
		var eb api.ErrorBody
		if err := json.Unmarshal([]byte(t), &eb); err != nil || eb.Error == "" {
			return errdefs.New(errdefs.ErrUnavailable, "The hutch daemon cut the file short: "+t)
		}
		return api.ClassError(eb)
	}
	return nil
}

// WriteFile replaces the file path of the conversation's runtime with
// what r yields, streamed (missing parents are made; mode 0 keeps an
// existing file's mode).
func (c *Client) WriteFile(ctx context.Context, conv api.Conversation, path string, r io.Reader, mode os.FileMode) (api.WriteAnswer, error) {
	q := url.Values{"platform": {conv.Platform}, "conversationId": {conv.ConversationID}, "path": {path}}
	if conv.User != "" {
		q.Set("user", conv.User)
	}
	if mode != 0 {
		q.Set("mode", "0"+strconv.FormatUint(uint64(mode.Perm()), 8))
	}
	req, err := http.NewRequestWithContext(ctx, "POST", c.url("/v1/files/write?"+q.Encode()), r)
	if err != nil {
		return api.WriteAnswer{}, err
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	var wa api.WriteAnswer
	resp, err := c.do(ctx, req)
	if err != nil {
		return wa, err
	}
	defer func() { _ = resp.Body.Close() }()
	if err := json.NewDecoder(resp.Body).Decode(&wa); err != nil {
		return wa, fmt.Errorf("decode /v1/files/write answer: %w", err)
	}
	return wa, nil
}
