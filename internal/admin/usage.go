package admin

// Live resource use of running runtimes, and a chart of one runtime's last
// hour.
//
// A sampler reads, every sampleEvery, each running runtime's CPU, memory
// and process count, and keeps the last hour of them per runtime in
// memory. It starts the first time the portal shows resource use (the
// Server has no field for it, so it is kept in samplers, one per Server),
// and runs until the process ends: a daemon serves one portal, so that is
// its life, and history starts at that first view. Its context derives
// from context.Background(); stop ends it (tests).
//
// Every managed mode is measured (service.ManagedRuntime is a
// sandbox.UsageReader): image mode through the engine's stats, kube and
// gondolin through the agent in each runtime, which reads its cgroup. Reading
// never counts as use, so the portal keeps no runtime from its idle stop.

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/office"
	"github.com/hutchsandbox/hutch/internal/sandbox"
)

const (
	// sampleEvery is how often the sampler reads, and how often the
	// portal's pages ask for fresh figures.
	sampleEvery = 10 * time.Second
	// usageWindow is how much history a runtime keeps.
	usageWindow = time.Hour
	// ringSize is the number of samples in usageWindow.
	ringSize = int(usageWindow / sampleEvery)
	// readTimeout bounds one runtime's reading.
	readTimeout = 5 * time.Second
	// readParallel is how many runtimes are read at once.
	readParallel = 8
	// firstPause is how far apart the two readings are that give a
	// runtime's first CPU figure.
	firstPause = time.Second
	// firstWait bounds how long the first page that shows resource use
	// waits for the first reading.
	firstWait = 3 * time.Second
	// hotMemory is the share of its memory limit past which a runtime's
	// memory use is announced (once per crossing).
	hotMemory = 0.9
)

// usageRoutes adds the live resource use of running runtimes.
func (s *Server) usageRoutes(mux *http.ServeMux) {
	mux.Handle("GET /admin/usage", s.authed(s.usageFragment))
	mux.Handle("GET /admin/usage/chart", s.authed(s.chartFragment))
}

// usageFragment answers the usage table alone, which pages refresh.
func (s *Server) usageFragment(w http.ResponseWriter, r *request) error {
	v := s.usageView(r.Context())
	if v == nil {
		v = &usageView{Note: notMeasured(s.mode)}
	}
	s.render(w, http.StatusOK, "usage", v)
	return nil
}

// chartFragment answers one runtime's chart alone.
func (s *Server) chartFragment(w http.ResponseWriter, r *request) error {
	addr, err := conversation(r)
	if err != nil {
		return err
	}
	v := s.chartView(r.Context(), addr)
	if v == nil {
		return errdefs.New(errdefs.ErrNotSupported, fmt.Sprintf("There are no runtimes to chart in %s mode: hutch manages none.", s.mode.Kind))
	}
	s.render(w, http.StatusOK, "chart", v)
	return nil
}

// samplers holds the sampler of each Server whose mode is measured.
// Entries are never removed: a daemon makes one Server.
var samplers = struct {
	sync.Mutex
	m map[*Server]*sampler
}{m: map[*Server]*sampler{}}

// measured is what a sampler reads: the runtimes of a managed mode.
type measured interface {
	List(ctx context.Context) ([]sandbox.Status, error)
	sandbox.UsageReader
}

// sampler returns s's sampler, started (nil when s's mode is not measured).
// The first call waits up to firstWait (or ctx) for the first reading.
func (s *Server) sampler(ctx context.Context) *sampler {
	if notMeasured(s.mode) != "" {
		return nil
	}
	samplers.Lock()
	u, ok := samplers.m[s]
	if !ok {
		svc, mode := s.svc, s.mode
		u = newSampler(s.now, s.log, func(ctx context.Context) (measured, error) {
			return svc.ManagedFor(ctx, mode)
		})
		samplers.m[s] = u
	}
	samplers.Unlock()
	u.start()
	t := time.NewTimer(firstWait)
	defer t.Stop()
	select {
	case <-u.first:
	case <-t.C:
	case <-ctx.Done():
	}
	return u
}

// notMeasured says why a mode's resource use is not shown, or "" for a
// mode that is measured.
func notMeasured(m sandbox.Mode) string {
	if sandbox.CapabilitiesOf(m.Kind).ManagedLifecycle {
		return ""
	}
	return fmt.Sprintf("Resource use is measured only for runtimes hutch manages, and %s mode has none.", m.Kind)
}

