package agent

import (
	"log/slog"

	"github.com/hutchsandbox/hutch/internal/supervise"
)

// reaper is the agent's handle on the process's one reaper, which package
// supervise owns along with everything else that starts and ends a
// command: Run makes it reap every child when the agent is init, and a
// guest's power-off kills every command through it.
type reaper struct{}

// processReaper returns the handle; the reaper itself starts on first use.
func processReaper() *reaper { return &reaper{} }

// reapAll is supervise.ReapAll.
func (*reaper) reapAll(log *slog.Logger) { supervise.ReapAll(log) }

// killAll is supervise.KillAll.
func (*reaper) killAll() int { return supervise.KillAll() }
