package sandbox

import (
	"context"
	"encoding/json"
	"io"
	"io/fs"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/hutchsandbox/hutch/internal/errdefs"
)

// FileInfo describes one path in a runtime. Name and Link are bytes, as
// Linux names are; see MarshalJSON for how they travel.
type FileInfo struct {
	Name    string
	Size    int64
	Mode    fs.FileMode
	ModTime time.Time
	IsDir   bool
	// Link is the target of a symlink ("" otherwise).
	Link string
}

// fileInfoJSON is FileInfo on the wire (the agent protocol and the API).
type fileInfoJSON struct {
	Name      string      `json:"name"`
	NameBytes []byte      `json:"nameBytes,omitempty"`
	Size      int64       `json:"size"`
	Mode      fs.FileMode `json:"mode"`
	ModTime   time.Time   `json:"modTime"`
	IsDir     bool        `json:"isDir"`
	Link      string      `json:"link,omitempty"`
	LinkBytes []byte      `json:"linkBytes,omitempty"`
}

// MarshalJSON writes name and link as strings, and, when one is not valid
// UTF-8 (which a JSON string cannot carry: it would arrive with
// replacement characters, naming another file), also its exact bytes in
// base64 as nameBytes or linkBytes.
func (fi FileInfo) MarshalJSON() ([]byte, error) {
	w := fileInfoJSON{Name: fi.Name, Size: fi.Size, Mode: fi.Mode, ModTime: fi.ModTime, IsDir: fi.IsDir, Link: fi.Link}
	if !utf8.ValidString(fi.Name) {
		w.NameBytes = []byte(fi.Name)
	}
	if !utf8.ValidString(fi.Link) {
		w.LinkBytes = []byte(fi.Link)
	}
	return json.Marshal(w)
}

// UnmarshalJSON reads what MarshalJSON writes; the bytes win over the
// strings when both are there.
func (fi *FileInfo) UnmarshalJSON(b []byte) error {
	var w fileInfoJSON
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*fi = FileInfo{Name: w.Name, Size: w.Size, Mode: w.Mode, ModTime: w.ModTime, IsDir: w.IsDir, Link: w.Link}
	if w.NameBytes != nil {
		fi.Name = string(w.NameBytes)
	}
	if w.LinkBytes != nil {
		fi.Link = string(w.LinkBytes)
	}
	return nil
}

// Files is one conversation's file access in its runtime: what the read,
// write and edit tools, the API's file endpoints and `hutch cp` use. Every
// mode returns one from Runtime.Files, so file operations reach the same
// filesystem as the conversation's commands, whatever the mode.
//
// Paths are absolute and clean as the runtime sees them (the tools
// resolve relative paths against Office first). Every operation refuses,
// with class errdefs.ErrFailedPrecondition and the text "Path <p> is
// outside the sandbox's workspace", a path that resolves, symlinks
// included, outside Roots; a path that is not absolute and clean, or that
// holds "..", is refused with class errdefs.ErrInvalid. A missing path is
// errdefs.ErrNotFound ("File not found: <p>"); a runtime that cannot be
// reached is errdefs.ErrUnavailable.
type Files interface {
	// Office is the office as the runtime sees it; relative paths and
	// commands start here.
	Office() string
	// Roots are the directories (and single files) the projection mounts:
	// the only places a file operation may reach.
	Roots() []string
	// Stat describes what a path resolves to; when the path itself is a
	// symlink, Link holds its target.
	Stat(ctx context.Context, path string) (FileInfo, error)
	// ReadFile streams a regular file's bytes, unchanged, to w. When w
	// fails the read stops and w's error is returned.
	ReadFile(ctx context.Context, path string, w io.Writer) error
	// WriteFile replaces a file with what r yields, creating missing
	// parent directories under a root. The write is atomic (staged and
	// renamed) where the target allows; a file mounted on its own (a
	// single-file bind mount) cannot be renamed over and is written in
	// place. A failing r leaves the old content whole. Mode 0 keeps an
	// existing file's mode (0644 for a new one). A symlink at path is
	// replaced, not followed.
	WriteFile(ctx context.Context, path string, r io.Reader, mode fs.FileMode) error
	// List returns a directory's entries sorted by name, symlinks not
	// followed.
	List(ctx context.Context, path string) ([]FileInfo, error)
}

// Roots returns the runtime paths of the spec's mounts: the roots a
// mode's Files confines file operations to.
func (s Spec) Roots() []string {
	roots := make([]string, 0, len(s.Mounts))
	for _, m := range s.Mounts {
		roots = append(roots, m.RuntimePath)
	}
	return roots
}

// Confined are file operations that take their roots with each call, as
// the agent's client and the bridge's file commands do. Without roots
// they confine nothing, which is why Files never calls them without.
type Confined interface {
	ReadFileWithin(ctx context.Context, path string, roots []string, w io.Writer) error
	WriteFileWithin(ctx context.Context, path string, roots []string, r io.Reader, mode fs.FileMode) error
	Stat(ctx context.Context, path string, roots []string) (FileInfo, error)
	List(ctx context.Context, path string, roots []string) ([]FileInfo, error)
}

// ConfinedFiles returns the Files of the operations connect returns, bound
// to office and roots. connect runs before every operation: it is where a
// mode creates or starts the runtime and dials its agent, and it should be
// cheap once the runtime is up. With no roots every operation is refused
// as outside, never run unconfined.
func ConfinedFiles(connect func(ctx context.Context) (Confined, error), office string, roots []string) Files {
	return &confinedFiles{connect: connect, office: office, roots: slices.Clone(roots)}
}

type confinedFiles struct {
	connect func(ctx context.Context) (Confined, error)
	office  string
	roots   []string
}

// OutsideRefusal is the refusal of a path that leads out of the roots, in
// the words every mode uses.
func OutsideRefusal(path string) error {
	return errdefs.New(errdefs.ErrFailedPrecondition, "Path "+path+" is outside the sandbox's workspace")
}

func (f *confinedFiles) Office() string  { return f.office }
func (f *confinedFiles) Roots() []string { return slices.Clone(f.roots) }

func (f *confinedFiles) ops(ctx context.Context, p string) (Confined, error) {
	if len(f.roots) == 0 {
		return nil, OutsideRefusal(p)
	}
	return f.connect(ctx)
}

func (f *confinedFiles) Stat(ctx context.Context, p string) (FileInfo, error) {
	c, err := f.ops(ctx, p)
	if err != nil {
		return FileInfo{}, err
	}
	return c.Stat(ctx, p, f.roots)
}

func (f *confinedFiles) ReadFile(ctx context.Context, p string, w io.Writer) error {
	c, err := f.ops(ctx, p)
	if err != nil {
		return err
	}
	return c.ReadFileWithin(ctx, p, f.roots, w)
}

func (f *confinedFiles) WriteFile(ctx context.Context, p string, r io.Reader, mode fs.FileMode) error {
	c, err := f.ops(ctx, p)
	if err != nil {
		return err
	}
	return c.WriteFileWithin(ctx, p, f.roots, r, mode)
}

func (f *confinedFiles) List(ctx context.Context, p string) ([]FileInfo, error) {
	c, err := f.ops(ctx, p)
	if err != nil {
		return nil, err
	}
	return c.List(ctx, p, f.roots)
}
