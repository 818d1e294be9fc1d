package mcpserver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// MaxFrameDepth is how deeply a message read on stdio may nest. MCP's
// messages nest a few levels and hutch's tools take flat arguments; a
// bound well under the SDK's own (1000) keeps every frame that reaches
// the SDK one it can decode.
const MaxFrameDepth = 128

// StdioTransport is the transport of `hutch mcp`: newline-delimited
// JSON-RPC messages on Reader and Writer, as mcp.IOTransport, except
// that a line that is not one JSON-RPC message does not end the
// connection. The SDK's transport returns an error for such a line,
// which ends the session and with it the process; the SDK offers no
// option to keep serving. Here the line is answered as JSON-RPC 2.0
// says, with a parse error (-32700: not JSON, longer than MaxLineLength,
// nested deeper than MaxFrameDepth) or an invalid request (-32600: a
// batch, which MCP no longer has, a wrong "jsonrpc", an id that is not
// a string or a number, no method), with the request's id when it has a
// valid one and null otherwise, and the next line is read.
//
// Neither Reader nor Writer is closed: they are the process's streams.
type StdioTransport struct {
	Reader io.Reader
	Writer io.Writer
	// MaxLineLength bounds one line in bytes; 0 means
	// mcp.DefaultMaxLineLength (16 MiB). A longer line is discarded as
	// it is read, never held whole.
	MaxLineLength int
	// Log, when set, is told of every line answered with an error (its
	// code and the error's text, never the line).
	Log *slog.Logger
}

// Connect implements mcp.Transport.
func (t *StdioTransport) Connect(context.Context) (mcp.Connection, error) {
	limit := t.MaxLineLength
	if limit <= 0 {
		limit = mcp.DefaultMaxLineLength
	}
	log := t.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &stdioConn{w: t.Writer, log: log, incoming: make(chan readResult), closed: make(chan struct{})}
	// Reads happen in a goroutine so that Close unblocks a Read waiting
	// for input, as the Connection contract asks; like the SDK's own
	// transport, the goroutine stays blocked in a read of stdin that never
	// returns, which only the process's end releases.
	go c.readLoop(bufio.NewReaderSize(t.Reader, 64<<10), limit)
	return c, nil
}

type readResult struct {
	msg jsonrpc.Message
	err error
}

type stdioConn struct {
	w   io.Writer
	wmu sync.Mutex
	log *slog.Logger

	incoming  chan readResult
	closed    chan struct{}
	closeOnce sync.Once
}

func (c *stdioConn) readLoop(r *bufio.Reader, limit int) {
	for {
		line, tooLong, err := readLine(r, limit)
		if tooLong {
			c.reject(frameError{code: jsonrpc.CodeParseError, text: fmt.Sprintf("Parse error: the line is longer than %d bytes, the most hutch reads as one message", limit)})
		} else if line = bytes.Trim(line, " \t\r\n"); len(line) > 0 {
			msg, ferr := decodeFrame(line)
			if ferr != nil {
				c.reject(*ferr)
			} else if !c.deliver(readResult{msg: msg}) {
				return
			}
		}
		if err != nil {
			c.deliver(readResult{err: err})
			return
		}
	}
}

// readLine reads up to and including the next newline, or to the end of
// input. Past limit bytes it stops keeping what it reads and reports the
// line as too long once the newline comes.
func readLine(r *bufio.Reader, limit int) (line []byte, tooLong bool, err error) {
	for {
		chunk, err := r.ReadSlice('\n')
		switch {
		case tooLong:
		case len(line)+len(bytes.TrimRight(chunk, "\r\n")) > limit:
			tooLong, line = true, nil
		default:
			line = append(line, chunk...)
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return line, tooLong, err
		}
	}
}

// deliver hands a read to Read; false when the connection was closed.
func (c *stdioConn) deliver(r readResult) bool {
	select {
	case c.incoming <- r:
		return true
	case <-c.closed:
		return false
	}
}

// reject answers a line that is not a message.
func (c *stdioConn) reject(e frameError) {
	select {
	case <-c.closed:
		return
	default:
	}
	if e.quiet {
		c.log.Warn("dropped a malformed response", "error", e.text)
		return
	}
	c.log.Warn("answered a malformed message", "code", e.code, "error", e.text)
	id := e.id
	if id == nil {
		id = json.RawMessage("null")
	}
	data, err := json.Marshal(errorResponse{JSONRPC: "2.0", ID: id, Error: errorObject{Code: e.code, Message: e.text}})
	if err != nil {
		return // not reached: every part is plain JSON
	}
	_ = c.write(append(data, '\n'))
}

