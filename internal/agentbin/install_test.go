package agentbin

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hutchsandbox/hutch/internal/errdefs"
)

// self returns the running test binary's contents and hex digest: in a
// test, the executable InstallSelf copies is the test binary.
func self(t *testing.T) ([]byte, string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	return data, hex.EncodeToString(sum[:])
}

func TestInstallSelf(t *testing.T) {
	want, digest := self(t)
	tests := []struct {
		name   string
		sha256 string
	}{
		{"verified", digest},
		{"verified_upper_case", strings.ToUpper(digest)},
		{"unverified", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "hutch-bin") // missing: InstallSelf creates it
			dest := filepath.Join(dir, "hutch")
			if err := InstallSelf(dest, tt.sha256); err != nil {
				t.Fatalf("InstallSelf: %v", err)
			}
			got, err := os.ReadFile(dest)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s holds %d bytes that differ from the executable's %d", dest, len(got), len(want))
			}
			fi, err := os.Stat(dest)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode() != 0o555 {
				t.Errorf("mode of %s is %v, want -r-xr-xr-x", dest, fi.Mode())
			}
			entries, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			if len(entries) != 1 {
				t.Errorf("%s holds %d entries, want only hutch (no temporary file left)", dir, len(entries))
			}
		})
	}
}

func TestInstallSelf_Replaces(t *testing.T) {
	want, digest := self(t)
	dest := filepath.Join(t.TempDir(), "hutch")
	if err := os.WriteFile(dest, []byte("an older agent"), 0o555); err != nil {
		t.Fatal(err)
	}
	if err := InstallSelf(dest, digest); err != nil {
		t.Fatalf("InstallSelf over an existing file: %v", err)
	}
	if got, err := os.ReadFile(dest); err != nil || !bytes.Equal(got, want) {
		t.Errorf("%s was not replaced by the executable (read error %v)", dest, err)
	}
}

func TestInstallSelf_WrongHash(t *testing.T) {
	_, digest := self(t)
	dir := t.TempDir()
	dest := filepath.Join(dir, "hutch")
	wrong := strings.Repeat("0123456789abcdef", 4)
	err := InstallSelf(dest, wrong)
	if err == nil {
		t.Fatal("InstallSelf with the wrong hash succeeded")
	}
	if !errdefs.IsFailedPrecondition(err) {
		t.Errorf("error %v is not of class failed precondition", err)
	}
	want := "This agent image holds hutch " + digest[:16] + ", but the daemon runs 0123456789abcdef: build the matching image with `hutch kube agent-image` and load or push it"
	if err.Error() != want {
		t.Errorf("error:\n got %q\nwant %q", err, want)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		t.Errorf("refused install left %s in %s", e.Name(), dir)
	}
}