// sample is one reading of a runtime.
type sample struct {
	At time.Time
	// CPU is docker stats' figure: percent of one CPU (200 is two CPUs
	// busy). CPUKnown is false for a reading with nothing to compare
	// with (its first reading failed, or it was re-created between).
	CPU      float64
	CPUKnown bool
	// Mem is memory in use, page cache that can be dropped left out (as
	// docker stats does); MemLimit the cgroup's limit.
	Mem, MemLimit uint64
	// Pids counts processes and threads; PidsLimit is 0 when unlimited.
	Pids, PidsLimit uint64
}

// ring holds the last ringSize samples, oldest first.
type ring struct {
	buf   [ringSize]sample
	start int // index of the oldest sample
	n     int
}

func (r *ring) add(s sample) {
	if r.n < ringSize {
		r.buf[(r.start+r.n)%ringSize] = s
		r.n++
		return
	}
	r.buf[r.start] = s
	r.start = (r.start + 1) % ringSize
}

// since returns the samples taken after t, oldest first.
func (r *ring) since(t time.Time) []sample {
	out := make([]sample, 0, r.n)
	for i := range r.n {
		s := r.buf[(r.start+i)%ringSize]
		if s.At.After(t) {
			out = append(out, s)
		}
	}
	return out
}

// last returns the newest sample.
func (r *ring) last() (sample, bool) {
	if r.n == 0 {
		return sample{}, false
	}
	return r.buf[(r.start+r.n-1)%ringSize], true
}

// series is one runtime's history.
type series struct {
	status sandbox.Status // as last listed: conversation, limits
	ring   ring
	// pre is the last reading, which the next is compared with; preAt
	// when it was taken.
	pre   sandbox.Usage
	preAt time.Time
	// failure is why the last reading failed ("" when it did not).
	failure string
	// hot: memory was past hotMemory of its limit at the last reading.
	hot bool
}

// sampler reads running runtimes' resource use every sampleEvery.
type sampler struct {
	now    func() time.Time
	log    *slog.Logger
	every  time.Duration
	pause  time.Duration // firstPause; tests shorten it
	source func(context.Context) (measured, error)

	once  sync.Once
	first chan struct{} // closed once the first reading is in
	stop  context.CancelFunc
	// asks carries refresh's requests to the loop, which closes each
	// once it has read.
	asks chan chan struct{}

	// mu guards the following.
	mu        sync.Mutex
	series    map[string]*series // by office key
	running   []string           // office keys running at the last reading, sorted
	started   time.Time          // when the first reading began
	sampledAt time.Time          // when the last reading began
	failure   string             // why the last reading failed as a whole
	news      string             // the last change of state, with its time
}

func newSampler(now func() time.Time, log *slog.Logger, source func(context.Context) (measured, error)) *sampler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &sampler{
		now: now, log: log, every: sampleEvery, pause: firstPause, source: source,
		first: make(chan struct{}), stop: func() {}, series: map[string]*series{},
		asks: make(chan chan struct{}),
	}
}

// refreshWait bounds how long an action waits for the reading it asked
// for.
const refreshWait = 3 * time.Second

// refresh has the loop read now rather than at its next tick, and waits
// (up to refreshWait, or ctx) until it has: after an action changed a
// runtime's limits or state, the page it answers with shows them, not
// those of a reading up to sampleEvery old. The tick's readings stay the
// loop's alone.
func (u *sampler) refresh(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, refreshWait)
	defer cancel()
	done := make(chan struct{})
	select {
	case u.asks <- done:
	case <-ctx.Done():
		return
	}
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// start begins reading, once; the loop runs until stop.
func (u *sampler) start() {
	u.once.Do(func() {
		ctx, cancel := context.WithCancel(context.Background())
		u.stop = cancel
		go u.run(ctx)
	})
}

func (u *sampler) run(ctx context.Context) {
	u.tick(ctx)
	close(u.first)
	t := time.NewTicker(u.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			u.tick(ctx)
		case done := <-u.asks:
			u.tick(ctx)
			close(done)
			t.Reset(u.every)
		}
	}
}

