package mcptools

import (
	"bytes"
	"strings"
	"testing"
)

func TestLastLine(t *testing.T) {
	long := strings.Repeat("é", ProgressLineRunes+20)
	tests := []struct {
		name string
		tail string
		cut  bool
		want string
	}{
		{"empty", "", false, ""},
		{"blank_lines", "\n \n\t\n", false, ""},
		{"last_complete_line", "one\ntwo\n", false, "two"},
		{"line_in_progress", "one\ntwo\nthr", false, "thr"},
		{"carriage_returns", "fetch 10%\rfetch 55%\rfetch 90%\r", false, "fetch 90%"},
		{"colours", "\x1b[1;31merror\x1b[0m: bad\n", false, "error: bad"},
		{"controls", "a\x00b\x07c\td\x7f\n", false, "abc d"},
		{"format_characters", "rm \u202eexe.txt\u200b ok\u2066\n", false, "rm exe.txt ok"},
		{"not_utf8", "ok \xff\xfe\n", false, "ok \uFFFD"},
		{"start_cut_off", "the end of a long line", true, "…the end of a long line"},
		{"start_kept", "x\nfull line", true, "full line"},
		{"long", long + "\n", false, "…" + strings.Repeat("é", ProgressLineRunes)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := lastLine([]byte(tt.tail), tt.cut); got != tt.want {
				t.Errorf("lastLine(%q, %v) = %q, want %q", tt.tail, tt.cut, got, tt.want)
			}
		})
	}
}

// TestOutputWatch_Bounded: however much a command writes, in whatever
// pieces, the watch holds tailKeep bytes per stream, and counts it all.
func TestOutputWatch_Bounded(t *testing.T) {
	w := newOutputWatch()
	chunk := bytes.Repeat([]byte("flood of output\n"), 4096) // 64 KiB
	var total int64
	for i := range 1024 { // 64 MiB, and small writes between the big ones
		w.write(i%2, chunk)
		w.write(0, []byte("x"))
		total += int64(len(chunk)) + 1
	}
	w.write(1, []byte("last words\n"))
	total += int64(len("last words\n"))
	for i, tail := range w.tails {
		if cap(tail) > tailKeep {
			t.Errorf("stream %d: the watch holds %d bytes, want at most %d", i, cap(tail), tailKeep)
		}
	}
	got, line := w.snapshot()
	if got != total || line != "last words" {
		t.Errorf("snapshot = %d, %q; want %d, %q", got, line, total, "last words")
	}
	if got, want := progressMessage(total, line), "64.0 MiB of output; last line: last words"; got != want {
		t.Errorf("progressMessage = %q, want %q", got, want)
	}
}

func TestOutputWatch_Tail(t *testing.T) {
	w := newOutputWatch()
	for _, p := range []string{"build", "ing a", "\nstep 1 ok\nstep 2", " runs"} {
		w.write(0, []byte(p))
	}
	if _, line := w.snapshot(); line != "step 2 runs" {
		t.Errorf("line %q, want %q", line, "step 2 runs")
	}
	w.write(0, bytes.Repeat([]byte("y"), tailKeep-3))
	if _, line := w.snapshot(); !strings.HasPrefix(line, "…") || !strings.HasSuffix(line, "yyy") {
		t.Errorf("a line longer than the kept tail: %q, want it marked as cut", line)
	}
}
