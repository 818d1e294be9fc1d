package api

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"strconv"

	"github.com/hutchsandbox/hutch/client"
	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/tools"
)

// fileSandbox decodes a FileRequest and returns the conversation's
// sandbox and the path resolved against its office and roots.
func (s *Server) fileSandbox(r *http.Request, defaultPath string) (tools.Sandbox, string, error) {
	var req FileRequest
	if err := decode(r, &req); err != nil {
		return nil, "", err
	}
	return s.resolveFile(r, req.Conversation, req.Path, defaultPath)
}

func (s *Server) resolveFile(r *http.Request, c Conversation, p, defaultPath string) (tools.Sandbox, string, error) {
	addr, err := addressOf(r.Context(), c)
	if err != nil {
		return nil, "", err
	}
	if p == "" {
		p = defaultPath
	}
	sb, err := s.Service.ToolSandbox(r.Context(), addr, s.Mode, c.User)
	if err != nil {
		return nil, "", err
	}
	abs, err := tools.Resolve(sb, p)
	if err != nil {
		return nil, "", err
	}
	return sb, abs, nil
}

func (s *Server) statFile(w http.ResponseWriter, r *http.Request) error {
	sb, abs, err := s.fileSandbox(r, "")
	if err != nil {
		return err
	}
	fi, err := sb.Stat(r.Context(), abs)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, client.FileInfo(fi))
	return nil
}

func (s *Server) listFiles(w http.ResponseWriter, r *http.Request) error {
	sb, abs, err := s.fileSandbox(r, ".")
	if err != nil {
		return err
	}
	list, err := sb.List(r.Context(), abs)
	if err != nil {
		return err
	}
	out := make([]client.FileInfo, len(list))
	for i, fi := range list {
		out[i] = client.FileInfo(fi)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// readFile answers a regular file's bytes, unchanged, as
// application/octet-stream. An error before the first byte is an error
// response; one after is the Hutch-Error trailer, and the body is short.
func (s *Server) readFile(w http.ResponseWriter, r *http.Request) error {
	sb, abs, err := s.fileSandbox(r, "")
	if err != nil {
		return err
	}
	fi, err := sb.Stat(r.Context(), abs)
	if err != nil {
		return err
	}
	if fi.IsDir {
		return errdefs.New(errdefs.ErrInvalid, "Path is a directory: "+abs)
	}
	bw := &bodyWriter{w: w}
	err = sb.ReadFile(r.Context(), abs, bw)
	switch {
	case err != nil && !bw.started:
		return err
	case err != nil:
		b, _ := json.Marshal(ErrorBody{Error: err.Error(), Code: errdefs.Code(err)})
		w.Header().Set(TrailerError, string(b))
		s.log().Warn("file read cut short", "path", abs, "bytes", bw.n, "error", err)
	default:
		bw.start()
	}
	return nil
}

// bodyWriter starts a file's response at its first byte, so that an
// error before it can still be an error response.
type bodyWriter struct {
	w       http.ResponseWriter
	started bool
	n       int64
}

func (b *bodyWriter) start() {
	if b.started {
		return
	}
	b.started = true
	b.w.Header().Set("Content-Type", "application/octet-stream")
	b.w.Header().Set("Trailer", TrailerError)
	b.w.WriteHeader(http.StatusOK)
}

func (b *bodyWriter) Write(p []byte) (int, error) {
	b.start()
	n, err := b.w.Write(p)
	b.n += int64(n)
	return n, err
}

// writeFile replaces a file with the request body, streamed to the
// runtime: the conversation and the path are query parameters (platform,
// conversationId, user, path; mode, octal, optional), since the body is
// the file's bytes.
func (s *Server) writeFile(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	for k := range q {
		switch k {
		case "platform", "conversationId", "user", "path", "mode":
		default:
			return errdefs.New(errdefs.ErrInvalid, "Unknown query parameter "+strconv.Quote(k)+" (platform, conversationId, user, path, mode)")
		}
	}
	var mode os.FileMode
	if m := q.Get("mode"); m != "" {
		n, err := strconv.ParseUint(m, 8, 32)
		if err != nil || n > 0o777 {
			return errdefs.New(errdefs.ErrInvalid, "File mode is not valid: "+m+" (want octal permission bits such as 0644)")
		}
		mode = os.FileMode(n)
	}
	if q.Get("path") == "" {
		return errdefs.New(errdefs.ErrInvalid, "Give the file's path as the query parameter path")
	}
	c := Conversation{Platform: q.Get("platform"), ConversationID: q.Get("conversationId"), User: q.Get("user")}
	sb, abs, err := s.resolveFile(r, c, q.Get("path"), "")
	if err != nil {
		return err
	}
	body := &countingReader{r: r.Body}
	if err := sb.WriteFile(r.Context(), abs, body, mode); err != nil {
		// A body over the limit is the caller's to fix, whatever the
		// runtime made of the short read.
		var mbe *http.MaxBytesError
		if errors.As(body.err, &mbe) {
			return mbe
		}
		var stalled *bodyStalledError
		if errors.As(body.err, &stalled) {
			return stalled
		}
		return err
	}
	writeJSON(w, http.StatusOK, WriteAnswer{Path: abs, Bytes: body.n})
	return nil
}

// countingReader counts what it read and keeps its reader's error.
type countingReader struct {
	r   io.Reader
	n   int64
	err error
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	if err != nil && err != io.EOF {
		c.err = err
	}
	return n, err
}