// reading is what one runtime's reading gave: pre, when set, is a reading
// taken a moment before to compare it with.
type reading struct {
	status sandbox.Status
	usage  sandbox.Usage
	pre    *sandbox.Usage
	err    error
}

// tick reads every running runtime once.
func (u *sampler) tick(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 2*u.every) // a runtime that hangs must not stop the loop
	defer cancel()
	at := u.now()
	u.mu.Lock()
	if u.started.IsZero() {
		u.started = at
	}
	u.mu.Unlock()
	var statuses []sandbox.Status
	rts, err := u.source(ctx)
	if err == nil {
		statuses, err = rts.List(ctx)
	}
	if err != nil {
		u.fail(at, err)
		return
	}
	var running []sandbox.Status
	for _, st := range statuses {
		if st.State == sandbox.StateRunning {
			running = append(running, st)
		}
	}
	got := make([]reading, len(running))
	sem := make(chan struct{}, readParallel)
	var wg sync.WaitGroup
	for i, st := range running {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			got[i] = u.read(ctx, rts, st, at)
		})
	}
	wg.Wait()
	u.record(at, got)
}

// read reads one runtime: twice, a pause apart, when there is no recent
// reading to compare with, so that its CPU use is known at once.
func (u *sampler) read(ctx context.Context, rts measured, st sandbox.Status, at time.Time) reading {
	u.mu.Lock()
	ser := u.series[st.OfficeKey]
	fresh := ser != nil && ser.pre.Instance != "" && at.Sub(ser.preAt) <= u.gap()
	u.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, readTimeout+u.pause)
	defer cancel()
	r := reading{status: st}
	if !fresh {
		pre, err := rts.Usage(ctx, st.OfficeKey)
		if err != nil {
			r.err = err
			return r
		}
		r.pre = &pre
		select {
		case <-time.After(u.pause):
		case <-ctx.Done():
			r.err = ctx.Err()
			return r
		}
	}
	r.usage, r.err = rts.Usage(ctx, st.OfficeKey)
	return r
}

// gap is the longest time between two readings that are still compared
// (and drawn joined).
func (u *sampler) gap() time.Duration { return u.every * 5 / 2 }

// fail records a reading that failed as a whole (the engine is gone).
func (u *sampler) fail(at time.Time, err error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	msg := err.Error()
	if u.failure == "" {
		u.log.Warn("admin: cannot read resource use", "error", err)
		u.news = fmt.Sprintf("%s: resource use cannot be read.", timeOfDay(at))
	}
	u.sampledAt, u.failure = at, msg
}

// record keeps a tick's readings and notes what changed state.
func (u *sampler) record(at time.Time, got []reading) {
	u.mu.Lock()
	defer u.mu.Unlock()
	var changes []string
	if u.failure != "" {
		changes = append(changes, "resource use is read again")
		u.log.Info("admin: resource use is read again")
	}
	running := make([]string, 0, len(got))
	for _, g := range got {
		key := g.status.OfficeKey
		if errdefs.IsNotFound(g.err) {
			continue // stopped or removed since it was listed
		}
		running = append(running, key)
		ser := u.series[key]
		if ser == nil {
			ser = &series{}
			u.series[key] = ser
		}
		ser.status = g.status
		if g.err != nil {
			if ser.failure == "" {
				u.log.Warn("admin: cannot read a runtime's resource use", "office_key", key, "error", g.err)
			}
			ser.failure = g.err.Error()
			continue
		}
		ser.failure = ""
		pre := g.pre
		if pre == nil && at.Sub(ser.preAt) <= u.gap() {
			pre = &ser.pre
		}
		s := toSample(at, g.usage, pre)
		ser.pre, ser.preAt = g.usage, at
		ser.ring.add(s)
		hot := s.MemLimit > 0 && float64(s.Mem) >= hotMemory*float64(s.MemLimit)
		if hot && !ser.hot {
			changes = append(changes, fmt.Sprintf("%s uses %s of its %s of memory", runtimeName(g.status), byteSize(float64(s.Mem)), byteSize(float64(s.MemLimit))))
		}
		ser.hot = hot
	}
	slices.Sort(running)
	if !u.sampledAt.IsZero() { // the first reading finds what runs; it changes nothing
		for _, key := range running {
			if _, was := slices.BinarySearch(u.running, key); !was {
				changes = append(changes, runtimeName(u.series[key].status)+" is running")
			}
		}
		for _, key := range u.running {
			if _, is := slices.BinarySearch(running, key); !is {
				changes = append(changes, runtimeName(u.series[key].status)+" stopped")
			}
		}
	}
	for key, ser := range u.series {
		if l, ok := ser.ring.last(); (!ok || !l.At.After(at.Add(-usageWindow))) && !slices.Contains(running, key) {
			delete(u.series, key)
		}
	}
	if len(changes) > 0 {
		u.news = fmt.Sprintf("%s: %s.", timeOfDay(at), strings.Join(changes, "; "))
	}
	u.running, u.sampledAt, u.failure = running, at, ""
}

