package agentbin

import (
	"encoding/json"
	"os"
	"path/filepath"
	"time"

	"github.com/hutchsandbox/hutch/internal/atomicfile"
	"github.com/hutchsandbox/hutch/internal/fileid"
)

// DigestCacheName is the file, in hutch's state directory, that remembers
// the agent binary's digest.
const DigestCacheName = "agent-digest.json"

// racyWindow is fileid.RacyWindow, but for tests: a binary changed more
// recently than that is hashed on every call until it ages, since a
// rewrite in the same clock tick could keep its identity.
var racyWindow = fileid.RacyWindow

// digestEntry is the cache file: which version of which file, and its
// digest.
type digestEntry struct {
	Path string `json:"path"`
	fileid.ID
	SHA256 string `json:"sha256"`
}

// LocateCached is Locate with the digest remembered in stateDir: a call
// whose binary is the same file, unchanged since (device, inode, size,
// modification and change times), reads the digest instead of hashing
// the whole binary again (about 80 MB; 0.2 s of CPU on this project's
// CI machine, on every CLI call that reaches a runtime). The cache is a
// hint about hutch's own file in hutch's own 0700 directory: a missing,
// unreadable or stale entry means hashing, never an error.
func LocateCached(override, stateDir string) (Binary, error) {
	path, err := binaryPath(override)
	if err != nil {
		return Binary{}, err
	}
	cache := filepath.Join(stateDir, DigestCacheName)
	before, ierr := fileid.Stat(path)
	if ierr == nil {
		if sum, ok := cachedDigest(cache, path, before); ok {
			return Binary{Path: path, SHA256: sum}, nil
		}
	}
	b, err := Locate(path)
	if err != nil || ierr != nil {
		return b, err
	}
	// Remember only what was hashed from a file that did not change while
	// it was read, and that has not changed too recently to tell apart.
	if after, aerr := fileid.Stat(path); aerr == nil && after == before && before.Settled(time.Now(), racyWindow) {
		data, _ := json.Marshal(digestEntry{Path: path, ID: before, SHA256: b.SHA256})
		_ = atomicfile.WriteFile(cache, data, 0o600)
	}
	return b, nil
}

func cachedDigest(cache, path string, id fileid.ID) (string, bool) {
	data, err := os.ReadFile(cache) //nolint:gosec // G304: the cache lives in hutch's own 0700 state dir
	if err != nil {
		return "", false
	}
	var e digestEntry
	if json.Unmarshal(data, &e) != nil || e.Path != path || e.ID != id || len(e.SHA256) != 64 {
		return "", false
	}
	return e.SHA256, true
}
