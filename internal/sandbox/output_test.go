package sandbox_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/internal/sandbox"
)

func TestLimitWriter_CapsAndCounts(t *testing.T) {
	var buf bytes.Buffer
	w := sandbox.NewLimitWriter(&buf, 5)
	for _, chunk := range []string{"abc", "def", "ghi"} {
		n, err := w.Write([]byte(chunk))
		if err != nil || n != len(chunk) {
			t.Fatalf("Write(%q) = %d, %v; want %d, nil", chunk, n, err, len(chunk))
		}
	}
	if buf.String() != "abcde" {
		t.Errorf("kept %q, want %q", buf.String(), "abcde")
	}
	if !w.Truncated() || w.Total() != 9 {
		t.Errorf("Truncated() = %v, Total() = %d; want true, 9", w.Truncated(), w.Total())
	}
}

func TestLimitWriter_NoLimit(t *testing.T) {
	var buf bytes.Buffer
	w := sandbox.NewLimitWriter(&buf, 0)
	if _, err := w.Write(bytes.Repeat([]byte("x"), 1000)); err != nil {
		t.Fatal(err)
	}
	if buf.Len() != 1000 || w.Truncated() {
		t.Errorf("kept %d bytes, truncated %v; want 1000, false", buf.Len(), w.Truncated())
	}
}

func TestExecResult_Messages(t *testing.T) {
	tests := []struct {
		name string
		r    sandbox.ExecResult
		want string
	}{
		{"timeout_whole", sandbox.ExecResult{TimedOut: true, Timeout: 30 * time.Second}, "Command timed out after 30 seconds"},
		{"timeout_fraction", sandbox.ExecResult{TimedOut: true, Timeout: 1500 * time.Millisecond}, "Command timed out after 1.5 seconds"},
		{"timeout_kill_unconfirmed", sandbox.ExecResult{TimedOut: true, KillUnconfirmed: true, Timeout: 2 * time.Second}, "Command timed out after 2 seconds; the sandbox stopped answering, so hutch could not confirm the command was killed"},
		{"aborted", sandbox.ExecResult{Aborted: true}, "Command aborted"},
		{"oom", sandbox.ExecResult{OOMKilled: true}, "Command was killed: the sandbox ran out of memory"},
		{"normal", sandbox.ExecResult{ExitCode: 2}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.r.Message(); got != tt.want {
				t.Errorf("Message() got %q, want %q", got, tt.want)
			}
		})
	}
	r := sandbox.ExecResult{StdoutTruncated: true, StdoutBytes: 200000000}
	if got, want := r.TruncationNotice(1<<20), "[output truncated: stdout 190.7 MiB, only the first 1.0 MiB kept]"; got != want {
		t.Errorf("TruncationNotice got %q, want %q", got, want)
	}
}
