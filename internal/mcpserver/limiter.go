package mcpserver

import (
	"context"
	"fmt"
	"strings"

	"github.com/docker/go-units"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/settings"
	"github.com/hutchsandbox/hutch/internal/tools"
)

// limiter is the tools.Limiter of one office's managed runtime.
type limiter struct {
	rt  sandbox.Lifecycle
	key string
}

var _ tools.Limiter = (*limiter)(nil)

func (l *limiter) Status(ctx context.Context) (string, error) {
	st, err := l.rt.Status(ctx, l.key)
	if err != nil {
		return "", err
	}
	return describe(st), nil
}

func (l *limiter) SetLimits(ctx context.Context, cpus, memory string) (string, error) {
	var lim sandbox.Limits
	var err error
	if cpus != "" {
		if lim.CPUs, err = settings.ParseCPUs(cpus); err != nil {
			return "", err
		}
	}
	if memory != "" {
		if lim.MemoryBytes, err = settings.ParseMemory(memory); err != nil {
			return "", err
		}
	}
	st, err := l.rt.SetLimits(ctx, l.key, lim)
	if errdefs.IsNotFound(err) {
		return "", errdefs.New(errdefs.ErrFailedPrecondition, "This conversation's sandbox has not been created yet; temporary limits last one run of it, so run a command first")
	}
	if err != nil {
		return "", err
	}
	return "Temporary limits set.\n" + describe(st), nil
}

// describe renders a runtime's status for the agent.
func describe(st sandbox.Status) string {
	if st.State == sandbox.StateMissing {
		return "State: not created yet (the next command creates it, with the default limits)"
	}
	var b strings.Builder
	b.WriteString("State: " + string(st.State))
	if st.State == sandbox.StateStopped {
		b.WriteString(" (the next command starts it, with the default limits)")
	}
	fmt.Fprintf(&b, "\nLimits: %s, %s memory, %d processes",
		sandbox.CPUCount(st.Limits.CPUs), units.BytesSize(float64(st.Limits.MemoryBytes)), st.Limits.Pids)
	fmt.Fprintf(&b, "\nBoosted: %s\nTemporary limits: %s", yesNo(st.Boosted), yesNo(st.TempLimits))
	if st.Boosted || st.TempLimits {
		b.WriteString("\nBoosts and temporary limits last until the sandbox stops.")
	}
	return b.String()
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
