// Package metrics holds hutch's Prometheus metrics: commands by mode and
// outcome, exec latency, runtimes by state, provisioning events (created,
// started, re-created) and idle stops. A Set is made once per daemon and
// injected; nothing here is global, and no label ever carries a secret or
// a command line: only modes, outcomes and states.
package metrics

import (
	"context"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/hutchsandbox/hutch/internal/sandbox"
)

// Set is one registry of hutch's metrics.
type Set struct {
	reg       *prometheus.Registry
	commands  *prometheus.CounterVec
	latency   *prometheus.HistogramVec
	lifecycle *prometheus.CounterVec
	egress    *prometheus.CounterVec
}

// Outcomes of a command, the values of the outcome label.
const (
	OutcomeOK       = "ok"      // exit 0
	OutcomeFailed   = "failed"  // ran, exited non-zero or by a signal
	OutcomeTimeout  = "timeout" // killed at its deadline
	OutcomeAborted  = "aborted" // cancelled by its caller
	OutcomeOOM      = "oom"     // killed for memory
	OutcomeRefused  = "refused" // policy refused it before it ran
	OutcomeError    = "error"   // could not be started
	EventCreated    = "created" // a runtime was created
	EventStarted    = "started" // a stopped runtime was started
	EventRecreated  = "recreated"
	EventIdleStop   = "idle_stop"
	EventDiskStop   = "disk_stop" // stopped over the disk ceiling
	EventReconciled = "reconciled"
)

// New makes a Set with Go runtime and process collectors.
func New() *Set {
	s := &Set{
		reg: prometheus.NewRegistry(),
		commands: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hutch_commands_total", Help: "Commands by mode and outcome.",
		}, []string{"mode", "outcome"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "hutch_exec_duration_seconds", Help: "Wall time of commands, provisioning included.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300},
		}, []string{"mode"}),
		lifecycle: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hutch_runtime_events_total", Help: "Runtime lifecycle events: created, started, recreated, idle_stop, reconciled.",
		}, []string{"mode", "event"}),
		egress: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hutch_egress_placeholders_total", Help: "Placeholder secrets the egress proxies substituted or refused, by what happened and why (a refusal toward an unlisted host is an attempted exfiltration).",
		}, []string{"kind", "reason"}),
	}
	s.reg.MustRegister(s.commands, s.latency, s.lifecycle, s.egress, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return s
}

// Command records one command's outcome and duration. A nil Set records nothing.
func (s *Set) Command(mode sandbox.Kind, res sandbox.ExecResult, err error, refused bool, d time.Duration) {
	if s == nil {
		return
	}
	outcome := OutcomeOK
	switch {
	case refused:
		outcome = OutcomeRefused
	case err != nil:
		outcome = OutcomeError
	case res.TimedOut:
		outcome = OutcomeTimeout
	case res.Aborted:
		outcome = OutcomeAborted
	case res.OOMKilled:
		outcome = OutcomeOOM
	case res.ExitCode != 0:
		outcome = OutcomeFailed
	}
	s.commands.WithLabelValues(string(mode), outcome).Inc()
	if err == nil && !refused {
		s.latency.WithLabelValues(string(mode)).Observe(d.Seconds())
	}
}

// Event records a runtime lifecycle event.
func (s *Set) Event(mode sandbox.Kind, event string, n int) {
	if s == nil || n <= 0 {
		return
	}
	s.lifecycle.WithLabelValues(string(mode), event).Add(float64(n))
}

// Placeholder records one use of a placeholder secret: kind is
// "substituted" or "refused", reason why a refusal was made ("" for a
// substitution). Names, hosts and values never become labels.
func (s *Set) Placeholder(kind, reason string) {
	if s == nil {
		return
	}
	s.egress.WithLabelValues(kind, reason).Inc()
}

// WatchRuntimes adds a gauge of runtimes by state, read at each scrape
// from list (the managed runtimes of the daemon's mode).
func (s *Set) WatchRuntimes(mode sandbox.Kind, list func(ctx context.Context) ([]sandbox.Status, error)) {
	s.reg.MustRegister(&runtimeCollector{mode: mode, list: list, desc: prometheus.NewDesc(
		"hutch_runtimes", "Managed runtimes by state.", []string{"mode", "state"}, nil)})
}

// Handler serves the metrics in the Prometheus text format.
func (s *Set) Handler() http.Handler {
	return promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{})
}

type runtimeCollector struct {
	mode sandbox.Kind
	list func(ctx context.Context) ([]sandbox.Status, error)
	desc *prometheus.Desc
}

func (c *runtimeCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *runtimeCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	list, err := c.list(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.desc, err)
		return
	}
	counts := map[sandbox.RuntimeState]int{sandbox.StateRunning: 0, sandbox.StateStopped: 0}
	for _, st := range list {
		counts[st.State]++
	}
	for state, n := range counts {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n), string(c.mode), string(state))
	}
}
