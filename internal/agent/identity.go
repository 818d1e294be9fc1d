package agent

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"

	"golang.org/x/sys/unix"
)

// pathIdentity answers which file a path is, by device and inode, without
// following a link: ?path=... The host compares it with what it checked
// before the engine mounted a bind source (see package beneath).
const pathIdentity = "/v1/identity"

// Identity is a file's device and inode numbers.
type Identity struct {
	Dev uint64 `json:"dev"`
	Ino uint64 `json:"ino"`
}

func (s *Server) handleIdentity(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Query().Get("path")
	if err := CheckPath(p); err != nil {
		writeError(w, err)
		return
	}
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		writeError(w, fileError("stat", p, err))
		return
	}
	w.Header().Set("Content-Type", contentTypeJSON)
	_ = json.NewEncoder(w).Encode(Identity{Dev: st.Dev, Ino: st.Ino})
}

// Identity returns which file path is in the agent's sandbox, by device
// and inode, not following a link.
func (c *Client) Identity(ctx context.Context, path string) (Identity, error) {
	var id Identity
	err := c.getJSON(ctx, pathIdentity, url.Values{"path": {path}}, maxErrorBody, &id)
	return id, err
}
