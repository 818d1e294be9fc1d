package features

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/hutchsandbox/hutch/internal/atomicfile"
)

// cache keeps OCI manifests and layers by digest under
// <dir>/oci/{manifests,blobs}/sha256-<hex>. What is read back is checked
// against its digest, so a damaged entry is only a miss. Failing to write
// it is never an error: it is an optimisation.
type cache struct {
	dir string // "" caches nothing
}

// path returns the folder of kind, made if missing, or "" without a cache.
func (c cache) path(kind string) string {
	if c.dir == "" {
		return ""
	}
	p := filepath.Join(c.dir, "oci", kind)
	if err := os.MkdirAll(p, 0o700); err != nil {
		return ""
	}
	return p
}

// file returns where h of kind is kept, or "" without a cache.
func (c cache) file(kind string, h v1.Hash) string {
	dir := c.path(kind)
	if dir == "" || h.Algorithm != "sha256" || !sha256Hex.MatchString(h.Hex) {
		return ""
	}
	return filepath.Join(dir, h.Algorithm+"-"+h.Hex)
}

// open returns the kept h of kind, checked, positioned at its start.
func (c cache) open(kind string, h v1.Hash, limit int64) (*os.File, bool) {
	p := c.file(kind, h)
	if p == "" {
		return nil, false
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, false
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() || fi.Size() > limit {
		_ = f.Close()
		return nil, false
	}
	sum := sha256.New()
	if _, err := io.Copy(sum, f); err != nil || hex.EncodeToString(sum.Sum(nil)) != h.Hex {
		_ = f.Close()
		_ = os.Remove(p)
		return nil, false
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		_ = f.Close()
		return nil, false
	}
	return f, true
}

// get returns the kept h of kind, checked.
func (c cache) get(kind string, h v1.Hash, limit int64) ([]byte, bool) {
	f, ok := c.open(kind, h, limit)
	if !ok {
		return nil, false
	}
	defer func() { _ = f.Close() }()
	b, err := io.ReadAll(f)
	return b, err == nil
}

// put keeps data as h of kind.
func (c cache) put(kind string, h v1.Hash, data []byte) {
	if p := c.file(kind, h); p != "" {
		_ = atomicfile.WriteFile(p, data, 0o600)
	}
}
