package microvm

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"

	"github.com/cavaliergopher/cpio"

	"github.com/hutchsandbox/hutch/internal/atomicfile"
	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/microvm/assets"
)

// assetCache remembers which asset files were verified, by their
// identity and change times, so that a boot re-hashes only what changed
// since: hashing a root filesystem image of a few GiB takes longer than a
// boot. A file replaced or written since (new inode, size, modification
// or change time) is hashed again. The change time cannot be set back by
// a program, so an edit that restores the modification time is caught
// too. What was verified is also kept in a file of the run dir (host-only,
// like the state dir), so that every hutch process of the installation
// (a one-shot hutch exec included) shares one verification.
type assetCache struct {
	mu       sync.Mutex
	file     string           // where verified stamps persist; "" keeps them in memory
	verified map[string]stamp // absolute path -> stamp at verification
}

type stamp struct {
	Dev    uint64 `json:"dev"`
	Ino    uint64 `json:"ino"`
	Size   int64  `json:"size"`
	Mtime  int64  `json:"mtimeNs"`
	Ctime  int64  `json:"ctimeNs"`
	SHA256 string `json:"sha256"`
}

func stampOf(p, sum string) (stamp, bool) {
	var st syscall.Stat_t
	if err := syscall.Stat(p, &st); err != nil {
		return stamp{}, false
	}
	return stamp{Dev: st.Dev, Ino: st.Ino, Size: st.Size, Mtime: st.Mtim.Nano(), Ctime: st.Ctim.Nano(), SHA256: sum}, true
}

// loadStamps reads the persisted stamps once; a missing or unreadable
// file only means hashing again.
func (c *assetCache) loadStamps() {
	if c.verified != nil {
		return
	}
	c.verified = map[string]stamp{}
	if c.file == "" {
		return
	}
	if data, err := os.ReadFile(c.file); err == nil {
		_ = json.Unmarshal(data, &c.verified)
	}
}

func (c *assetCache) saveStamps() {
	if c.file == "" {
		return
	}
	data, err := json.Marshal(c.verified)
	if err == nil && os.MkdirAll(filepath.Dir(c.file), 0o700) == nil {
		_ = atomicfile.WriteFile(c.file, data, 0o600)
	}
}

// load reads and validates the manifest of dir, with a refusal that says
// how to build the assets when there are none.
func (c *assetCache) load(dir string) (assets.Manifest, error) {
	if _, err := os.Stat(filepath.Join(dir, assets.ManifestName)); errors.Is(err, os.ErrNotExist) {
		return assets.Manifest{}, errdefs.New(errdefs.ErrFailedPrecondition, fmt.Sprintf(
			"No microVM guest in %s: build one with hutch microvm image build", dir))
	}
	m, err := assets.Load(dir)
	if errors.Is(err, os.ErrNotExist) {
		return assets.Manifest{}, errdefs.New(errdefs.ErrFailedPrecondition, fmt.Sprintf(
			"No microVM guest in %s: build one with hutch microvm image build", dir))
	}
	if err != nil {
		return assets.Manifest{}, err
	}
	for _, name := range []string{"kernel", "initrd", "rootfs"} {
		if _, ok := m.Asset(name); !ok {
			return assets.Manifest{}, errdefs.New(errdefs.ErrFailedPrecondition, fmt.Sprintf(
				"The microVM guest in %s has no %s asset; rebuild it with hutch microvm image build", dir, name))
		}
	}
	return m, nil
}

// verify checks every asset of m against the manifest, hashing those not
// verified unchanged before.
func (c *assetCache) verify(dir string, m assets.Manifest) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.loadStamps()
	fresh := true
	for _, a := range m.Assets {
		p := filepath.Join(dir, filepath.FromSlash(a.Path))
		st, ok := stampOf(p, a.SHA256)
		if !ok || c.verified[p] != st {
			fresh = false
			break
		}
	}
	if fresh {
		return nil
	}
	if err := assets.Verify(dir, m, nil); err != nil {
		return err
	}
	for _, a := range m.Assets {
		p := filepath.Join(dir, filepath.FromSlash(a.Path))
		if st, ok := stampOf(p, a.SHA256); ok {
			c.verified[p] = st
		}
	}
	c.saveStamps()
	return nil
}

// assetPath is the file of a named asset.
func assetPath(dir string, m assets.Manifest, name string) string {
	a, _ := m.Asset(name)
	return filepath.Join(dir, filepath.FromSlash(a.Path))
}

// stageInitrd returns the initrd a VM boots with: the verified modules
// archive followed by a second archive holding this hutch's agent binary
// as /init (the kernel unpacks concatenated archives in order). It is made
// once per pair of modules archive and agent, in the run dir.
func (r *Runtime) stageInitrd(m assets.Manifest) (string, error) {
	a, _ := m.Asset("initrd")
	dir := filepath.Join(r.cfg.RunDir, "microvm")
	dst := filepath.Join(dir, "initrd-"+a.SHA256[:16]+"-"+r.cfg.Agent.SHA256[:16]+".img")
	if fi, err := os.Stat(dst); err == nil && fi.Mode().IsRegular() {
		return dst, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("stage initrd: %w", err)
	}
	tmp, err := os.CreateTemp(dir, ".initrd-*")
	if err != nil {
		return "", fmt.Errorf("stage initrd: %w", err)
	}
	err = writeInitrd(tmp, assetPath(r.cfg.AssetDir, m, "initrd"), r.cfg.Agent.Path)
	err = errors.Join(err, tmp.Sync(), tmp.Close())
	if err == nil {
		err = os.Rename(tmp.Name(), dst)
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
		return "", fmt.Errorf("stage initrd: %w", err)
	}
	return dst, nil
}

func writeInitrd(w io.Writer, modules, agentPath string) error {
	src, err := os.Open(modules)
	if err != nil {
		return err
	}
	defer func() { _ = src.Close() }()
	n, err := io.Copy(w, src)
	if err != nil {
		return err
	}
	// The kernel reads an uncompressed archive only at an offset that is
	// a multiple of 4 and skips zeros in between.
	if pad := (4 - n%4) % 4; pad > 0 {
		if _, err := w.Write(make([]byte, pad)); err != nil {
			return err
		}
	}
	bin, err := os.Open(agentPath)
	if err != nil {
		return err
	}
	defer func() { _ = bin.Close() }()
	fi, err := bin.Stat()
	if err != nil {
		return err
	}
	cw := cpio.NewWriter(w)
	if err := cw.WriteHeader(&cpio.Header{Name: "init", Mode: 0o755 | cpio.TypeReg, Size: fi.Size()}); err != nil {
		return err
	}
	if _, err := io.Copy(cw, bin); err != nil {
		return err
	}
	return cw.Close()
}

// findTool returns the configured program, or finds name on PATH.
func findTool(configured, name, install string) (string, error) {
	if configured != "" {
		return configured, nil
	}
	p, err := exec.LookPath(name)
	if err != nil {
		return "", errdefs.New(errdefs.ErrFailedPrecondition, fmt.Sprintf("microVM mode needs %s, which is not installed (Debian: %s)", name, install))
	}
	return p, nil
}
