package agentbin

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/hutchsandbox/hutch/internal/atomicfile"
	"github.com/hutchsandbox/hutch/internal/errdefs"
)

// InstallSelf copies the running executable to dest (mode 0555), creating
// dest's directory (0755) when it is missing. It is how an agent image
// delivers the agent: the image's init container runs
// `hutch agent --install-to <dest> --sha256 <hex>` and the pod's main
// container runs the copy.
//
// When wantSHA256 is not empty, the copy is refused unless the executable
// hashes to it: an agent image built from another hutch would speak an
// older (or newer) protocol than the daemon's, so the pod fails at once
// with the fix instead of failing later and obscurely. The copy goes to a
// temporary file next to dest and is renamed onto it only when complete
// and verified, so dest is never a torn or unverified binary.
func InstallSelf(dest, wantSHA256 string) error {
	src, err := openSelf()
	if err != nil {
		return fmt.Errorf("install the agent: %w", err)
	}
	defer func() { _ = src.Close() }()
	dir := filepath.Dir(dest)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("install the agent: %w", err)
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(dest)+".install-*")
	if err != nil {
		return fmt.Errorf("install the agent: %w", err)
	}
	h := sha256.New()
	_, cerr := io.Copy(io.MultiWriter(tmp, h), src)
	err = errors.Join(cerr, tmp.Chmod(0o555), tmp.Sync(), tmp.Close())
	if err == nil {
		if got := hex.EncodeToString(h.Sum(nil)); wantSHA256 != "" && !strings.EqualFold(got, wantSHA256) {
			err = errdefs.New(errdefs.ErrFailedPrecondition, fmt.Sprintf(
				"This agent image holds hutch %s, but the daemon runs %s: build the matching image with `hutch kube agent-image` and load or push it",
				short(got), short(wantSHA256)))
			_ = os.Remove(tmp.Name())
			return err
		}
		err = os.Rename(tmp.Name(), dest)
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("install the agent to %s: %w", dest, err)
	}
	if err := atomicfile.SyncDir(dir); err != nil {
		return fmt.Errorf("install the agent: %w", err)
	}
	return nil
}

// openSelf opens the running executable's file. /proc/self/exe is the
// fallback: it names the running file even when os.Executable cannot.
func openSelf() (*os.File, error) {
	if exe, err := os.Executable(); err == nil {
		if f, err := os.Open(exe); err == nil {
			return f, nil
		}
	}
	return os.Open("/proc/self/exe")
}

// short is a digest's first 16 hex characters, the length image tags and
// staged copies use.
func short(digest string) string {
	if len(digest) > 16 {
		return digest[:16]
	}
	return digest
}
