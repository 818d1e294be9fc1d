package agent

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/sandbox"
)

func TestChannelKey(t *testing.T) {
	state := t.TempDir()
	// Processes making the installation's secret at once agree on one.
	keys := make([][]byte, 8)
	var wg sync.WaitGroup
	for i := range keys {
		wg.Go(func() {
			k, err := ChannelKey(state, "image\x00office-a")
			if err != nil {
				t.Error(err)
			}
			keys[i] = k
		})
	}
	wg.Wait()
	for _, k := range keys[1:] {
		if !bytes.Equal(k, keys[0]) || len(k) != channelKeyBytes {
			t.Fatalf("keys differ across concurrent first uses: %x vs %x", k, keys[0])
		}
	}
	fi, err := os.Stat(filepath.Join(state, channelSecretFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("secret file: %v, %v; want mode 0600", fi, err)
	}
	if left, _ := filepath.Glob(filepath.Join(state, "*.tmp")); len(left) > 0 {
		t.Errorf("temp files left: %q", left)
	}
	other, _ := ChannelKey(state, "image\x00office-b")
	elsewhere, _ := ChannelKey(t.TempDir(), "image\x00office-a")
	if bytes.Equal(other, keys[0]) || bytes.Equal(elsewhere, keys[0]) {
		t.Errorf("another runtime or another installation got the same key")
	}
	if err := os.WriteFile(filepath.Join(state, channelSecretFile), []byte("short"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ChannelKey(state, "x"); err == nil {
		t.Errorf("a damaged secret was used")
	}
}

func TestWriteChannelKey(t *testing.T) {
	key := bytes.Repeat([]byte{7}, channelKeyBytes)
	path := filepath.Join(t.TempDir(), "rt", "abc.key")
	if err := WriteChannelKey(path, key); err != nil {
		t.Fatal(err)
	}
	got, err := readChannelKey(path)
	if err != nil || !bytes.Equal(got, key) {
		t.Fatalf("read back %x, %v", got, err)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o644 {
		t.Errorf("key file mode %v, want 0644 (an agent running as the image's user reads it)", fi.Mode().Perm())
	}
	if err := os.WriteFile(path, []byte("zz\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := readChannelKey(path); err == nil {
		t.Errorf("a malformed key file was accepted")
	}
}

// TestRequireProof: a client requiring a proof works with the agent that
// holds the key, and refuses, before sending anything else, an agent
// holding another key or none.
func TestRequireProof(t *testing.T) {
	right := bytes.Repeat([]byte{1}, channelKeyBytes)
	wrong := bytes.Repeat([]byte{2}, channelKeyBytes)
	const refusal = "runtime X: not its agent"
	for _, tc := range []struct {
		name   string
		server []byte
		ok     bool
	}{
		{"same key", right, true},
		{"other key", wrong, false},
		{"no key", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, &Server{Key: tc.server})
			f.client.RequireProof(right, refusal)
			marker := filepath.Join(t.TempDir(), "ran")
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_, err := f.client.Exec(ctx, sandbox.ExecRequest{Argv: []string{"touch " + marker}, Env: map[string]string{"SECRET": "s"}})
			_, statErr := os.Stat(marker)
			if tc.ok {
				if err != nil || statErr != nil {
					t.Errorf("exec with the right agent: %v, marker %v", err, statErr)
				}
				return
			}
			if !errors.Is(err, errdefs.ErrFailedPrecondition) || err.Error() != refusal {
				t.Errorf("exec with an agent that cannot prove the key: %v; want the refusal %q", err, refusal)
			}
			if statErr == nil {
				t.Errorf("the command reached an agent that failed the proof")
			}
		})
	}
}
