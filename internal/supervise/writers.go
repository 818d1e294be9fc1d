package supervise

import (
	"io"
	"reflect"
	"sync"
)

// Latch forwards writes to a writer until it fails, keeps that first
// error, and from then on swallows everything while reporting every write
// as done. A command's output must keep flowing when its consumer breaks:
// a writer that stops draining blocks the command on a full pipe, and a
// stream that stops being counted under-reports its size. A Latch serves
// one stream; read Err once the writing has ended.
type Latch struct {
	w   io.Writer
	err error
}

// NewLatch wraps w; a nil w discards.
func NewLatch(w io.Writer) *Latch {
	if w == nil {
		w = io.Discard
	}
	return &Latch{w: w}
}

// Write forwards p unless the writer failed before, and always reports
// len(p) written.
func (l *Latch) Write(p []byte) (int, error) {
	if l.err == nil && len(p) > 0 {
		if _, err := l.w.Write(p); err != nil {
			l.err = err
		}
	}
	return len(p), nil
}

// Err is the writer's first error, nil while it has had none.
func (l *Latch) Err() error { return l.err }

// Serialize returns stdout and stderr ready for the two goroutines that
// write a Command's streams: when they are one writer (a caller that wants
// both streams in one buffer), both are wrapped to take turns on one lock;
// otherwise they are returned as they are.
func Serialize(stdout, stderr io.Writer) (io.Writer, io.Writer) {
	if !sameWriter(stdout, stderr) {
		return stdout, stderr
	}
	mu := new(sync.Mutex)
	return &lockedWriter{mu: mu, w: stdout}, &lockedWriter{mu: mu, w: stderr}
}

// lockedWriter serialises writes to a writer shared by both streams.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// sameWriter reports whether a and b are the same writer, without the
// panic comparing two values of one uncomparable type would cause.
func sameWriter(a, b io.Writer) bool {
	if a == nil || b == nil {
		return false
	}
	t := reflect.TypeOf(a)
	return t == reflect.TypeOf(b) && t.Comparable() && a == b
}