// runtimeName names a runtime by its conversation.
func runtimeName(st sandbox.Status) string {
	if st.Platform == "" {
		return st.Name
	}
	return st.Platform + "/" + st.ConversationID
}

// toSample turns a reading into a sample; pre, when set, is an earlier
// reading to compare CPU time with.
func toSample(at time.Time, cur sandbox.Usage, pre *sandbox.Usage) sample {
	s := sample{At: at, Mem: cur.Memory, MemLimit: cur.MemoryLimit, Pids: cur.Pids, PidsLimit: cur.PidsLimit}
	if pre != nil {
		s.CPU, s.CPUKnown = cpuPercent(cur, *pre)
	}
	return s
}

// cpuPercent is docker stats' CPU figure: the runtime's CPU time over the
// time that passed between two readings, in percent, so that 100 is one
// CPU busy. ok is false when pre is no earlier reading of the same
// runtime (another instance: it was re-created; or a counter went back).
func cpuPercent(cur, pre sandbox.Usage) (float64, bool) {
	if pre.Instance != cur.Instance || cur.Clock <= pre.Clock || cur.CPU < pre.CPU {
		return 0, false
	}
	return float64(cur.CPU-pre.CPU) / float64(cur.Clock-pre.Clock) * 100, true
}

// timeOfDay formats a time of day for the pages.
func timeOfDay(t time.Time) string { return t.Format("15:04:05 MST") }

// usageView is what the "usage" template shows.
type usageView struct {
	// Poll: the fragment asks for itself again every sampleEvery.
	Poll bool
	// Note says why nothing is measured in this mode.
	Note string
	// Failure says why the last reading failed.
	Failure string
	// Since is when measuring began; SampledAt the last reading.
	Since, SampledAt, SampledISO string
	Rows                         []usageRow
	// News is the last change of state (a runtime started or stopped,
	// memory near its limit), for the live region: it stays the same
	// text until something changes, so it is announced once.
	News string
}

// usageRow is one running runtime.
type usageRow struct {
	Conversation, Link, Name string
	CPU, CPULimit            string
	Memory, MemoryLimit      string
	Pids                     string
	At, AtISO                string
	Failure                  string
}

// refreshUsage has s's sampler read now, when it runs (see refresh).
func (s *Server) refreshUsage(ctx context.Context) {
	samplers.Lock()
	u := samplers.m[s]
	samplers.Unlock()
	if u != nil {
		u.refresh(ctx)
	}
}

// usageView is the table of running runtimes' use, or nil for a mode
// hutch manages no runtimes in.
func (s *Server) usageView(ctx context.Context) *usageView {
	if !sandbox.CapabilitiesOf(s.mode.Kind).ManagedLifecycle {
		return nil
	}
	u := s.sampler(ctx)
	if u == nil {
		return &usageView{Note: notMeasured(s.mode)}
	}
	return u.view()
}

