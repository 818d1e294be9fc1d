package service

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hutchsandbox/hutch/internal/events"
	"github.com/hutchsandbox/hutch/internal/projection"
	"github.com/hutchsandbox/hutch/internal/sandbox"
)

// Events is the event log every change made through this service goes
// to (package events).
func (s *Service) Events() *events.Log { return s.events }

// SetSurface sets the surface of the changes whose context names none
// (events.WithActor): "cli" by default, "daemon" in the daemon, whose
// surfaces (API, chat, MCP, portal) each name themselves.
func (s *Service) SetSurface(surface string) { s.surface = surface }

// SetOperator names the user who runs this process's hutch command: the
// who of the changes it records under the surface cli.
func (s *Service) SetOperator(who string) { s.operator = who }

// Record appends a change to the event log, its surface and who from
// ctx's actor (or the service's surface). detail holds names and
// reasons, never a value. A log that cannot be written is logged: the
// change already happened.
func (s *Service) Record(ctx context.Context, action, target, detail string) {
	if s == nil || s.events == nil {
		return
	}
	e := events.Event{Surface: s.surface, Action: action, Target: target, Detail: detail}
	if s.surface == events.SurfaceCLI {
		e.Who = s.operator
	}
	if a, ok := events.ActorFrom(ctx); ok {
		if a.Surface != "" {
			e.Surface = a.Surface
		}
		e.Who = a.Who
	}
	if err := s.events.Append(e); err != nil {
		s.log.Warn("could not write the event log", "action", action, "error", err)
	}
}

// RuntimeChanged records a runtime a managed mode made or re-created:
// the hook (Config.Changed) of every managed mode this service makes.
// Tests that inject a runtime (SetRuntime) hand it to theirs.
func (s *Service) RuntimeChanged(ctx context.Context, c sandbox.Change) {
	switch c.Event {
	case "created":
		s.Record(ctx, events.RuntimeCreated, c.OfficeKey, c.From)
	case "recreated":
		s.Record(ctx, events.RuntimeRecreated, c.OfficeKey, c.Because)
	}
}

// doorDetail is the event detail of a door setting: its policy in the
// vocabulary's form (trusted/shared-support/public), or "default".
func doorDetail(setting *projection.Setting) string {
	if setting == nil {
		return "default"
	}
	var parts []string
	for _, p := range []string{setting.DoorPolicy, setting.Layout, setting.Visibility} {
		if p != "" {
			parts = append(parts, p)
		}
	}
	return strings.Join(parts, "/")
}

// limitsDetail says limits in the words the CLI takes them in.
func limitsDetail(l sandbox.Limits) string {
	var parts []string
	if l.CPUs != 0 {
		parts = append(parts, fmt.Sprintf("cpus=%g", l.CPUs))
	}
	if l.MemoryBytes != 0 {
		parts = append(parts, fmt.Sprintf("memory=%dMiB", l.MemoryBytes>>20))
	}
	if l.Pids != 0 {
		parts = append(parts, fmt.Sprintf("pids=%d", l.Pids))
	}
	if len(parts) == 0 {
		return "defaults"
	}
	return strings.Join(parts, " ")
}

// namesDetail lists the names of a map (a vault's variables), never its
// values.
func namesDetail[V any](m map[string]V) string {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	slices.Sort(names)
	return strings.Join(names, " ")
}

// placeholderDetail names a placeholder mark's name, hosts and expiry.
func placeholderDetail(name string, hosts []string, expires time.Time) string {
	d := name + " for " + strings.Join(hosts, ",")
	if !expires.IsZero() {
		d += " until " + expires.UTC().Format(time.RFC3339)
	}
	return d
}
