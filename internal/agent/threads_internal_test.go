package agent

import (
	"os"
	"testing"
)

// TestWarmThreads: after warmThreads the process holds at least that
// many OS threads, idle and kept for later.
func TestWarmThreads(t *testing.T) {
	warmThreads(initThreads)
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Skip("no /proc/self/task here")
	}
	if len(tasks) < initThreads {
		t.Errorf("%d threads after warming %d", len(tasks), initThreads)
	}
}