func (u *sampler) view() *usageView {
	u.mu.Lock()
	defer u.mu.Unlock()
	v := &usageView{Poll: true, Failure: u.failure, News: u.news}
	if !u.started.IsZero() {
		v.Since = timeOfDay(u.started)
	}
	if !u.sampledAt.IsZero() {
		v.SampledAt, v.SampledISO = timeOfDay(u.sampledAt), u.sampledAt.Format(time.RFC3339)
	}
	if u.failure != "" {
		return v
	}
	for _, key := range u.running {
		ser := u.series[key]
		st := ser.status
		row := usageRow{Conversation: runtimeName(st), Name: st.Name, Failure: ser.failure, CPU: "-", Memory: "-", MemoryLimit: "-", Pids: "-", At: "-"}
		if st.Platform != "" {
			row.Link = "/admin/office?" + url.Values{"platform": {st.Platform}, "conversation": {st.ConversationID}}.Encode()
		}
		if l, ok := ser.ring.last(); ok && l.At.Equal(u.sampledAt) {
			if l.CPUKnown {
				share := cpuShareOf(st.Limits.CPUs)
				row.CPU, row.CPULimit = formatPercent(share.percent(l.CPU)), "of "+share.of
			}
			row.Memory = byteSize(float64(l.Mem))
			if l.MemLimit > 0 {
				row.MemoryLimit = byteSize(float64(l.MemLimit))
			}
			row.Pids = strconv.FormatUint(l.Pids, 10)
			limit := l.PidsLimit
			if limit == 0 && st.Limits.Pids > 0 {
				limit = uint64(st.Limits.Pids) // applied, but not in the reading: Podman's stats leave it out
			}
			if limit > 0 {
				row.Pids += " / " + strconv.FormatUint(limit, 10)
			}
			row.At, row.AtISO = timeOfDay(l.At), l.At.Format(time.RFC3339)
		}
		v.Rows = append(v.Rows, row)
	}
	return v
}

func formatPercent(f float64) string { return strconv.FormatFloat(f, 'f', 1, 64) + " %" }

// cpuShare is what a CPU figure is a share of, wherever the portal shows
// one: a runtime's CPU limit when it has one ("80 % of 0.5 CPUs (its
// limit)" is 0.4 CPUs busy, and 100 % is the most it can get), else one
// CPU, as docker stats counts (200 % is two CPUs busy).
type cpuShare struct {
	cpus float64 // the CPUs 100 % stands for
	// of says it: "0.5 CPUs (its limit)", "one CPU"; words says it in a
	// sentence: "its limit of 0.5 CPUs", "one CPU".
	of, words string
	// limited: 100 % is the runtime's limit.
	limited bool
}

func cpuShareOf(limit float64) cpuShare {
	if limit > 0 {
		n := sandbox.CPUCount(limit)
		return cpuShare{cpus: limit, of: n + " (its limit)", words: "its limit of " + n, limited: true}
	}
	return cpuShare{cpus: 1, of: "one CPU", words: "one CPU"}
}

// percent turns a sample's CPU figure (percent of one CPU) into a share.
func (c cpuShare) percent(ofOne float64) float64 { return ofOne / c.cpus }

// Chart geometry, in the SVG's user units.
const (
	chartW, chartH          = 640, 240
	plotLeft, plotRight     = 64, 576
	plotTop, plotBottom     = 16, 212
	plotWidth, plotHeight   = plotRight - plotLeft, plotBottom - plotTop
	axisLabelY              = plotBottom + 20
	rightLabelX, leftLabelX = plotRight + 6, plotLeft - 6
	// limitAt is the share of an axis's height its limit is drawn at.
	limitAt = 0.8
)

// chartView is what the "chart" template shows.
type chartView struct {
	// URL is the fragment's own address; Poll: it asks for itself again.
	URL  string
	Poll bool
	// Note says why there is no chart (a mode that is not measured).
	Note string
	// Title, Desc and Summary say in words what the chart shows.
	Title, Desc, Summary string
	// Empty: no sample in the last hour, so no chart is drawn.
	Empty bool
	// CPU and Mem are polylines' points, one per unbroken run of samples;
	// CPUDots and MemDots are lone samples, drawn as dots.
	CPU, Mem         []string
	CPUDots, MemDots []chartPoint
	// Ticks label the axes.
	XTicks             []axisTick
	CPUTicks, MemTicks []axisTick
	// Limits are the lines drawn at the runtime's CPU and memory limits:
	// one when both fall at the same height (each axis puts its limit at
	// the same share of its range), none without limits.
	Limits []axisTick
	// CPUOf says what the CPU axis is a share of ("one CPU", "its limit
	// of 1.5 CPUs").
	CPUOf         string
	W, H          int
	Left, Right   int
	Top, Bottom   int
	LabelY        int
	LeftX, RightX int
}

type chartPoint struct{ X, Y float64 }

// axisTick is an axis label at a position (X for the time axis, Y for the
// value axes).
type axisTick struct {
	Pos   float64
	Label string
}

