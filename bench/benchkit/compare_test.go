package benchkit

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/internal/agent"
	"github.com/hutchsandbox/hutch/internal/sandbox"
)

func TestComparison_Print(t *testing.T) {
	series := func(name string, ms ...int) *Series {
		s := &Series{Name: name}
		for _, m := range ms {
			s.Record(time.Duration(m)*time.Millisecond, nil)
		}
		return s
	}
	failed := series("image start", 100)
	failed.Record(0, errors.New("boom"))
	c := &Comparison{
		Title:   "2. Warm exec",
		Subject: "kube",
		Base:    "image",
		Rows: []Row{
			{Name: "Runtime.Exec `true`", Subject: series("kube Runtime.Exec", 20, 40, 30), Base: series("image Runtime.Exec", 10, 20, 15)},
			{Name: "diag: start", Subject: series("kube new pod"), Base: failed},
		},
		Legend: []string{"Runtime.Exec: what a service call does.", "diag start: the path a start takes."},
		Rounds: 3, WarmUp: 5,
	}
	var b strings.Builder
	c.Print(&b)
	want := `
2. Warm exec, 3 rounds interleaved after 5 warm-up rounds
operation            kube p50  kube p90  image p50  image p90  ratio p50  ratio p90  runs k+i  failed k+i
Runtime.Exec ` + "`true`" + `  30.0 ms   40.0 ms   15.0 ms    20.0 ms    2.00       2.00       3+3       0+0
diag: start          -         -         100.0 ms   100.0 ms   0.00       0.00       0+1       0+1
  Runtime.Exec: what a service call does.
  diag start: the path a start takes.
  first failure of image start: boom
`
	if got := b.String(); got != want {
		t.Errorf("Print wrote\n%s\nwant\n%s", got, want)
	}

	// Without warm-up the title names the rounds alone.
	c.WarmUp = 0
	b.Reset()
	c.Print(&b)
	if first, _, _ := strings.Cut(strings.TrimPrefix(b.String(), "\n"), "\n"); first != "2. Warm exec, 3 rounds interleaved" {
		t.Errorf("title without warm-up: %q, want %q", first, "2. Warm exec, 3 rounds interleaved")
	}
}

func TestComparison_Series(t *testing.T) {
	a, b, c, d := &Series{Name: "a"}, &Series{Name: "b"}, &Series{Name: "c"}, &Series{Name: "d"}
	cmp := &Comparison{Rows: []Row{{Subject: a, Base: b}, {Subject: c, Base: d}}}
	got := cmp.Series()
	if len(got) != 4 || got[0] != a || got[1] != b || got[2] != c || got[3] != d {
		t.Errorf("Series: %v, want subject and base alternating, row by row", got)
	}
}

func TestWriteCommand(t *testing.T) {
	// The benches' legends print WriteCommand as "head -c 16777216 …".
	if want := "head -c 16777216 /dev/zero > bench-cmd.bin"; WriteCommand != want {
		t.Errorf("WriteCommand = %q, want %q", WriteCommand, want)
	}
}

// fakeRuntime runs every command at once, exiting 0, and tells its event
// hook "started" when start is set.
type fakeRuntime struct {
	event func(string)
	start bool
}

func (*fakeRuntime) Mode() sandbox.Mode                 { return sandbox.Mode{} }
func (*fakeRuntime) Capabilities() sandbox.Capabilities { return sandbox.Capabilities{} }
func (*fakeRuntime) Agent(context.Context, sandbox.Spec) (*agent.Client, error) {
	return nil, errors.New("no agent")
}

// Files reaches nothing: no file row runs against the fake.
func (*fakeRuntime) Files(spec sandbox.Spec) sandbox.Files {
	return sandbox.ConfinedFiles(func(context.Context) (sandbox.Confined, error) { return nil, errors.New("no files") }, spec.OfficeRuntimePath, nil)
}

func (r *fakeRuntime) Exec(context.Context, sandbox.Spec, sandbox.ExecRequest) (sandbox.ExecResult, error) {
	if r.start {
		r.event("started")
	}
	return sandbox.ExecResult{}, nil
}

func TestMode_ColdStart(t *testing.T) {
	m := &Mode{Name: "fake", StartEvents: []string{"started"}}
	rt := &fakeRuntime{event: m.Event}
	m.Runtime = rt
	downs := 0
	s := m.ColdStart(context.Background(), "boot", func(context.Context) error { downs++; return nil }, "booted")
	if s.Name != "fake boot" {
		t.Errorf("Name %q, want %q", s.Name, "fake boot")
	}

	// A runtime that reports a start passes; one that does not fails the
	// run, so that a warm command never counts as a cold start.
	rt.start = true
	if err := Interleave(context.Background(), Rounds{N: 2, KeepGoing: true}, []*Series{s}); err != nil {
		t.Fatal(err)
	}
	rt.start = false
	if err := Interleave(context.Background(), Rounds{N: 1, KeepGoing: true}, []*Series{s}); err != nil {
		t.Fatal(err)
	}
	if len(s.Times) != 2 || s.Fail != 1 || downs != 3 {
		t.Errorf("%d times, %d failures, %d downs; want 2, 1, 3", len(s.Times), s.Fail, downs)
	}
	if want := "the runtime reported no start: nothing was booted"; s.Err == nil || s.Err.Error() != want {
		t.Errorf("Err %v, want %s", s.Err, want)
	}
}
