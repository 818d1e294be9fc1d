// Package agentbin finds the hutch binary that runs as the agent inside
// sandboxes and stages it where runtimes can reach it. The daemon and the
// agent are one static binary (CGO_ENABLED=0), so the same file runs in
// any Linux container or guest; a dynamically linked build would fail
// inside a busybox or distroless image, so it is refused here, up front,
// with the fix.
package agentbin

import (
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/hutchsandbox/hutch/internal/errdefs"
)

// Binary is a verified agent binary.
type Binary struct {
	// Path is the binary on the host.
	Path string
	// SHA256 is the hex digest of its contents; it names staged copies and
	// is part of every runtime's fingerprint.
	SHA256 string
}

// Locate returns the agent binary: override when set (HUTCH_AGENT_BINARY
// or a test's build), otherwise the running executable. It must be a
// statically linked Linux ELF.
func Locate(override string) (Binary, error) {
	path, err := binaryPath(override)
	if err != nil {
		return Binary{}, err
	}
	if err := checkStatic(path); err != nil {
		return Binary{}, err
	}
	f, err := os.Open(path)
	if err != nil {
		return Binary{}, fmt.Errorf("agent binary: %w", err)
	}
	defer func() { _ = f.Close() }()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return Binary{}, fmt.Errorf("agent binary %s: %w", path, err)
	}
	return Binary{Path: path, SHA256: hex.EncodeToString(h.Sum(nil))}, nil
}

// binaryPath is override when set, otherwise the running executable.
func binaryPath(override string) (string, error) {
	if override != "" {
		return override, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("find the hutch binary: %w", err)
	}
	return exe, nil
}

// checkStatic refuses a binary that needs a dynamic loader.
func checkStatic(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return errdefs.New(errdefs.ErrFailedPrecondition, fmt.Sprintf("Agent binary %s is not a Linux executable (%v); set HUTCH_AGENT_BINARY to a hutch built with CGO_ENABLED=0", path, err))
	}
	defer func() { _ = f.Close() }()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return errdefs.New(errdefs.ErrFailedPrecondition, fmt.Sprintf(
				"Agent binary %s is dynamically linked and would not run inside a sandbox; rebuild it with CGO_ENABLED=0 go build -o bin/hutch ./cmd/hutch", path))
		}
	}
	return nil
}

// Stage copies the binary into dir as hutch-<digest prefix> (0755), once:
// runtimes bind-mount the staged copy, which never changes under them
// even when the hutch binary on the host is rebuilt. It returns the path.
func (b Binary) Stage(dir string) (string, error) {
	dst := filepath.Join(dir, "hutch-"+b.SHA256[:16])
	if fi, err := os.Stat(dst); err == nil && fi.Mode().IsRegular() {
		return dst, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("stage agent binary: %w", err)
	}
	src, err := os.Open(b.Path)
	if err != nil {
		return "", fmt.Errorf("stage agent binary: %w", err)
	}
	defer func() { _ = src.Close() }()
	tmp, err := os.CreateTemp(dir, ".hutch-stage-*")
	if err != nil {
		return "", fmt.Errorf("stage agent binary: %w", err)
	}
	_, cerr := io.Copy(tmp, src)
	err = errors.Join(cerr, tmp.Chmod(0o755), tmp.Sync(), tmp.Close())
	if err == nil {
		err = os.Rename(tmp.Name(), dst)
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
		return "", fmt.Errorf("stage agent binary: %w", err)
	}
	return dst, nil
}
