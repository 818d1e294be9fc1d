// Package metrics holds hutch's Prometheus metrics: commands by mode and
// outcome, exec latency, runtimes by state and each running runtime's CPU,
// memory and processes, provisioning events (created, started,
// re-created) and idle stops, refusals by surface and reason, and the
// build. A Set is made once per daemon and injected; nothing here is
// global, and no label ever carries a secret, a command line or a
// conversation id: only modes, outcomes, states, fixed reasons and the
// office keys of runtimes that exist. docs/metrics.md lists them all.
package metrics

import (
	"context"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/hutchsandbox/hutch/internal/buildinfo"
	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/events"
	"github.com/hutchsandbox/hutch/internal/sandbox"
)

// Set is one registry of hutch's metrics.
type Set struct {
	reg       *prometheus.Registry
	commands  *prometheus.CounterVec
	latency   *prometheus.HistogramVec
	lifecycle *prometheus.CounterVec
	egress    *prometheus.CounterVec
	refusals  *prometheus.CounterVec
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

// New makes a Set with Go runtime and process collectors. version is
// hutch_build_info's version label: the version hutch reports elsewhere
// (/v1/health), or "" for the module version in the build info.
func New(version string) *Set {
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
			Name: "hutch_runtime_events_total", Help: "Runtime lifecycle events: created, started, recreated, idle_stop, disk_stop, reconciled.",
		}, []string{"mode", "event"}),
		egress: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hutch_egress_placeholders_total", Help: "Placeholder secrets the egress proxies substituted or refused, by what happened and why (a refusal toward an unlisted host is an attempted exfiltration).",
		}, []string{"kind", "reason"}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hutch_refusals_total", Help: "Requests hutch refused, by the surface that answered (api, chat, mcp, portal, egress) and why (a fixed set: unauthorized, forbidden, admission, ceiling, failed_precondition, not_supported, network).",
		}, []string{"surface", "reason"}),
	}
	s.reg.MustRegister(s.commands, s.latency, s.lifecycle, s.egress, s.refusals, buildInfo(version),
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	s.zeroRefusals()
	return s
}

// The surfaces that count refusals: each serves callers, and answers a
// refusal there. They are the event log's surfaces of the same names:
// a refusal is counted and recorded under one name.
const (
	SurfaceAPI    = events.SurfaceAPI    // the HTTP API, on the socket or TCP
	SurfaceChat   = events.SurfaceChat   // /sandbox commands sent to /v1/chat
	SurfaceMCP    = events.SurfaceMCP    // the daemon's MCP endpoint (/mcp)
	SurfacePortal = events.SurfacePortal // the admin portal
	SurfaceEgress = events.SurfaceEgress // the egress proxies in front of runtimes
)

// The reasons of a refusal, the values of the reason label.
const (
	// ReasonUnauthorized: no or a wrong bearer token, or no portal
	// session.
	ReasonUnauthorized = "unauthorized"
	// ReasonForbidden: a portal request from another site, a form
	// without its CSRF token, or a sign-in link that is not valid.
	ReasonForbidden = "forbidden"
	// ReasonAdmission: the mode cannot give a conversation what its door
	// policy, vault or network setting asks for (sandbox.Admit).
	ReasonAdmission = "admission"
	// ReasonCeiling: a boost or temporary limits above the ceiling.
	ReasonCeiling = "ceiling"
	// ReasonFailedPrecondition: any other refusal of class
	// errdefs.ErrFailedPrecondition: a path outside the sandbox's
	// workspace, a runtime over its disk ceiling, a runtime that must
	// run first.
	ReasonFailedPrecondition = "failed_precondition"
	// ReasonNotSupported: the mode cannot do this at all.
	ReasonNotSupported = "not_supported"
	// ReasonNetwork: an egress proxy refused a connection or request by
	// the conversation's sandbox.network (a host not listed, network
	// none, a name resolving to an internal address).
	ReasonNetwork = "network"
)

