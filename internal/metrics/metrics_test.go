package metrics_test

import (
	"context"
	"errors"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/internal/metrics"
	"github.com/hutchsandbox/hutch/internal/sandbox"
)

func TestSet_ExposesCommandsEventsAndRuntimes(t *testing.T) {
	s := metrics.New()
	s.Command(sandbox.KindImage, sandbox.ExecResult{}, nil, false, 3*time.Millisecond)
	s.Command(sandbox.KindImage, sandbox.ExecResult{ExitCode: 2}, nil, false, time.Millisecond)
	s.Command(sandbox.KindImage, sandbox.ExecResult{TimedOut: true, ExitCode: -1}, nil, false, time.Second)
	s.Command(sandbox.KindHost, sandbox.ExecResult{}, nil, true, 0)
	s.Command(sandbox.KindHost, sandbox.ExecResult{}, errors.New("x"), false, 0)
	s.Event(sandbox.KindImage, metrics.EventCreated, 1)
	s.Event(sandbox.KindImage, metrics.EventIdleStop, 2)
	s.Placeholder("substituted", "")
	s.Placeholder("refused", "host not listed for this secret")
	s.WatchRuntimes(sandbox.KindImage, func(context.Context) ([]sandbox.Status, error) {
		return []sandbox.Status{{State: sandbox.StateRunning}, {State: sandbox.StateRunning}, {State: sandbox.StateStopped}}, nil
	})
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	for _, want := range []string{
		`hutch_commands_total{mode="image",outcome="ok"} 1`,
		`hutch_commands_total{mode="image",outcome="failed"} 1`,
		`hutch_commands_total{mode="image",outcome="timeout"} 1`,
		`hutch_commands_total{mode="host",outcome="refused"} 1`,
		`hutch_commands_total{mode="host",outcome="error"} 1`,
		`hutch_exec_duration_seconds_count{mode="image"} 3`,
		`hutch_runtime_events_total{event="created",mode="image"} 1`,
		`hutch_runtime_events_total{event="idle_stop",mode="image"} 2`,
		`hutch_runtimes{mode="image",state="running"} 2`,
		`hutch_runtimes{mode="image",state="stopped"} 1`,
		`hutch_egress_placeholders_total{kind="substituted",reason=""} 1`,
		`hutch_egress_placeholders_total{kind="refused",reason="host not listed for this secret"} 1`,
		`go_goroutines`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	var nilSet *metrics.Set
	nilSet.Command(sandbox.KindHost, sandbox.ExecResult{}, nil, false, 0) // must not panic
	nilSet.Placeholder("refused", "expired")
}
