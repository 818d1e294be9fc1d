// Package managed holds what every mode whose runtimes hutch manages
// shares (image:, gondolin:, kube:, and the project sandbox where it
// applies): the defaults where settings set none, the capabilities a
// managed container keeps, and the digest that puts a credential's
// content into a runtime's fingerprint without revealing it. Keeping them
// here, not in one mode's package, is what lets the modes agree without
// importing each other.
package managed

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/hutchsandbox/hutch/internal/sandbox"
)

// Defaults where settings set none.
var (
	// DefaultLimits are a runtime's limits.
	DefaultLimits = sandbox.Limits{CPUs: 0.5, MemoryBytes: 1 << 30, Pids: 1024}
	// DefaultBoost is what a boost raises CPUs and memory to.
	DefaultBoost = sandbox.Limits{CPUs: 2, MemoryBytes: 4 << 30}
	// DefaultIdleTimeout stops a runtime that ran nothing for this long.
	DefaultIdleTimeout = 10 * time.Minute
	// DefaultDiskCeiling is the most a runtime may write outside its
	// office and mounts: room for toolchains and caches of real work.
	DefaultDiskCeiling int64 = 10 << 30
)

// KeptCapabilities is every capability a managed container (image:, and
// kube:'s pods) keeps; the rest are dropped. The set lets root inside
// install packages (apt and dpkg change owners and modes, drop privileges
// to _apt, write files of other users) and run ordinary servers, and
// nothing more: no raw sockets, no mknod, no chroot, no audit, no
// changing capability sets.
var KeptCapabilities = []string{
	"CHOWN",            // dpkg and tar set file owners
	"DAC_OVERRIDE",     // root writes files it does not own (package installs)
	"FOWNER",           // chmod/utime on files of other owners
	"FSETID",           // keep setgid bits when installing files
	"SETUID",           // apt drops to _apt; su/sudo-less user switches
	"SETGID",           // same, for groups
	"KILL",             // root signals processes of other users it started
	"NET_BIND_SERVICE", // dev servers on ports below 1024
}

// DigestTree hashes a file, or a directory's relative paths, modes and
// file contents, so a rotated credential changes the fingerprint. The
// digest never leaves the host in a form that reveals content.
func DigestTree(root string) (string, error) {
	h := sha256.New()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		info, err := d.Info()
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s\x00%o\x00", rel, info.Mode())
		if d.Type().IsRegular() {
			f, err := os.Open(p) //nolint:gosec // G122: the vault lives in hutch's 0700 state dir, out of every sandbox's reach
			if err != nil {
				return err
			}
			_, err = io.Copy(h, f)
			_ = f.Close()
			if err != nil {
				return err
			}
		}
		h.Write([]byte{0})
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("digest vault entry: %w", err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
