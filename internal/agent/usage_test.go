package agent

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/hutchsandbox/hutch/internal/errdefs"
)

// fakeCgroup writes cgroup v2 files into a fresh directory.
func fakeCgroup(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestUsage_ReadsTheCgroupFiles(t *testing.T) {
	dir := fakeCgroup(t, map[string]string{
		"cpu.stat":       "usage_usec 123456\nuser_usec 100000\nsystem_usec 23456\n",
		"memory.current": "52428800\n",
		"memory.max":     "536870912\n",
		"memory.stat":    "anon 1000\nfile 9000\nactive_file 4000\ninactive_file 5000\n",
		"pids.current":   "7\n",
		"pids.max":       "max\n",
	})
	f := newFixture(t, &Server{usageDir: dir})
	before := time.Now()
	got, err := f.client.Usage(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := Usage{CPUUsec: 123456, MemoryCurrent: 52428800, MemoryMax: 536870912, InactiveFile: 5000, PidsCurrent: 7}
	if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(Usage{}, "MonotonicNs")); diff != "" {
		t.Errorf("usage (-want +got):\n%s", diff)
	}
	if got.MonotonicNs <= 0 {
		t.Errorf("MonotonicNs = %d, want the clock's reading", got.MonotonicNs)
	}
	// A second reading's clock has moved on by at least the time between.
	time.Sleep(20 * time.Millisecond)
	again, err := f.client.Usage(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Duration(again.MonotonicNs - got.MonotonicNs); d < 20*time.Millisecond || d > time.Since(before) {
		t.Errorf("clock moved %v between readings 20ms+ apart (%v in all)", d, time.Since(before))
	}
}

func TestUsage_OnlyCPU(t *testing.T) {
	// A cgroup without the memory and pids controllers has only cpu.stat.
	dir := fakeCgroup(t, map[string]string{"cpu.stat": "usage_usec 5\n"})
	got, err := readUsage(dir)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Usage{CPUUsec: 5}, got, cmpopts.IgnoreFields(Usage{}, "MonotonicNs")); diff != "" {
		t.Errorf("usage (-want +got):\n%s", diff)
	}
}

func TestUsage_Refusals(t *testing.T) {
	noCgroup := t.TempDir()
	f := newFixture(t, &Server{usageDir: noCgroup})
	_, err := f.client.Usage(context.Background())
	if !errdefs.IsNotSupported(err) || !strings.Contains(err.Error(), "Resource use cannot be read: "+noCgroup+" has neither cgroup v2's cpu.stat nor cgroup v1's cpuacct.usage") {
		t.Errorf("no cpu.stat: err = %v, want not supported, naming the directory", err)
	}
	for name, files := range map[string]map[string]string{
		"cpu":    {"cpu.stat": "usage_usec lots\n"},
		"memory": {"cpu.stat": "usage_usec 1\n", "memory.current": "a lot\n"},
	} {
		if _, err := readUsage(fakeCgroup(t, files)); err == nil || !strings.Contains(err.Error(), "is not a number") {
			t.Errorf("%s: err = %v, want a number refused", name, err)
		}
	}
}

func TestUsage_CgroupV1(t *testing.T) {
	// A container on a cgroup v1 host sees one hierarchy per controller.
	dir := t.TempDir()
	for name, content := range map[string]string{
		"cpuacct/cpuacct.usage":        "2500000000\n",
		"memory/memory.usage_in_bytes": "10485760\n",
		"memory/memory.limit_in_bytes": "9223372036854771712\n",
		"memory/memory.stat":           "cache 100\ninactive_file 7\ntotal_inactive_file 4096\n",
		"pids/pids.current":            "3\n",
		"pids/pids.max":                "100\n",
	} {
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := readUsage(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := Usage{CPUUsec: 2500000, MemoryCurrent: 10485760, InactiveFile: 4096, PidsCurrent: 3, PidsMax: 100}
	if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(Usage{}, "MonotonicNs")); diff != "" {
		t.Errorf("usage (-want +got):\n%s", diff)
	}
}

func TestUsage_ThisMachine(t *testing.T) {
	// The cgroup root of this machine, v2 or v1, as an agent reads its
	// own: burning CPU moves its CPU time.
	before, err := readUsage(ownCgroup)
	if err != nil {
		t.Fatal(err)
	}
	for start := time.Now(); time.Since(start) < 200*time.Millisecond; {
	}
	after, err := readUsage(ownCgroup)
	if err != nil {
		t.Fatal(err)
	}
	if d := after.CPUUsec - before.CPUUsec; d < 100_000 {
		t.Errorf("CPU time moved %d µs over 200 ms of busy loop, want at least 100000", d)
	}
}