// The values the refusal labels may take.
var (
	refusalSurfaces = []string{SurfaceAPI, SurfaceChat, SurfaceMCP, SurfacePortal, SurfaceEgress}
	refusalReasons  = []string{ReasonUnauthorized, ReasonForbidden, ReasonAdmission, ReasonCeiling,
		ReasonFailedPrecondition, ReasonNotSupported, ReasonNetwork}
)

// Refusal counts one refusal. surface and reason are of the constants
// above; any other value is not counted, so that no caller can grow the
// labels past them. A nil Set records nothing.
func (s *Set) Refusal(surface, reason string) {
	if s == nil || !slices.Contains(refusalSurfaces, surface) || !slices.Contains(refusalReasons, reason) {
		return
	}
	s.refusals.WithLabelValues(surface, reason).Inc()
}

// zeroRefusals makes every series of hutch_refusals_total, at 0: an
// alert on increase() or rate() sees the first refusal of a kind only
// when its series was there before it.
func (s *Set) zeroRefusals() {
	for _, surface := range refusalSurfaces {
		for _, reason := range refusalReasons {
			s.refusals.WithLabelValues(surface, reason)
		}
	}
}

// buildInfo is hutch_build_info: 1, labelled with the version, commit and
// Go version the binary was built from, read as hutch version reads them
// (buildinfo.Read): the -ldflags version, else the module's; "unknown"
// for a commit the build info does not name.
func buildInfo(version string) prometheus.Collector {
	b := buildinfo.Read(version)
	if b.Version == "" {
		b.Version = b.Module
	}
	commit := b.Commit
	if commit == "" {
		commit = "unknown"
	}
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "hutch_build_info", Help: "Always 1; its labels say which build of hutch runs.",
		ConstLabels: prometheus.Labels{"version": b.Version, "commit": commit, "goversion": b.GoVersion},
	})
	g.Set(1)
	return g
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

// Runtimes are the managed runtimes of a mode, as WatchRuntimes reads
// them: service.ManagedRuntime is one.
type Runtimes interface {
	List(ctx context.Context) ([]sandbox.Status, error)
	sandbox.UsageReader
}

// WatchRuntimes adds, read at each scrape from source (the managed
// runtimes of the daemon's mode): hutch_runtimes, the runtimes by state,
// and for each running runtime, labelled with its office key, its CPU
// time, memory, processes and limits. A runtime's series go when it stops
// or is removed: they are read from what runs at each scrape, never kept.
func (s *Set) WatchRuntimes(mode sandbox.Kind, source func(ctx context.Context) (Runtimes, error)) {
	s.reg.MustRegister(newRuntimeCollector(mode, source))
}

// Handler serves the metrics in the Prometheus text format.
func (s *Set) Handler() http.Handler {
	return promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{})
}

// The bounds of a scrape's readings: Prometheus's default scrape timeout
// is 10 s, and a runtime whose reading takes longer than scrapeBudget is
// left out of that scrape rather than failing it.
const (
	scrapeBudget = 8 * time.Second
	readParallel = 16
)

type runtimeCollector struct {
	mode   sandbox.Kind
	source func(ctx context.Context) (Runtimes, error)

	up, unread, runtimes, cpu, mem, memLimit, pids, pidsLimit, cpuLimit *prometheus.Desc
}

