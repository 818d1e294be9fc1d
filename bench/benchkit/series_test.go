package benchkit

import (
	"context"
	"errors"
	"math"
	"slices"
	"testing"
	"time"
)

func TestSeries_Pct(t *testing.T) {
	s := &Series{}
	if got := s.Pct(50); got != 0 {
		t.Errorf("Pct(50) of no times = %v, want 0", got)
	}
	for _, ms := range []int{5, 1, 4, 2, 3} {
		s.Record(time.Duration(ms)*time.Millisecond, nil)
	}
	s.Record(time.Hour, errors.New("boom"))
	for _, tc := range []struct {
		p    float64
		want time.Duration
	}{{1, time.Millisecond}, {50, 3 * time.Millisecond}, {90, 5 * time.Millisecond}, {100, 5 * time.Millisecond}} {
		if got := s.Pct(tc.p); got != tc.want {
			t.Errorf("Pct(%v) = %v, want %v", tc.p, got, tc.want)
		}
	}
	if s.Fail != 1 || s.Err == nil || len(s.Times) != 5 {
		t.Errorf("after one failure: Fail %d, Err %v, %d times; want 1, boom, 5", s.Fail, s.Err, len(s.Times))
	}
}

func TestMs(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{{0, "-"}, {1234567, "1.23 ms"}, {12345678, "12.3 ms"}, {12 * time.Second, "12.0 s"}} {
		if got := Ms(tc.d); got != tc.want {
			t.Errorf("Ms(%v) = %q, want %q", tc.d, got, tc.want)
		}
	}
	if !math.IsNaN(Ratio(time.Second, 0)) {
		t.Errorf("Ratio(1s, 0) = %v, want NaN", Ratio(time.Second, 0))
	}
}

func TestInterleave(t *testing.T) {
	var order []string
	path := func(name string, err error) *Series {
		return &Series{Name: name, Run: func() error { order = append(order, name); return err }}
	}
	a, b, c := path("a", nil), path("b", errors.New("b failed")), path("c", nil)

	// Each round starts one path later, so that no path always goes first.
	if err := Interleave(context.Background(), Rounds{N: 3, KeepGoing: true}, []*Series{a, b, c}); err != nil {
		t.Fatal(err)
	}
	if want := []string{"a", "b", "c", "b", "c", "a", "c", "a", "b"}; !slices.Equal(order, want) {
		t.Errorf("order %v, want %v", order, want)
	}
	if len(a.Times) != 3 || b.Fail != 3 || len(b.Times) != 0 {
		t.Errorf("a has %d times, b %d failures and %d times; want 3, 3, 0", len(a.Times), b.Fail, len(b.Times))
	}

	// Without KeepGoing the first failure ends the rounds.
	order = nil
	err := Interleave(context.Background(), Rounds{N: 3}, []*Series{path("x", nil), path("y", errors.New("y failed"))})
	if err == nil || err.Error() != "y: y failed" || !slices.Equal(order, []string{"x", "y"}) {
		t.Errorf("err %v after %v, want y: y failed after [x y]", err, order)
	}

	// WarmUp records nothing in the paths it warms up.
	w := path("w", nil)
	if err := WarmUp(context.Background(), Rounds{N: 2}, []*Series{w}); err != nil || len(w.Times) != 0 {
		t.Errorf("WarmUp: err %v, %d times recorded; want nil, 0", err, len(w.Times))
	}
	if err := WarmUp(context.Background(), Rounds{N: 2, KeepGoing: true}, []*Series{w, b}); err == nil || err.Error() != "b: b failed" {
		t.Errorf("WarmUp with a failing path: err %v, want b: b failed", err)
	}
}
