package metrics_test

import (
	"context"
	"errors"
	"io"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/metrics"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/testenv"
)

// runtimes are three running runtimes and a stopped one; the second
// stopped between the listing and its reading, the third's engine does
// not answer.
type runtimes struct{}

func (runtimes) List(context.Context) ([]sandbox.Status, error) {
	return []sandbox.Status{
		{OfficeKey: "v1-web-a-0123456789abcdef", State: sandbox.StateRunning, Limits: sandbox.Limits{CPUs: 1.5, MemoryBytes: 1 << 30, Pids: 512}},
		{OfficeKey: "v1-web-b-0123456789abcdef", State: sandbox.StateRunning},
		{OfficeKey: "v1-web-c-0123456789abcdef", State: sandbox.StateStopped},
		{OfficeKey: "v1-web-d-0123456789abcdef", State: sandbox.StateRunning},
	}, nil
}

func (runtimes) Usage(_ context.Context, key string) (sandbox.Usage, error) {
	switch key {
	case "v1-web-b-0123456789abcdef":
		return sandbox.Usage{}, errdefs.New(errdefs.ErrNotFound, "not running")
	case "v1-web-d-0123456789abcdef":
		return sandbox.Usage{}, errdefs.New(errdefs.ErrUnavailable, "the engine did not answer")
	}
	return sandbox.Usage{Instance: "c1", CPU: 2500 * time.Millisecond, Memory: 8 << 20, MemoryLimit: 1 << 30, Pids: 3, PidsLimit: 512}, nil
}

func scrape(t *testing.T, s *metrics.Set) string {
	t.Helper()
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	return string(body)
}

func TestSet_ExposesCommandsEventsAndRuntimes(t *testing.T) {
	s := metrics.New("1.2.3")
	s.Command(sandbox.KindImage, sandbox.ExecResult{}, nil, false, 3*time.Millisecond)
	s.Command(sandbox.KindImage, sandbox.ExecResult{ExitCode: 2}, nil, false, time.Millisecond)
	s.Command(sandbox.KindImage, sandbox.ExecResult{TimedOut: true, ExitCode: -1}, nil, false, time.Second)
	s.Command(sandbox.KindHost, sandbox.ExecResult{}, nil, true, 0)
	s.Command(sandbox.KindHost, sandbox.ExecResult{}, errors.New("x"), false, 0)
	s.Event(sandbox.KindImage, metrics.EventCreated, 1)
	s.Event(sandbox.KindImage, metrics.EventIdleStop, 2)
	s.Placeholder("substituted", "")
	s.Placeholder("refused", "host not listed for this secret")
	s.Refusal(metrics.SurfaceAPI, metrics.ReasonAdmission)
	s.Refusal(metrics.SurfaceAPI, metrics.ReasonAdmission)
	s.Refusal(metrics.SurfacePortal, metrics.ReasonForbidden)
	s.Refusal(metrics.SurfaceMCP, "")                    // no reason: not counted
	s.Refusal(metrics.SurfaceMCP, "conversation C123")   // not a reason: not counted
	s.Refusal(metrics.ReasonNetwork, metrics.SurfaceAPI) // the labels swapped: not counted
	s.WatchRuntimes(sandbox.KindImage, func(context.Context) (metrics.Runtimes, error) { return runtimes{}, nil })
	body := scrape(t, s)
	for _, want := range []string{
		`hutch_commands_total{mode="image",outcome="ok"} 1`,
		`hutch_commands_total{mode="image",outcome="failed"} 1`,
		`hutch_commands_total{mode="image",outcome="timeout"} 1`,
		`hutch_commands_total{mode="host",outcome="refused"} 1`,
		`hutch_commands_total{mode="host",outcome="error"} 1`,
		`hutch_exec_duration_seconds_count{mode="image"} 3`,
		`hutch_runtime_events_total{event="created",mode="image"} 1`,
		`hutch_runtime_events_total{event="idle_stop",mode="image"} 2`,
		`hutch_runtimes_up{mode="image"} 1`,
		`hutch_runtimes{mode="image",state="running"} 3`,
		`hutch_runtimes_unread{mode="image"} 1`,
		`hutch_runtimes{mode="image",state="stopped"} 1`,
		`hutch_egress_placeholders_total{kind="substituted",reason=""} 1`,
		`hutch_egress_placeholders_total{kind="refused",reason="host not listed for this secret"} 1`,
		`hutch_refusals_total{reason="admission",surface="api"} 2`,
		`hutch_refusals_total{reason="forbidden",surface="portal"} 1`,
		`hutch_runtime_cpu_seconds_total{mode="image",office_key="v1-web-a-0123456789abcdef"} 2.5`,
		`hutch_runtime_cpu_limit{mode="image",office_key="v1-web-a-0123456789abcdef"} 1.5`,
		`hutch_runtime_memory_bytes{mode="image",office_key="v1-web-a-0123456789abcdef"} 8.388608e+06`,
		`hutch_runtime_memory_limit_bytes{mode="image",office_key="v1-web-a-0123456789abcdef"} 1.073741824e+09`,
		`hutch_runtime_processes{mode="image",office_key="v1-web-a-0123456789abcdef"} 3`,
		`hutch_runtime_processes_limit{mode="image",office_key="v1-web-a-0123456789abcdef"} 512`,
		`hutch_build_info{commit="`,
		`goversion="` + runtime.Version() + `",version="1.2.3"} 1`,
		`go_goroutines`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	// A runtime that is not read, or not running, has no series.
	for _, absent := range []string{`office_key="v1-web-b-`, `office_key="v1-web-c-`, `office_key="v1-web-d-`, `surface="network"`, `reason="conversation C123"`, `hutch_refusals_total{reason=""`} {
		if strings.Contains(body, absent) {
			t.Errorf("metrics have %s", absent)
		}
	}
	// Every refusal series is there from the start, at 0 until counted,
	// so that an alert's increase() sees the first one: 5 surfaces, 7
	// reasons.
	if n := strings.Count(body, "\nhutch_refusals_total{"); n != 35 {
		t.Errorf("%d refusal series, want 35", n)
	}
	for _, want := range []string{`hutch_refusals_total{reason="network",surface="egress"} 0`, `hutch_refusals_total{reason="ceiling",surface="mcp"} 0`} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	testenv.CheckMetrics(t, []byte(body))
	var nilSet *metrics.Set
	nilSet.Command(sandbox.KindHost, sandbox.ExecResult{}, nil, false, 0) // must not panic
	nilSet.Placeholder("refused", "expired")
	nilSet.Refusal(metrics.SurfaceAPI, metrics.ReasonCeiling)
}

// TestSet_RuntimesUnlisted: when the runtimes cannot be listed,
// hutch_runtimes_up says so and the rest is still served.
func TestSet_RuntimesUnlisted(t *testing.T) {
	s := metrics.New("")
	s.Refusal(metrics.SurfaceChat, metrics.ReasonNotSupported)
	s.WatchRuntimes(sandbox.KindKube, func(context.Context) (metrics.Runtimes, error) {
		return nil, errdefs.New(errdefs.ErrUnavailable, "the cluster did not answer")
	})
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body := rec.Body.String()
	if rec.Code != 200 {
		t.Errorf("status %d, want 200", rec.Code)
	}
	for _, want := range []string{`hutch_runtimes_up{mode="kube"} 0`, `hutch_refusals_total{reason="not_supported",surface="chat"} 1`} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if strings.Contains(body, "hutch_runtimes{") {
		t.Error("metrics count runtimes that could not be listed")
	}
	testenv.CheckMetrics(t, []byte(body))
}
