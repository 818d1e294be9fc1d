package image

import (
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/moby/moby/api/types/container"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/sandbox"
)

// readStatsFixture decodes a stats answer captured from a real engine (Docker
// 20.10.24, cgroup v1) for a busybox container limited to 0.5 CPU, 64 MiB
// and 64 pids, spinning a shell loop, with 8 MiB written to its layer (page
// cache, left out of its memory use):
//
//	stats-oneshot-1.json  GET /containers/{name}/stats?stream=false&one-shot=true
//	stats-oneshot-2.json  the same, 2.2 s later
func readStatsFixture(t *testing.T, name string) container.StatsResponse {
	t.Helper()
	f, err := os.Open("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	st, err := decodeStats(f)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func TestUsageOf_Captured(t *testing.T) {
	sa, sb := readStatsFixture(t, "stats-oneshot-1.json"), readStatsFixture(t, "stats-oneshot-2.json")
	a, b := usageOf(sa), usageOf(sb)
	// 712830984 ns of CPU time over the 2.2 s between the engine's reads;
	// docker stats' own figure, over the host's CPU time, is 32.254 %.
	if d := sb.Read.Sub(sa.Read); b.Clock-a.Clock != d || d < 2*time.Second || d > 2500*time.Millisecond {
		t.Errorf("clocks %v apart, the reads %v", b.Clock-a.Clock, d)
	}
	if got := float64(b.CPU-a.CPU) / float64(b.Clock-a.Clock) * 100; math.Abs(got-32.254) > 1 {
		t.Errorf("CPU between the two answers = %.3f %%, want docker stats' 32.254 within a point", got)
	}
	want := sandbox.Usage{Instance: b.Instance, CPU: b.CPU, Clock: b.Clock, Memory: 9428992 - 8388608, MemoryLimit: 64 << 20, Pids: 2, PidsLimit: 64}
	if diff := cmp.Diff(want, b); diff != "" || b.Instance == "" || b.Instance != a.Instance || b.CPU-a.CPU != 712830984 {
		t.Errorf("usage of stats-oneshot-2.json (-want +got):\n%s\ninstances %q, %q", diff, a.Instance, b.Instance)
	}
}

func TestDecodeStats_NotRunning(t *testing.T) {
	// Podman's answer for a container that is not running: no body.
	if _, err := decodeStats(strings.NewReader("")); !errdefs.IsNotFound(err) {
		t.Errorf("an empty answer: %v, want NotFound", err)
	}
	if _, err := decodeStats(strings.NewReader("{")); err == nil || errdefs.IsNotFound(err) {
		t.Errorf("a cut answer: %v, want a plain error", err)
	}
}

func TestMemUsed(t *testing.T) {
	for _, c := range []struct {
		name  string
		stats map[string]uint64
		want  uint64
	}{
		{"cgroup v1", map[string]uint64{"total_inactive_file": 300, "inactive_file": 100}, 700},
		{"cgroup v2", map[string]uint64{"inactive_file": 250}, 750},
		{"cache over usage", map[string]uint64{"inactive_file": 2000}, 1000},
		{"no stats", nil, 1000},
	} {
		if got := memUsed(container.MemoryStats{Usage: 1000, Stats: c.stats}); got != c.want {
			t.Errorf("%s: memUsed = %d, want %d", c.name, got, c.want)
		}
	}
}
