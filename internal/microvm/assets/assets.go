// Package assets describes and checks the files a microVM guest boots from
// (kernel, root filesystem, agent, ...). An asset directory holds those
// files and a manifest.json that lists each one with its size and SHA-256.
// The builder records the manifest once, after placing the files; hutch
// verifies every asset against it before every boot, and refuses a missing,
// partial, replaced or tampered asset with its path and the mismatch.
//
// The manifest guards against damage: an interrupted build or copy, a disk
// error, an edit by hand or by another program. It is not a signature; whoever
// can rewrite both an asset and manifest.json in the directory can forge a
// matching pair, so the directory must only be writable by the user running
// hutch.
//
// Validation of a manifest (Manifest.Validate) is pure. Load, Write, Verify,
// Describe and Record do the file I/O; hashing streams through a fixed-size
// buffer, so a multi-gigabyte root filesystem is never read into memory.
package assets

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/hutchsandbox/hutch/internal/atomicfile"
	"github.com/hutchsandbox/hutch/internal/errdefs"
)

// ManifestName is the file name of the manifest inside an asset directory.
const ManifestName = "manifest.json"

// Version is the only manifest version this package reads and writes.
const Version = 1

// rebuildHint ends every refusal that a fresh build fixes.
const rebuildHint = "rebuild with hutch microvm image build"

// Manifest lists the assets of one guest build.
type Manifest struct {
	// Version is the manifest format version; it must equal Version.
	Version int `json:"version"`
	// Created is when the build finished.
	Created time.Time `json:"created"`
	// Source says what the guest was built from, e.g. a Docker image
	// reference and its id ("hutch-sandbox:latest sha256:...").
	Source string `json:"source"`
	// Assets are the files of the guest, each named once.
	Assets []Asset `json:"assets"`
}

// Asset is one file of the guest.
type Asset struct {
	// Name is the role of the file: "kernel", "rootfs", "agent", ...
	Name string `json:"name"`
	// Path is slash-separated and relative to the asset directory; it may
	// not be absolute or leave the directory.
	Path string `json:"path"`
	// Size is the file's length in bytes.
	Size int64 `json:"size"`
	// SHA256 is the lowercase hex SHA-256 of the file's content.
	SHA256 string `json:"sha256"`
}

// Asset returns the asset called name, if the manifest lists it.
func (m Manifest) Asset(name string) (Asset, bool) {
	for _, a := range m.Assets {
		if a.Name == name {
			return a, true
		}
	}
	return Asset{}, false
}

// Validate checks the manifest's shape without touching the disk: a known
// version, every field present, unique names and paths, and paths that stay
// inside the asset directory. Errors are of class errdefs.ErrInvalid and
// describe the first problem found.
func (m Manifest) Validate() error {
	if p := m.problem(); p != "" {
		return errdefs.New(errdefs.ErrInvalid, p)
	}
	return nil
}

// problem returns a description of the first thing wrong with m, or "".
func (m Manifest) problem() string {
	switch {
	case m.Version == 0:
		return "version is missing"
	case m.Version != Version:
		return fmt.Sprintf("version %d is unknown (this hutch reads version %d)", m.Version, Version)
	case m.Created.IsZero():
		return "created is missing"
	case m.Source == "":
		return "source is missing"
	case len(m.Assets) == 0:
		return "assets is empty"
	}
	if p := layoutProblem(m.Assets); p != "" {
		return p
	}
	for _, a := range m.Assets {
		if a.Size < 0 {
			return fmt.Sprintf("asset %q: size %d is negative", a.Name, a.Size)
		}
		if a.SHA256 == "" {
			return fmt.Sprintf("asset %q: sha256 is missing", a.Name)
		}
		if !isHexSHA256(a.SHA256) {
			return fmt.Sprintf("asset %q: sha256 %q is not 64 lowercase hex digits", a.Name, a.SHA256)
		}
	}
	return ""
}

// layoutProblem checks what Record knows before hashing: every asset has a
// unique name and a unique path inside the asset directory.
func layoutProblem(assets []Asset) string {
	names := make(map[string]bool, len(assets))
	paths := make(map[string]string, len(assets))
	for i, a := range assets {
		if a.Name == "" {
			return fmt.Sprintf("asset %d: name is missing", i+1)
		}
		if names[a.Name] {
			return fmt.Sprintf("asset %q is listed twice", a.Name)
		}
		names[a.Name] = true
		if p := pathProblem(a.Path); p != "" {
			return fmt.Sprintf("asset %q: %s", a.Name, p)
		}
		if other, ok := paths[a.Path]; ok {
			return fmt.Sprintf("assets %q and %q have the same path %q", other, a.Name, a.Path)
		}
		paths[a.Path] = a.Name
	}
	return ""
}

