package sandboxtest

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/internal/sandbox"
)

// Spin runs a busy loop in spec's runtime for d, in the background, for
// tests of resource use; wait waits for it to end and fails t if the
// command could not run.
func Spin(t *testing.T, rt sandbox.Runtime, spec sandbox.Spec, d time.Duration) (wait func()) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		_, err := rt.Exec(context.Background(), spec, sandbox.ExecRequest{Argv: []string{`while :; do :; done`}, Stdout: io.Discard, Stderr: io.Discard, Timeout: d})
		done <- err
	}()
	return func() {
		t.Helper()
		if err := <-done; err != nil {
			t.Errorf("the busy loop: %v", err)
		}
	}
}

// CPUShare reads an office's use from r twice, apart, and returns the CPU
// share between the readings (1 is one CPU busy) and the later reading.
// It fails t when a reading fails or their clocks did not move on.
func CPUShare(t *testing.T, r sandbox.UsageReader, key string, apart time.Duration) (float64, sandbox.Usage) {
	t.Helper()
	a, err := r.Usage(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(apart)
	b, err := r.Usage(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	if b.Clock <= a.Clock || b.Instance != a.Instance {
		t.Fatalf("two readings %v apart: %+v, then %+v", apart, a, b)
	}
	return float64(b.CPU-a.CPU) / float64(b.Clock-a.Clock), b
}