// chartView is the chart of one conversation's runtime, or nil for a mode
// hutch manages no runtimes in.
func (s *Server) chartView(ctx context.Context, addr office.Address) *chartView {
	if !sandbox.CapabilitiesOf(s.mode.Kind).ManagedLifecycle {
		return nil
	}
	u := s.sampler(ctx)
	if u == nil {
		return &chartView{Note: notMeasured(s.mode)}
	}
	u.mu.Lock()
	var samples []sample
	var st sandbox.Status
	ser := u.series[string(addr.Key())]
	if ser != nil {
		samples, st = ser.ring.since(s.now().Add(-usageWindow)), ser.status
	}
	started := u.started
	u.mu.Unlock()
	v := renderChart(addr.String(), s.now(), started, st.Limits, samples, u.gap())
	v.URL = "/admin/usage/chart?" + url.Values{"platform": {string(addr.Platform)}, "conversation": {addr.ConversationID}}.Encode()
	v.Poll = true
	return v
}

// renderChart lays out the last hour (up to now) of samples of the runtime
// of conversation name. Samples further apart than gap are not joined.
func renderChart(name string, now, started time.Time, limits sandbox.Limits, samples []sample, gap time.Duration) *chartView {
	from := now.Add(-usageWindow)
	v := &chartView{
		W: chartW, H: chartH, Left: plotLeft, Right: plotRight, Top: plotTop, Bottom: plotBottom,
		LabelY: axisLabelY, LeftX: leftLabelX, RightX: rightLabelX,
		Title: "CPU and memory use of " + name + "'s runtime over the last hour",
	}
	since := ""
	if !started.IsZero() && started.After(from) {
		since = fmt.Sprintf(" The portal has measured since %s.", timeOfDay(started))
	}
	if len(samples) == 0 {
		v.Empty = true
		v.Summary = "No resource use was recorded for this runtime in the last hour: it was not running while the portal measured." + since
		return v
	}
	// Scales: each axis puts the runtime's limit at limitAt of its
	// height (with room above it for a figure over it, such as a burst
	// past a CPU quota), so a line near the limit line is a runtime near
	// its limit; an axis without a limit goes up to its peak.
	share := cpuShareOf(limits.CPUs)
	var cpuPeak, cpuSum float64
	var cpuN int
	var memPeak uint64
	for _, s := range samples {
		if s.CPUKnown {
			c := share.percent(s.CPU)
			cpuPeak = max(cpuPeak, c)
			cpuSum += c
			cpuN++
		}
		memPeak = max(memPeak, s.Mem)
	}
	last := samples[len(samples)-1]
	// An axis: its top, the values of its ticks, and its limit (0: none).
	type axis struct{ top, limit float64 }
	scale := func(limit, peak float64) axis {
		if limit > 0 {
			top := limit / limitAt
			if peak > top {
				top = niceCeil(peak)
			}
			return axis{top: top, limit: limit}
		}
		return axis{top: niceCeil(math.Max(peak, 1))}
	}
	cpuAxis := scale(0, math.Max(cpuPeak, 100))
	if share.limited {
		cpuAxis = scale(100, cpuPeak)
	}
	memAxis := scale(mib(last.MemLimit), mib(memPeak))
	x := func(t time.Time) float64 {
		return round1(plotLeft + float64(t.Sub(from))/float64(usageWindow)*plotWidth)
	}
	y := func(v, top float64) float64 { return round1(plotBottom - math.Min(v/top, 1)*plotHeight) }
	v.CPUOf = share.words
	v.CPU, v.CPUDots = chartLines(samples, gap, func(s sample) (chartPoint, bool) {
		return chartPoint{x(s.At), y(share.percent(s.CPU), cpuAxis.top)}, s.CPUKnown
	})
	v.Mem, v.MemDots = chartLines(samples, gap, func(s sample) (chartPoint, bool) {
		return chartPoint{x(s.At), y(mib(s.Mem), memAxis.top)}, true
	})
	for i := range 5 {
		mins := 60 - 15*i
		label := "now"
		if mins > 0 {
			label = fmt.Sprintf("−%d min", mins)
		}
		v.XTicks = append(v.XTicks, axisTick{Pos: float64(plotLeft + plotWidth*i/4), Label: label})
	}
	// Ticks: 0, half and all of the limit where there is one, else of the
	// axis's top.
	ticks := func(a axis, unit string) []axisTick {
		full := a.top
		if a.limit > 0 {
			full = a.limit
		}
		var out []axisTick
		for _, f := range []float64{0, 0.5, 1} {
			out = append(out, axisTick{Pos: y(f*full, a.top), Label: trimFloat(f*full) + unit})
		}
		return out
	}
	v.CPUTicks, v.MemTicks = ticks(cpuAxis, " %"), ticks(memAxis, " MiB")
	var cpuLine, memLine float64
	if cpuAxis.limit > 0 {
		cpuLine = y(cpuAxis.limit, cpuAxis.top)
	}
	if memAxis.limit > 0 {
		memLine = y(memAxis.limit, memAxis.top)
	}
	switch {
	case cpuLine > 0 && cpuLine == memLine:
		v.Limits = []axisTick{{Pos: cpuLine, Label: "limit"}}
	default:
		if cpuLine > 0 {
			v.Limits = append(v.Limits, axisTick{Pos: cpuLine, Label: "CPU limit"})
		}
		if memLine > 0 {
			v.Limits = append(v.Limits, axisTick{Pos: memLine, Label: "memory limit"})
		}
	}
	limitWords := ""
	switch len(v.Limits) {
	case 1:
		limitWords = "; the dotted line is the " + v.Limits[0].Label
	case 2:
		limitWords = "; the dotted lines are the CPU and the memory limit"
	}
	v.Desc = fmt.Sprintf("Line chart from %s to %s: CPU use in percent of %s (solid line, left axis, 0 to %s %%) and memory use in MiB (dashed line, right axis, 0 to %s MiB), one sample every %d seconds%s; a break in a line is a time the runtime was not measured.",
		timeOfDay(from), timeOfDay(now), share.words, trimFloat(cpuAxis.top), trimFloat(memAxis.top), int(sampleEvery/time.Second), limitWords)
	var b strings.Builder
	fmt.Fprintf(&b, "CPU, in percent of %s: ", share.words)
	if cpuN == 0 {
		b.WriteString("not known yet, it takes two samples")
	} else {
		if last.CPUKnown {
			fmt.Fprintf(&b, "now %s, ", formatPercent(share.percent(last.CPU)))
		}
		fmt.Fprintf(&b, "peak %s, average %s", formatPercent(cpuPeak), formatPercent(cpuSum/float64(cpuN)))
	}
	fmt.Fprintf(&b, ". Memory: now %s, peak %s", byteSize(float64(last.Mem)), byteSize(float64(memPeak)))
	if last.MemLimit > 0 {
		fmt.Fprintf(&b, ", limit %s", byteSize(float64(last.MemLimit)))
	}
	n := strconv.Itoa(len(samples)) + " samples"
	if len(samples) == 1 {
		n = "1 sample"
	}
	fmt.Fprintf(&b, ". %s, the last at %s.%s", n, timeOfDay(last.At), since)
	v.Summary = b.String()
	return v
}

