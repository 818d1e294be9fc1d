package mcpserver

import (
	"testing"

	"github.com/hutchsandbox/hutch/internal/sandbox"
)

func TestDescribe(t *testing.T) {
	limits := sandbox.Limits{CPUs: 2, MemoryBytes: 4 << 30, Pids: 1024}
	tests := []struct {
		name string
		st   sandbox.Status
		want string
	}{
		{"missing", sandbox.Status{State: sandbox.StateMissing},
			"State: not created yet (the next command creates it, with the default limits)"},
		{"stopped", sandbox.Status{State: sandbox.StateStopped, Limits: sandbox.Limits{CPUs: 0.5, MemoryBytes: 1 << 30, Pids: 1024}},
			"State: stopped (the next command starts it, with the default limits)\nLimits: 0.5 CPUs, 1GiB memory, 1024 processes\nBoosted: no\nTemporary limits: no"},
		{"boosted", sandbox.Status{State: sandbox.StateRunning, Limits: limits, Boosted: true},
			"State: running\nLimits: 2 CPUs, 4GiB memory, 1024 processes\nBoosted: yes\nTemporary limits: no\nBoosts and temporary limits last until the sandbox stops."},
		{"boosted_and_set", sandbox.Status{State: sandbox.StateRunning, Limits: limits, Boosted: true, TempLimits: true},
			"State: running\nLimits: 2 CPUs, 4GiB memory, 1024 processes\nBoosted: yes\nTemporary limits: yes\nBoosts and temporary limits last until the sandbox stops."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := describe(tt.st); got != tt.want {
				t.Errorf("describe got\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}
