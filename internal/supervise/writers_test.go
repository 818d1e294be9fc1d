package supervise

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
)

// failingWriter takes ok writes, then fails every one with its own error.
type failingWriter struct {
	ok     int
	calls  int
	buf    bytes.Buffer
	errors int
}

func (f *failingWriter) Write(p []byte) (int, error) {
	f.calls++
	if f.calls > f.ok {
		f.errors++
		return 0, errors.New("write " + strings.Repeat("I", f.errors))
	}
	return f.buf.Write(p)
}

func TestLatch_KeepsTheFirstErrorAndSwallowsTheRest(t *testing.T) {
	t.Parallel()
	w := &failingWriter{ok: 1}
	l := NewLatch(w)
	for _, s := range []string{"one", "two", "three", ""} {
		if n, err := l.Write([]byte(s)); n != len(s) || err != nil {
			t.Errorf("Write(%q) = %d, %v; want %d, nil", s, n, err, len(s))
		}
	}
	if err := l.Err(); err == nil || err.Error() != "write I" {
		t.Errorf("Err() = %v, want the first error, write I", err)
	}
	if w.calls != 2 || w.buf.String() != "one" {
		t.Errorf("writer saw %d writes and %q; want 2 and %q (nothing after it failed)", w.calls, w.buf.String(), "one")
	}
}

func TestLatch_NilDiscards(t *testing.T) {
	t.Parallel()
	l := NewLatch(nil)
	if n, err := l.Write([]byte("x")); n != 1 || err != nil || l.Err() != nil {
		t.Errorf("Write = %d, %v, Err() = %v; want 1, nil, nil", n, err, l.Err())
	}
}

// uncomparable is a writer type that == would panic on.
type uncomparable struct{ _ []byte }

func (u uncomparable) Write(p []byte) (int, error) { return len(p), nil }

func TestSerialize(t *testing.T) {
	t.Parallel()
	var a, b bytes.Buffer
	if o, e := Serialize(&a, &b); o != io.Writer(&a) || e != io.Writer(&b) {
		t.Error("Serialize wrapped two different writers")
	}
	if o, e := Serialize(uncomparable{}, uncomparable{}); o == nil || e == nil {
		t.Error("Serialize lost an uncomparable writer")
	}
	if o, e := Serialize(nil, nil); o != nil || e != nil {
		t.Error("Serialize made writers of nil")
	}
	o, e := Serialize(&a, &a)
	lo, ok1 := o.(*lockedWriter)
	le, ok2 := e.(*lockedWriter)
	if !ok1 || !ok2 || lo.mu != le.mu {
		t.Fatalf("Serialize(w, w) = %T, %T; want two lockedWriters on one lock", o, e)
	}
}

// Both streams into one buffer: the race detector fails this test if the
// two copies ever write it at once.
func TestSerialize_OneBufferForBothStreams(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	cmd := shellCommand(t, t.TempDir(), "head -c 100000 /dev/zero & head -c 100000 /dev/zero >&2; wait")
	cmd.Stdout, cmd.Stderr = Serialize(&buf, &buf)
	if res := run(t, context.Background(), cmd); res.ExitCode != 0 {
		t.Fatalf("exit %d", res.ExitCode)
	}
	if buf.Len() != 200000 {
		t.Errorf("got %d bytes, want 200000", buf.Len())
	}
}
