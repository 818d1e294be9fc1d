package microvm

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/sandbox"
)

// TestBootRecord: the record a boot leaves beside the disk gives back
// whose VM it is and its base limits (rounded as a VM has them, defaults
// filled in); a disk without one reads as unknown; a malformed one is an
// error naming the file.
func TestBootRecord(t *testing.T) {
	r := &Runtime{cfg: Config{StateDir: t.TempDir()}}
	const key = "v1-web-x-0123456789abcdef"
	if err := os.MkdirAll(r.diskDir(key), 0o700); err != nil {
		t.Fatal(err)
	}
	if b, err := r.lastBoot(key); err != nil || b != (bootRecord{}) {
		t.Errorf("no record: %+v, %v", b, err)
	}
	spec := sandbox.Spec{Platform: "web", ConversationID: "x", Limits: sandbox.Limits{CPUs: 0.5, MemoryBytes: 64 << 20}}
	if err := r.recordBoot(key, spec); err != nil {
		t.Fatal(err)
	}
	want := bootRecord{Platform: "web", ConversationID: "x", Limits: sandbox.Limits{CPUs: 1, MemoryBytes: minMemoryMiB << 20, Pids: 1024}}
	if b, err := r.lastBoot(key); err != nil || b != want {
		t.Errorf("lastBoot = %+v, %v; want %+v", b, err, want)
	}
	path := filepath.Join(r.diskDir(key), bootName)
	if err := os.WriteFile(path, []byte("{garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := r.lastBoot(key); !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), path) {
		t.Errorf("malformed record: %v; want ErrFailedPrecondition naming %s", err, path)
	}
}
