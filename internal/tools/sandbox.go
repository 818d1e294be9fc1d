package tools

import (
	"context"
	"io"
	"os"
	"time"

	"github.com/hutchsandbox/hutch/internal/sandbox"
)

// Sandbox is what the tools need of one conversation's runtime. Paths
// are absolute paths as the runtime sees them; the tools resolve
// relative paths against Office first. Implementations refuse (class
// errdefs.ErrFailedPrecondition) any path that resolves, symlinks
// included, outside Roots.
type Sandbox interface {
	// Office is the office as the runtime sees it; relative paths start here.
	Office() string
	// Roots are the directories (and files) the projection mounts: the
	// only places a file operation may reach.
	Roots() []string
	// Exec runs one command (the exec contract of internal/sandbox).
	Exec(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error)
	// ReadFile streams a file's bytes to w. Missing: errdefs.ErrNotFound.
	ReadFile(ctx context.Context, path string, w io.Writer) error
	// WriteFile replaces a file atomically, creating parent directories;
	// mode 0 keeps an existing file's mode (0644 for a new one).
	WriteFile(ctx context.Context, path string, r io.Reader, mode os.FileMode) error
	// Stat describes a path. Missing: errdefs.ErrNotFound.
	Stat(ctx context.Context, path string) (FileInfo, error)
	// List returns a directory's entries sorted by name.
	List(ctx context.Context, path string) ([]FileInfo, error)
}

// FileInfo describes one path in a runtime.
type FileInfo struct {
	Name    string      `json:"name"`
	Size    int64       `json:"size"`
	Mode    os.FileMode `json:"mode"`
	ModTime time.Time   `json:"modTime"`
	IsDir   bool        `json:"isDir"`
	// Link is the target of a symlink ("" otherwise).
	Link string `json:"link,omitempty"`
}