func newRuntimeCollector(mode sandbox.Kind, source func(ctx context.Context) (Runtimes, error)) *runtimeCollector {
	per := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, []string{"mode", "office_key"}, nil)
	}
	return &runtimeCollector{
		mode: mode, source: source,
		up:        prometheus.NewDesc("hutch_runtimes_up", "1 when the mode's runtimes could be listed at this scrape (its engine, cluster or VM manager answered), 0 when not: hutch_runtimes and the per-runtime series are then missing.", []string{"mode"}, nil),
		unread:    prometheus.NewDesc("hutch_runtimes_unread", "Running runtimes whose resource use could not be read at this scrape (their engine or agent did not answer in time), and so have no per-runtime series in it.", []string{"mode"}, nil),
		runtimes:  prometheus.NewDesc("hutch_runtimes", "Managed runtimes by state.", []string{"mode", "state"}, nil),
		cpu:       per("hutch_runtime_cpu_seconds_total", "CPU time a running runtime has used since it started (rate() of it is CPUs busy; it starts again from 0 when the runtime is re-created)."),
		cpuLimit:  per("hutch_runtime_cpu_limit", "The CPUs a running runtime may use (its limit in force, boosts included); absent when unlimited."),
		mem:       per("hutch_runtime_memory_bytes", "Memory a running runtime uses, less the file cache the kernel drops first (as docker stats counts it)."),
		memLimit:  per("hutch_runtime_memory_limit_bytes", "A running runtime's memory limit; absent when unlimited."),
		pids:      per("hutch_runtime_processes", "Processes and threads in a running runtime."),
		pidsLimit: per("hutch_runtime_processes_limit", "A running runtime's limit of processes and threads; absent when unlimited."),
	}
}

func (c *runtimeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.up, c.unread, c.runtimes, c.cpu, c.cpuLimit, c.mem, c.memLimit, c.pids, c.pidsLimit} {
		ch <- d
	}
}

func (c *runtimeCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeBudget)
	defer cancel()
	rts, err := c.source(ctx)
	var list []sandbox.Status
	if err == nil {
		list, err = rts.List(ctx)
	}
	mode := string(c.mode)
	if err != nil {
		// The rest of the metrics are still served: an engine that does
		// not answer must not hide the refusals and commands counted.
		ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 0, mode)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 1, mode)
	counts := map[sandbox.RuntimeState]int{sandbox.StateRunning: 0, sandbox.StateStopped: 0}
	var running []sandbox.Status
	for _, st := range list {
		counts[st.State]++
		if st.State == sandbox.StateRunning {
			running = append(running, st)
		}
	}
	for state, n := range counts {
		ch <- prometheus.MustNewConstMetric(c.runtimes, prometheus.GaugeValue, float64(n), mode, string(state))
	}
	// Each running runtime is read once, readParallel at a time; one
	// that stopped since the listing is left out, one that cannot be read
	// within the budget is counted in hutch_runtimes_unread.
	var (
		mu     sync.Mutex
		unread int
	)
	sem := make(chan struct{}, readParallel)
	var wg sync.WaitGroup
	for _, st := range running {
		wg.Go(func() {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				mu.Lock()
				unread++
				mu.Unlock()
				return
			}
			defer func() { <-sem }()
			u, err := rts.Usage(ctx, st.OfficeKey)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case errdefs.IsNotFound(err): // stopped since the listing
			case err != nil:
				unread++
			default:
				c.usage(ch, mode, st, u)
			}
		})
	}
	wg.Wait()
	ch <- prometheus.MustNewConstMetric(c.unread, prometheus.GaugeValue, float64(unread), mode)
}

// usage sends one running runtime's series.
func (c *runtimeCollector) usage(ch chan<- prometheus.Metric, mode string, st sandbox.Status, u sandbox.Usage) {
	key := st.OfficeKey
	ch <- prometheus.MustNewConstMetric(c.cpu, prometheus.CounterValue, u.CPU.Seconds(), mode, key)
	ch <- prometheus.MustNewConstMetric(c.mem, prometheus.GaugeValue, float64(u.Memory), mode, key)
	ch <- prometheus.MustNewConstMetric(c.pids, prometheus.GaugeValue, float64(u.Pids), mode, key)
	if st.Limits.CPUs > 0 {
		ch <- prometheus.MustNewConstMetric(c.cpuLimit, prometheus.GaugeValue, st.Limits.CPUs, mode, key)
	}
	if u.MemoryLimit > 0 {
		ch <- prometheus.MustNewConstMetric(c.memLimit, prometheus.GaugeValue, float64(u.MemoryLimit), mode, key)
	}
	if u.PidsLimit > 0 {
		ch <- prometheus.MustNewConstMetric(c.pidsLimit, prometheus.GaugeValue, float64(u.PidsLimit), mode, key)
	}
}