// pathProblem explains why p is not an acceptable asset path, or returns "".
func pathProblem(p string) string {
	switch {
	case p == "":
		return "path is missing"
	case strings.HasPrefix(p, "/") || filepath.IsAbs(p) || filepath.VolumeName(p) != "":
		return fmt.Sprintf("path %q is absolute; asset paths are relative to the asset directory", p)
	case strings.Contains(p, `\`):
		return fmt.Sprintf("path %q contains a backslash; asset paths are slash-separated", p)
	case path.Clean(p) == ".." || strings.HasPrefix(path.Clean(p), "../"):
		return fmt.Sprintf("path %q leaves the asset directory", p)
	case !fs.ValidPath(p) || p == ".":
		return fmt.Sprintf("path %q is not clean (no empty, \".\" or \"..\" elements)", p)
	case p == ManifestName:
		return fmt.Sprintf("path %q is the manifest itself", p)
	}
	return ""
}

func isHexSHA256(s string) bool {
	if len(s) != 2*sha256.Size {
		return false
	}
	for _, c := range s {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// Load reads and validates dir/manifest.json. The decoding is strict:
// unknown fields, trailing data and every Validate problem are refused with
// errdefs.ErrFailedPrecondition and the file's path; a directory without a
// manifest gives errdefs.ErrNotFound.
func Load(dir string) (Manifest, error) {
	file := filepath.Join(dir, ManifestName)
	data, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return Manifest{}, errdefs.New(errdefs.ErrNotFound,
			fmt.Sprintf("microVM asset manifest %s does not exist; %s", file, rebuildHint))
	}
	if err != nil {
		return Manifest{}, fmt.Errorf("read microVM asset manifest: %w", err)
	}
	m, problem := decode(data)
	if problem != "" {
		return Manifest{}, errdefs.New(errdefs.ErrFailedPrecondition,
			fmt.Sprintf("microVM asset manifest %s is invalid: %s; %s", file, problem, rebuildHint))
	}
	return m, nil
}

// decode parses a manifest strictly and returns it, or a problem description.
func decode(data []byte) (Manifest, string) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var m Manifest
	if err := dec.Decode(&m); err != nil {
		return Manifest{}, err.Error()
	}
	if _, err := dec.Token(); err != io.EOF {
		return Manifest{}, "unexpected data after the JSON object"
	}
	if p := m.problem(); p != "" {
		return Manifest{}, p
	}
	return m, ""
}

// Write validates m and stores it atomically as dir/manifest.json, mode
// 0644. It does not look at the assets; Record builds a manifest from them.
func Write(dir string, m Manifest) error {
	if p := m.problem(); p != "" {
		return errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("write microVM asset manifest: %s", p))
	}
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return fmt.Errorf("write microVM asset manifest: %w", err)
	}
	data = append(data, '\n')
	return atomicfile.WriteFile(filepath.Join(dir, ManifestName), data, 0o644)
}

// Describe loads dir's manifest and verifies every asset against it: the
// check to run before a boot.
func Describe(dir string) (Manifest, error) {
	m, err := Load(dir)
	if err != nil {
		return Manifest{}, err
	}
	if err := Verify(dir, m, nil); err != nil {
		return Manifest{}, err
	}
	return m, nil
}

// Verify re-hashes every asset of m under dir, in manifest order, and
// returns the first mismatch as an errdefs.ErrFailedPrecondition naming the
// asset's path: missing, a symlink, not a regular file, partial (shorter
// than listed), the wrong size, or corrupt (a different SHA-256). Files in
// dir that m does not list are ignored.
//
// progress, if not nil, is called for each asset with its name, the bytes
// hashed so far and the asset's size: once with done 0 before reading, after
// every chunk, and last with done equal to total.
func Verify(dir string, m Manifest, progress func(name string, done, total int64)) error {
	if p := m.problem(); p != "" {
		return errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("verify microVM assets in %s: manifest: %s", dir, p))
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return errdefs.New(errdefs.ErrFailedPrecondition,
				fmt.Sprintf("microVM asset directory %s does not exist; %s", dir, rebuildHint))
		}
		return fmt.Errorf("verify microVM assets: %w", err)
	}
	defer func() { _ = root.Close() }()
	buf := make([]byte, bufSize)
	for _, a := range m.Assets {
		if err := verifyOne(root, dir, a, buf, progress); err != nil {
			return err
		}
	}
	return nil
}

// bufSize is the hashing chunk: large enough for throughput, small enough
// that verifying a root filesystem costs no noticeable memory.
const bufSize = 256 << 10

func verifyOne(root *os.Root, dir string, a Asset, buf []byte, progress func(string, int64, int64)) error {
	display := filepath.Join(dir, filepath.FromSlash(a.Path))
	refuse := func(format string, args ...any) error {
		return errdefs.New(errdefs.ErrFailedPrecondition,
			fmt.Sprintf("microVM asset %s %s; %s", display, fmt.Sprintf(format, args...), rebuildHint))
	}
	f, info, err := openRegular(root, a.Path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return refuse("is missing (manifest lists %s, %d bytes)", a.Name, a.Size)
	case errors.Is(err, errSymlink):
		return refuse("is a symlink; assets must be regular files")
	case errors.Is(err, errNotRegular):
		return refuse("is not a regular file (%s)", fileType(info.Mode()))
	case err != nil:
		return fmt.Errorf("verify microVM asset %s: %w", display, err)
	}
	defer func() { _ = f.Close() }()
	if info.Size() != a.Size {
		return sizeRefusal(refuse, info.Size(), a.Size)
	}
	var report func(int64)
	if progress != nil {
		progress(a.Name, 0, a.Size)
		report = func(done int64) { progress(a.Name, done, a.Size) }
	}
	n, sum, err := hash(f, buf, report)
	if err != nil {
		return fmt.Errorf("verify microVM asset %s: %w", display, err)
	}
	if n != a.Size { // changed size while being read
		return sizeRefusal(refuse, n, a.Size)
	}
	if sum != a.SHA256 {
		return refuse("is corrupt: sha256 %s, manifest says %s", sum, a.SHA256)
	}
	return nil
}

func sizeRefusal(refuse func(string, ...any) error, got, want int64) error {
	if got < want {
		return refuse("is partial: %d bytes, manifest says %d", got, want)
	}
	return refuse("has the wrong size: %d bytes, manifest says %d", got, want)
}

// Record hashes files already placed under dir and returns a manifest of
// them. names maps each asset's name to its slash-separated path relative to
// dir. The assets are sorted by name; Created is set to now (UTC, whole
// seconds) and Source is left empty for the caller to fill before Write.
func Record(dir string, names map[string]string) (Manifest, error) {
	if len(names) == 0 {
		return Manifest{}, errdefs.New(errdefs.ErrInvalid, "record microVM assets: no assets given")
	}
	keys := make([]string, 0, len(names))
	for name := range names {
		keys = append(keys, name)
	}
	sort.Strings(keys)
	m := Manifest{Version: Version, Created: time.Now().UTC().Truncate(time.Second)}
	for _, name := range keys {
		m.Assets = append(m.Assets, Asset{Name: name, Path: names[name]})
	}
	if p := layoutProblem(m.Assets); p != "" {
		return Manifest{}, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("record microVM assets in %s: %s", dir, p))
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return Manifest{}, fmt.Errorf("record microVM assets: %w", err)
	}
	defer func() { _ = root.Close() }()
	buf := make([]byte, bufSize)
	for i, a := range m.Assets {
		display := filepath.Join(dir, filepath.FromSlash(a.Path))
		f, info, err := openRegular(root, a.Path)
		switch {
		case errors.Is(err, errSymlink) || errors.Is(err, errNotRegular):
			return Manifest{}, errdefs.New(errdefs.ErrInvalid,
				fmt.Sprintf("record microVM asset %s: %s is not a regular file (%s)", a.Name, display, fileType(info.Mode())))
		case err != nil:
			return Manifest{}, fmt.Errorf("record microVM asset %s: %w", a.Name, err)
		}
		n, sum, err := hash(f, buf, nil)
		_ = f.Close()
		if err != nil {
			return Manifest{}, fmt.Errorf("record microVM asset %s: %w", a.Name, err)
		}
		m.Assets[i].Size, m.Assets[i].SHA256 = n, sum
	}
	return m, nil
}

var (
	errSymlink    = errors.New("symlink")
	errNotRegular = errors.New("not a regular file")
)

// openRegular opens rel under root only if it is a regular file, not a
// symlink. The info of what was found is returned with errSymlink and
// errNotRegular too. The open file is compared with the checked one so that
// a swap between the check and the open is caught; root keeps resolution
// (including symlinked parent directories) inside the asset directory.
func openRegular(root *os.Root, rel string) (*os.File, fs.FileInfo, error) {
	name := filepath.FromSlash(rel)
	info, err := root.Lstat(name)
	if err != nil {
		return nil, nil, err
	}
	switch {
	case info.Mode()&fs.ModeSymlink != 0:
		return nil, info, errSymlink
	case !info.Mode().IsRegular():
		return nil, info, errNotRegular
	}
	f, err := root.Open(name)
	if err != nil {
		return nil, nil, err
	}
	opened, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, nil, err
	}
	if !os.SameFile(info, opened) {
		_ = f.Close()
		return nil, info, errSymlink
	}
	return f, opened, nil
}

// hash streams r through SHA-256 using buf and returns the byte count and
// lowercase hex digest. report, if not nil, gets the running count after
// every chunk.
func hash(r io.Reader, buf []byte, report func(done int64)) (int64, string, error) {
	h := sha256.New()
	var n int64
	for {
		k, err := r.Read(buf)
		if k > 0 {
			h.Write(buf[:k])
			n += int64(k)
			if report != nil {
				report(n)
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return n, "", err
		}
	}
	return n, hex.EncodeToString(h.Sum(nil)), nil
}

// fileType names the kind of a non-regular file for a refusal.
func fileType(mode fs.FileMode) string {
	switch t := mode.Type(); {
	case t&fs.ModeSymlink != 0:
		return "a symlink"
	case t&fs.ModeDir != 0:
		return "a directory"
	case t&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case t&fs.ModeSocket != 0:
		return "a socket"
	case t&fs.ModeDevice != 0:
		return "a device"
	default:
		return "mode " + t.String()
	}
}
