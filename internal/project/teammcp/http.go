package teammcp

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/hutchsandbox/hutch/internal/lazyregexp"
)

// Files of `hutch project mcp`.
const (
	// TokenName is the project's bearer token, in
	// <state-dir>/projects/<container name>/.
	TokenName = "mcp-token"
	// ConfigName is the MCP client config, in the project's relay
	// directory (/sandbox/relay inside the container).
	ConfigName = "hutch.mcp.json"
)

// MaxBody bounds a request's body: the SDK's default, set on its
// handlers and kept by Handler's own read.
const MaxBody = mcp.DefaultMaxRequestBodyBytes

// Handler serves the servers newServer returns over streamable HTTP,
// stateless and answering in JSON: a client POSTs one JSON-RPC message
// (a tools/call needs no initialize first) and reads one JSON answer, so
// a shell script with busybox wget is a client. A call that asks for
// progress (params._meta.progressToken, which such a script does not
// send) is answered as an event stream instead, so that the progress of
// a long bash command reaches the client before its result. newServer
// may return the same server every time.
//
// Every request must carry "Authorization: Bearer <token>"; any other is
// answered 401 with a JSON body {"error": ..., "code": "unauthorized"}
// before the MCP layer sees it. An empty token admits nobody.
func Handler(newServer func(*http.Request) *mcp.Server, token string) http.Handler {
	answers := mcp.NewStreamableHTTPHandler(newServer, &mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true, PropagateRequestCancellation: true, MaxRequestBodyBytes: MaxBody})
	streams := mcp.NewStreamableHTTPHandler(newServer, &mcp.StreamableHTTPOptions{Stateless: true, PropagateRequestCancellation: true, MaxRequestBodyBytes: MaxBody})
	want := []byte(token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || len(want) == 0 || subtle.ConstantTimeCompare([]byte(got), want) != 1 {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("WWW-Authenticate", `Bearer realm="hutch project mcp"`)
			w.WriteHeader(http.StatusUnauthorized)
			enc := json.NewEncoder(w)
			enc.SetEscapeHTML(false)
			_ = enc.Encode(errorBody{
				Error: "Missing or wrong bearer token: use the Authorization header of " + ConfigName + " (in /sandbox/relay inside the sandbox)",
				Code:  "unauthorized",
			})
			return
		}
		// Without a session, a client's notifications/cancelled comes in
		// a request of its own that finds no call to cancel, and the SDK
		// ties a handler to its request only for clients of the newest
		// protocol. A client that gives up on a call closes the call's
		// request; the handler learns of it through its context's value
		// (withRequest), so the command stops with it.
		r = r.WithContext(context.WithValue(r.Context(), requestKey{}, r.Context()))
		if r.Method == http.MethodPost {
			// Read here, to look for a progress token, so bounded here as
			// the SDK is told to bound it: the token is the agents', and
			// an agent must not make hutch hold a body of any size.
			body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBody))
			if err != nil {
				var mbe *http.MaxBytesError
				if errors.As(err, &mbe) {
					http.Error(w, fmt.Sprintf("request body exceeds %d bytes", mbe.Limit), http.StatusRequestEntityTooLarge)
					return
				}
				http.Error(w, "reading the request: "+err.Error(), http.StatusBadRequest)
				return
			}
			r.Body = &readOnce{b: body}
			if asksProgress(body) {
				streams.ServeHTTP(w, r)
				return
			}
		}
		answers.ServeHTTP(w, r)
	})
}

// requestKey is the context value holding the context of the HTTP
// request a call came in.
type requestKey struct{}

// withRequest returns ctx, cancelled also when the HTTP request the call
// came in ends (the client gave up, or went away), and its cancel.
func withRequest(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	if rc, ok := ctx.Value(requestKey{}).(context.Context); ok {
		stop := context.AfterFunc(rc, cancel)
		return ctx, func() { stop(); cancel() }
	}
	return ctx, cancel
}

// readOnce hands its bytes out once and lets go of them at the end, so
// that a body read to look into is not held again for as long as its
// call runs (the SDK keeps what it decoded).
type readOnce struct{ b []byte }

func (r *readOnce) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		r.b = nil
		return 0, io.EOF
	}
	n := copy(p, r.b)
	r.b = r.b[n:]
	if len(r.b) == 0 {
		r.b = nil
	}
	return n, nil
}

func (r *readOnce) Close() error { r.b = nil; return nil }

// asksProgress reports whether body is a JSON-RPC request that carries a
// progress token.
func asksProgress(body []byte) bool {
	if !bytes.Contains(body, []byte(`"progressToken"`)) {
		return false
	}
	var msg struct {
		Params struct {
			Meta struct {
				ProgressToken any `json:"progressToken"`
			} `json:"_meta"`
		} `json:"params"`
	}
	return json.Unmarshal(body, &msg) == nil && msg.Params.Meta.ProgressToken != nil
}

// errorBody is the body of a refused request, as hutch's HTTP API has it.
type errorBody struct {
	Error string `json:"error"`
	Code  string `json:"code"`
}

// ClientConfig is the MCP client config naming the server at url with
// its token: {"mcpServers": {"hutch": {"type": "http", "url": ...,
// "headers": {"Authorization": "Bearer ..."}}}}, indented, ending in a
// newline.
func ClientConfig(url, token string) []byte {
	type server struct {
		Type    string            `json:"type"`
		URL     string            `json:"url"`
		Headers map[string]string `json:"headers"`
	}
	cfg := struct {
		MCPServers map[string]server `json:"mcpServers"`
	}{map[string]server{"hutch": {Type: "http", URL: url, Headers: map[string]string{"Authorization": "Bearer " + token}}}}
	data, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		panic(err) // not reached: strings and maps of strings always marshal
	}
	return append(data, '\n')
}

var tokenForm = lazyregexp.New(`^[0-9a-f]{64}$`)

// LoadOrMakeToken returns the token kept at path, making it the first
// time: 32 random bytes in hex, in a file of mode 0600. The file is made
// with a hard link from a complete temporary file, so two processes making
// it at once agree on one token, and a reader never sees half of one. A
// file that holds no token is replaced.
func LoadOrMakeToken(path string) (string, error) {
	switch tok, err := readToken(path); {
	case err == nil:
		return tok, nil
	case !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, errNoToken):
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", err
	}
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	tok := hex.EncodeToString(b)
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return "", err
	}
	defer func() { _ = os.Remove(tmp.Name()) }() // a no-op once renamed
	if err := tmp.Chmod(0o600); err != nil {
		_ = tmp.Close()
		return "", err
	}
	if _, err := tmp.WriteString(tok + "\n"); err != nil {
		_ = tmp.Close()
		return "", err
	}
	if err := tmp.Sync(); err != nil {
		_ = tmp.Close()
		return "", err
	}
	if err := tmp.Close(); err != nil {
		return "", err
	}
	switch err := os.Link(tmp.Name(), path); {
	case err == nil:
		return tok, nil
	case errors.Is(err, fs.ErrExist):
		// Another process made it first, or it holds no token.
		if tok, err := readToken(path); !errors.Is(err, errNoToken) {
			return tok, err
		}
		if err := os.Rename(tmp.Name(), path); err != nil {
			return "", err
		}
		return tok, nil
	default:
		return "", err
	}
}

var errNoToken = errors.New("no token")

// readToken reads the token at path: errNoToken when the file holds none.
func readToken(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	tok := strings.TrimSpace(string(data))
	if !tokenForm.MatchString(tok) {
		return "", fmt.Errorf("%s: %w", path, errNoToken)
	}
	return tok, nil
}