// chartLines splits samples into polylines wherever two are more than gap
// apart or a sample has no value; a run of one sample is a dot.
func chartLines(samples []sample, gap time.Duration, at func(sample) (chartPoint, bool)) ([]string, []chartPoint) {
	var polys []string
	var dots []chartPoint
	var run []chartPoint
	flush := func() {
		switch len(run) {
		case 0:
		case 1:
			dots = append(dots, run[0])
		default:
			parts := make([]string, len(run))
			for i, p := range run {
				parts[i] = trimFloat(p.X) + "," + trimFloat(p.Y)
			}
			polys = append(polys, strings.Join(parts, " "))
		}
		run = run[:0]
	}
	var prev time.Time
	for _, s := range samples {
		p, ok := at(s)
		if !ok || (!prev.IsZero() && s.At.Sub(prev) > gap) {
			flush()
		}
		if ok {
			run = append(run, p)
		}
		prev = s.At
	}
	flush()
	return polys, dots
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }

func round1(f float64) float64 { return math.Round(f*10) / 10 }

func trimFloat(f float64) string { return strconv.FormatFloat(round1(f), 'f', -1, 64) }

// niceCeil rounds f up to 1, 2 or 5 times a power of ten.
func niceCeil(f float64) float64 {
	if f <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(f)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= f {
			return m * p
		}
	}
	return 10 * p
}
