package benchkit

import (
	"context"
	"fmt"
	"io"
	"math"
	"slices"
	"text/tabwriter"
	"time"
)

// Series is one measured path: what to run, and the times and failures
// it measured. A Series with no Run is filled by its caller through
// Record, for measurements Interleave cannot make (many goroutines at
// once).
type Series struct {
	Name string
	// Before, when set, runs untimed before each Run; its failure counts
	// as the run's, and Run is skipped.
	Before func() error
	// Run is the timed part.
	Run func() error
	// After, when set, runs untimed after each Run, failed or not: it
	// removes what Run made, so that the next round starts alike.
	After func()

	// Times holds the durations of the runs that succeeded, in order.
	Times []time.Duration
	// Fail counts the runs that failed, and Err is the first failure.
	Fail int
	Err  error
}

// Record adds one run: its duration, or, when err is set, a failure (a
// failed run is no measurement, so its duration is dropped).
func (s *Series) Record(d time.Duration, err error) {
	if err != nil {
		s.Fail++
		if s.Err == nil {
			s.Err = err
		}
		return
	}
	s.Times = append(s.Times, d)
}

// Pct is the nearest-rank p-th percentile (0 < p <= 100) of the times, 0
// when there are none. Nearest rank always names a time that was
// measured, which interpolation would not.
func (s *Series) Pct(p float64) time.Duration {
	if len(s.Times) == 0 {
		return 0
	}
	d := slices.Clone(s.Times)
	slices.Sort(d)
	i := int(math.Ceil(p/100*float64(len(d)))) - 1
	return d[min(max(i, 0), len(d)-1)]
}

// P50 is the median, Pct(50): the number the benches' ratios compare.
func (s *Series) P50() time.Duration { return s.Pct(50) }

// Rounds says how Interleave runs its paths.
type Rounds struct {
	// N is the number of rounds; each runs every path once.
	N int
	// Label names the rounds in progress lines ("warm exec: 20/200
	// rounds"); empty gives "20/200 rounds".
	Label string
	// Progress, when set, is told after every tenth of the rounds and
	// after the last.
	Progress Logf
	// KeepGoing records a failed run and goes on, for benches that report
	// failures as a column; without it the first failure ends the rounds
	// with its error, for benches where any failure voids the comparison.
	KeepGoing bool
}

// Interleave runs every path r.N times, round-robin, rotating which goes
// first each round so that drift and ordering effects hit all alike. It
// returns the context's error when interrupted, even in the last round:
// an interrupted round is no measurement.
func Interleave(ctx context.Context, r Rounds, paths []*Series) error {
	step := max(r.N/10, 1)
	for i := range r.N {
		if err := ctx.Err(); err != nil {
			return err
		}
		for j := range paths {
			p := paths[(i+j)%len(paths)]
			var err error
			if p.Before != nil {
				err = p.Before()
			}
			t0 := time.Now()
			if err == nil {
				err = p.Run()
			}
			p.Record(time.Since(t0), err)
			if p.After != nil {
				p.After()
			}
			if err != nil && !r.KeepGoing {
				return fmt.Errorf("%s: %w", p.Name, err)
			}
		}
		if r.Progress != nil && ((i+1)%step == 0 || i+1 == r.N) {
			if r.Label != "" {
				r.Progress("%s: %d/%d rounds", r.Label, i+1, r.N)
			} else {
				r.Progress("%d/%d rounds", i+1, r.N)
			}
		}
	}
	return ctx.Err()
}

// WarmUp runs the rounds on scratch copies of paths, so that nothing is
// recorded in them, and returns a failure of any path as its error: a path
// that fails while warming up would only measure its failures.
func WarmUp(ctx context.Context, r Rounds, paths []*Series) error {
	scratch := make([]*Series, len(paths))
	for i, p := range paths {
		scratch[i] = &Series{Name: p.Name, Before: p.Before, Run: p.Run, After: p.After}
	}
	if err := Interleave(ctx, r, scratch); err != nil {
		return err
	}
	for _, s := range scratch {
		if s.Fail > 0 {
			return fmt.Errorf("%s: %w", s.Name, s.Err)
		}
	}
	return nil
}

// Ms formats a time for a table: milliseconds with two decimals under
// 10 ms, where warm paths live and the difference matters, with one up to
// 10 s, seconds beyond, and "-" for 0 (a series with no successful run).
func Ms(d time.Duration) string {
	switch {
	case d == 0:
		return "-"
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.2f ms", float64(d)/1e6)
	case d < 10*time.Second:
		return fmt.Sprintf("%.1f ms", float64(d)/1e6)
	}
	return fmt.Sprintf("%.1f s", d.Seconds())
}

// Ratio is a/b, NaN when b is 0, so that a missing baseline shows as NaN
// in the table instead of a ratio that looks like a result.
func Ratio(a, b time.Duration) float64 {
	if b == 0 {
		return math.NaN()
	}
	return float64(a) / float64(b)
}

// Table is the tabwriter every report's tables use (two spaces between
// columns), so that all benches' tables look alike.
func Table(w io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0) }

// Printf and Println write a piece of a report (to stdout or a table over
// it) and drop the error: a bench whose standard output is gone (| head)
// goes on to its cleanup, and has nowhere else to say so.
func Printf(w io.Writer, format string, a ...any) { _, _ = fmt.Fprintf(w, format, a...) }

// Println is Printf's fmt.Fprintln.
func Println(w io.Writer, a ...any) { _, _ = fmt.Fprintln(w, a...) }