func (c *stdioConn) write(data []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_, err := c.w.Write(data)
	return err
}

// Read implements mcp.Connection.
func (c *stdioConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-c.closed:
		return nil, io.EOF
	case r := <-c.incoming:
		return r.msg, r.err
	}
}

// Write implements mcp.Connection: one message, one line, one write.
func (c *stdioConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	data, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return fmt.Errorf("encode message: %w", err)
	}
	return c.write(append(data, '\n'))
}

// Close implements mcp.Connection.
func (c *stdioConn) Close() error {
	c.closeOnce.Do(func() { close(c.closed) })
	return nil
}

// SessionID implements mcp.Connection: stdio has no session id.
func (c *stdioConn) SessionID() string { return "" }

// errorResponse is a JSON-RPC error response.
type errorResponse struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Error   errorObject     `json:"error"`
}

type errorObject struct {
	Code    int64  `json:"code"`
	Message string `json:"message"`
}

// frameError is the answer to a line that is not a message: id is the
// request's id when it has a valid one, else nil (null). A quiet one is
// only logged: it was a response, and answering a response could start
// an endless exchange of errors with a peer as forgiving as this one.
type frameError struct {
	code  int64
	text  string
	id    json.RawMessage
	quiet bool
}

// decodeFrame turns one line into a message, or says why it is none. It
// checks what the SDK's decoder would fail on, so that the SDK never
// sees a frame it cannot take.
func decodeFrame(line []byte) (jsonrpc.Message, *frameError) {
	parseError := func(text string) *frameError {
		return &frameError{code: jsonrpc.CodeParseError, text: "Parse error: " + text}
	}
	invalid := func(text string, id json.RawMessage) *frameError {
		return &frameError{code: jsonrpc.CodeInvalidRequest, text: "Invalid Request: " + text, id: id}
	}
	if depth(line) > MaxFrameDepth {
		return nil, parseError(fmt.Sprintf("the message nests deeper than %d levels", MaxFrameDepth))
	}
	var raw json.RawMessage
	if err := json.Unmarshal(line, &raw); err != nil {
		return nil, parseError(err.Error())
	}
	switch line[0] {
	case '{':
	case '[':
		return nil, invalid("batches are not supported; send one message per line", nil)
	default:
		return nil, invalid("a message is a JSON object", nil)
	}
	// Members by their exact names: encoding/json would match struct
	// fields regardless of case, the SDK's decoder does not.
	var members map[string]json.RawMessage
	if err := json.Unmarshal(line, &members); err != nil {
		return nil, invalid(err.Error(), nil)
	}
	method, hasMethod := members["method"]
	id, hasID := members["id"]
	_, hasResult := members["result"]
	_, hasError := members["error"]
	if !hasMethod && (hasResult || hasError) {
		invalid = func(text string, _ json.RawMessage) *frameError {
			return &frameError{code: jsonrpc.CodeInvalidRequest, text: "Invalid response: " + text, quiet: true}
		}
	}
	validID := hasID && (id[0] == '"' || id[0] == '-' || (id[0] >= '0' && id[0] <= '9'))
	var echo json.RawMessage
	if hasMethod && validID {
		// Only a request's id is echoed: a malformed response's id is one
		// of the client's own requests, which an error must not answer.
		echo = id
	}
	if v, ok := members["jsonrpc"]; !ok || string(v) != `"2.0"` {
		return nil, invalid(`"jsonrpc" must be "2.0"`, echo)
	}
	if hasID && !validID {
		return nil, invalid(`"id" must be a string or a number`, nil)
	}
	if hasMethod && method[0] != '"' {
		return nil, invalid(`"method" must be a string`, echo)
	}
	if !hasMethod && !hasID {
		return nil, invalid(`a request needs a "method", a response an "id"`, nil)
	}
	msg, err := jsonrpc.DecodeMessage(line)
	if err != nil {
		return nil, invalid(err.Error(), echo)
	}
	return msg, nil
}

// depth is how deeply data's arrays and objects nest; it stops counting
// once past MaxFrameDepth. Brackets inside strings do not count.
func depth(data []byte) int {
	d, maxd, inString, escaped := 0, 0, false, false
	for _, b := range data {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case b == '\\':
				escaped = true
			case b == '"':
				inString = false
			}
		case b == '"':
			inString = true
		case b == '{' || b == '[':
			if d++; d > maxd {
				if maxd = d; maxd > MaxFrameDepth {
					return maxd
				}
			}
		case b == '}' || b == ']':
			d--
		}
	}
	return maxd
}
