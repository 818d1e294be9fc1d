package sandbox

import (
	"io"
	"sync"
)

// LimitWriter passes at most Limit bytes to W and swallows the rest, so a
// command that prints without end never grows the reader's memory and
// never blocks on a full pipe. Total and Truncated report what was dropped.
// It is safe for one writer goroutine and concurrent readers of the counts.
type LimitWriter struct {
	w     io.Writer
	limit int64

	mu        sync.Mutex // guards the following
	total     int64
	truncated bool
}

// NewLimitWriter caps w at limit bytes; limit <= 0 means no cap. A nil w
// discards everything (but still counts).
func NewLimitWriter(w io.Writer, limit int64) *LimitWriter {
	if w == nil {
		w = io.Discard
	}
	return &LimitWriter{w: w, limit: limit}
}

// Write forwards what fits under the limit. It always reports len(p) as
// written so that io.Copy keeps draining the source.
func (l *LimitWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	pass := p
	if l.limit > 0 {
		room := l.limit - l.total
		if room < 0 {
			room = 0
		}
		if int64(len(pass)) > room {
			pass = pass[:room]
			l.truncated = true
		}
	}
	l.total += int64(len(p))
	l.mu.Unlock()
	if len(pass) > 0 {
		if _, err := l.w.Write(pass); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// Total is every byte offered to the writer, kept or not.
func (l *LimitWriter) Total() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.total
}

// Truncated reports whether any byte was dropped.
func (l *LimitWriter) Truncated() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.truncated
}
