package image

import (
	"math"
	"os"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/moby/moby/api/types/container"

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
	defer f.Close()
	st, err := decodeStats(f)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func TestUsageOf_Captured(t *testing.T) {
	a, b := usageOf(readStatsFixture(t, "stats-oneshot-1.json")), usageOf(readStatsFixture(t, "stats-oneshot-2.json"))
	// docker stats' figure for the pair: 712830984 ns of CPU time over
	// 4.42 s of host CPU time on 2 CPUs.
	if got := float64(b.CPU-a.CPU) / float64(b.Clock-a.Clock) * 100; math.Abs(got-32.254) > 0.001 {
		t.Errorf("CPU between the two answers = %.3f %%, want 32.254", got)
	}
	want := sandbox.Usage{Instance: b.Instance, CPU: b.CPU, Clock: b.Clock, Memory: 9428992 - 8388608, MemoryLimit: 64 << 20, Pids: 2, PidsLimit: 64}
	if diff := cmp.Diff(want, b); diff != "" || b.Instance == "" || b.Instance != a.Instance {
		t.Errorf("usage of stats-oneshot-2.json (-want +got):\n%s\ninstances %q, %q", diff, a.Instance, b.Instance)
	}
}

func TestUsageOf_Clock(t *testing.T) {
	st := container.StatsResponse{CPUStats: container.CPUStats{CPUUsage: container.CPUUsage{TotalUsage: 5}, SystemUsage: 8_000_000_000, OnlineCPUs: 4}}
	if u := usageOf(st); u.Clock != 2*time.Second || u.CPU != 5 {
		t.Errorf("4 CPUs: clock %v, CPU %v; want 2s, 5ns", u.Clock, u.CPU)
	}
	// Without online_cpus (old engines), the per-CPU counters count.
	st.CPUStats.OnlineCPUs = 0
	st.CPUStats.CPUUsage.PercpuUsage = []uint64{1, 2}
	if u := usageOf(st); u.Clock != 4*time.Second {
		t.Errorf("2 per-CPU counters: clock %v, want 4s", u.Clock)
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
