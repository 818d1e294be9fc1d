package admin

import (
	"context"
	"fmt"
	"html/template"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/hutchsandbox/hutch/internal/egress"
	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/events"
	"github.com/hutchsandbox/hutch/internal/metrics"
	"github.com/hutchsandbox/hutch/internal/office"
	"github.com/hutchsandbox/hutch/internal/projection"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/service"
)

var funcs = template.FuncMap{
	"join":       strings.Join,
	"limits":     limitsLine,
	"limitParts": limitParts,
	"path":       wrapPath,
	"idleStop":   idleStop,
	"recreated":  recreated,
}

// byteSize renders a size in binary units, three digits at most, with
// a space: "1 GiB", "1.5 GiB", "5.17 MiB". Every size the pages show
// goes through it, so one runtime's memory reads the same everywhere.
func byteSize(n float64) string {
	unit := 0
	for n >= 1024 && unit < len(byteUnits)-1 {
		n /= 1024
		unit++
	}
	if n >= 100 { // whole units: 1020 MiB, never 1.02e+03 MiB
		return strconv.FormatFloat(math.Round(n), 'f', -1, 64) + " " + byteUnits[unit]
	}
	return strconv.FormatFloat(n, 'g', 3, 64) + " " + byteUnits[unit]
}

var byteUnits = []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB"}

// ago says how long ago something happened, as precisely as a person
// reading a table wants it: "40 s ago", "12 min ago", "3 h 5 min ago",
// "4 days ago".
func ago(d time.Duration) string {
	d = max(d, 0)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%d s ago", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%d min ago", int(d/time.Minute))
	case d < 48*time.Hour:
		return fmt.Sprintf("%d h %d min ago", int(d/time.Hour), int(d%time.Hour/time.Minute))
	}
	return fmt.Sprintf("%d days ago", int(d/(24*time.Hour)))
}

// wrapPath escapes a path for a page with a line-break opportunity
// after each slash, so a long path wraps between its parts, never inside
// a name.
func wrapPath(p string) template.HTML {
	parts := strings.Split(p, "/")
	for i, part := range parts {
		if part != "" {
			parts[i] = `<span class="seg">` + template.HTMLEscapeString(part) + "</span>"
		}
	}
	return template.HTML(strings.Join(parts, "/<wbr>")) //nolint:gosec // G203: every part is escaped above
}

// limitsLine renders a runtime's limits in full: "0.5 CPUs, 1 GiB of
// memory, 1024 processes"; an unset one is "no … limit".
func limitsLine(l sandbox.Limits) string { return strings.Join(limitParts(l), ", ") }

// limitParts are limitsLine's parts, which a table keeps each on a line.
func limitParts(l sandbox.Limits) []string {
	parts := []string{"no CPU limit", "no memory limit", "no process limit"}
	if l.CPUs > 0 {
		parts[0] = sandbox.CPUCount(l.CPUs)
	}
	if l.MemoryBytes > 0 {
		parts[1] = byteSize(float64(l.MemoryBytes)) + " of memory"
	}
	if l.Pids > 0 {
		parts[2] = strconv.FormatInt(l.Pids, 10) + " processes"
	}
	return parts
}

// idleStop says when a runtime stops for idling: "in 7m12s", "now" once
// due (the idle check runs every so often), "busy" while a command runs,
// "-" when it is not running or its last activity is unknown.
func idleStop(st sandbox.Status, idle time.Duration, now time.Time) string {
	switch {
	case st.State != sandbox.StateRunning || st.LastActivity.IsZero() || idle <= 0:
		return "-"
	case st.ActiveCommands > 0:
		return "busy"
	}
	left := st.LastActivity.Add(idle).Sub(now).Round(time.Second)
	if left <= 0 {
		return "now"
	}
	return "in " + left.String()
}

// recreated says when and why a runtime was last re-created: "3m0s ago:
// what it was built from changed", or "-".
func recreated(st sandbox.Status, now time.Time) string {
	if st.Recreated.IsZero() {
		return "-"
	}
	when := ago(now.Sub(st.Recreated))
	if st.RecreatedBecause == "" {
		return when
	}
	return when + ": " + st.RecreatedBecause
}

// officeRow is one office on the home page.
type officeRow struct {
	Address     office.Address
	Key         office.Key
	ChannelKind string
	Policy      string
	Origin      string
	// Network is the conversation's sandbox.network, open included.
	Network string
	Runtime *sandbox.Status
}

// page is what every page template gets.
type page struct {
	Title string
	Who   string
	CSRF  string
	Mode  sandbox.Mode
	Flash string
	Error string
}

func (s *Server) page(r *request, title string) page {
	return page{Title: title, Who: r.sess.who, CSRF: r.sess.csrf, Mode: s.mode}
}

// lifecycle is the daemon mode's runtime lifecycle, or nil when the mode
// has no runtimes hutch manages.
func (s *Server) lifecycle(ctx context.Context) (service.ManagedRuntime, error) {
	if !sandbox.CapabilitiesOf(s.mode.Kind).ManagedLifecycle {
		return nil, nil
	}
	return s.svc.ManagedFor(ctx, s.mode)
}

func (s *Server) home(w http.ResponseWriter, r *request) error {
	recs, err := s.svc.Offices()
	if err != nil {
		return err
	}
	byKey := map[string]*sandbox.Status{}
	var runtimes []sandbox.Status
	var idle time.Duration
	lc, err := lifecycleFor(s, r.Context())
	if err != nil {
		return err
	}
	if lc != nil {
		if runtimes, err = lc.List(r.Context()); err != nil {
			return err
		}
		if idle, err = s.svc.IdleDuration(); err != nil {
			return err
		}
		for i := range runtimes {
			byKey[runtimes[i].OfficeKey] = &runtimes[i]
		}
	}
	keys := make([]office.Key, len(recs))
	for i, rec := range recs {
		keys[i] = rec.Address().Key()
	}
	doors, err := s.svc.Doors(keys, s.mode.Kind)
	if err != nil {
		return err
	}
	rows := make([]officeRow, len(recs))
	for i, rec := range recs {
		d := doors[i]
		rows[i] = officeRow{
			Address: rec.Address(), Key: keys[i], ChannelKind: d.ChannelKind,
			Policy: d.Decision.Policy.String(), Origin: d.Decision.Origin(), Runtime: byKey[string(keys[i])],
			Network: string(d.Network.Mode),
		}
	}
	s.render(w, http.StatusOK, "home.html", map[string]any{
		"Page": s.page(r, "Offices and runtimes"), "Offices": rows, "Runtimes": runtimes, "Managed": lc != nil,
		"Idle": idle, "Now": s.now(), "Usage": s.usageView(r.Context()),
	})
	return nil
}

// conversation reads the conversation a request names (platform and id),
// the target of the request's events (a refusal's included).
func conversation(r *request) (office.Address, error) {
	addr, err := office.NewAddress(r.FormValue("platform"), r.FormValue("conversation"))
	if err == nil {
		events.SetTarget(r.Context(), addr.String())
	}
	return addr, err
}

func (s *Server) officePage(w http.ResponseWriter, r *request) error {
	addr, err := conversation(r)
	if err != nil {
		return err
	}
	if err := s.officeExists(addr); err != nil {
		return err
	}
	return s.renderOffice(w, r, addr, http.StatusOK, "", "")
}

// officeExists refuses, as not found, a conversation with no registered
// office: the page of one would offer actions on nothing.
func (s *Server) officeExists(addr office.Address) error {
	recs, err := s.svc.Offices()
	if err != nil {
		return err
	}
	for _, rec := range recs {
		if rec.Address() == addr {
			return nil
		}
	}
	return errdefs.New(errdefs.ErrNotFound, fmt.Sprintf("There is no office for %s: no command has run in this conversation.", addr))
}

func (s *Server) renderOffice(w http.ResponseWriter, r *request, addr office.Address, status int, flash, failure string) error {
	pol, err := s.svc.Resolve(addr, s.mode, "")
	if err != nil {
		return err
	}
	// The runtime's state, limits and actions show only where there is a
	// runtime to act on.
	lc, _ := lifecycleFor(s, r.Context())
	managed := lc != nil
	var rt *sandbox.Status
	var rtFailure string
	var idle time.Duration
	if managed {
		st, err := lc.Status(r.Context(), string(pol.Key))
		if err != nil {
			rtFailure = err.Error()
		} else {
			rt = &st
		}
		if idle, err = s.svc.IdleDuration(); err != nil {
			return err
		}
	}
	p := s.page(r, "Office "+addr.String())
	p.Flash, p.Error = flash, failure
	// The journal is best read: a missing one means nothing was sent.
	events, _ := egress.ReadJournal(s.svc.EgressJournal(string(pol.Key)), egressShown)
	s.render(w, status, "office.html", map[string]any{
		"Page": p, "Address": addr, "Policy": pol, "DoorWords": projection.DoorWords,
		"Chart":   s.chartView(r.Context(), addr),
		"Managed": managed,
		"Runtime": rt, "RuntimeFailure": rtFailure, "Idle": idle, "Now": s.now(),
		"Egress": events,
	})
	return nil
}

// egressShown is how many placeholder events an office page lists.
const egressShown = 20

// setDoor sets the door policy of one conversation (or the global one),
// refused while a command runs in the conversation's runtime.
func (s *Server) setDoor(w http.ResponseWriter, r *request) error {
	setting, err := projection.ParseDoorWord(r.FormValue("policy"))
	if err != nil {
		return err
	}
	word := r.FormValue("policy")
	if r.FormValue("global") == "true" {
		if err := s.svc.SetGlobalDoor(r.Context(), setting); err != nil {
			return err
		}
		http.Redirect(w, r.Request, "/admin/", http.StatusSeeOther)
		return nil
	}
	addr, err := conversation(r)
	if err != nil {
		return err
	}
	busy, err := s.busy(r.Context(), addr)
	if err != nil {
		return err
	}
	if busy {
		return s.renderOffice(w, r, addr, http.StatusConflict, "", service.BusyMessage)
	}
	if err := s.svc.SetDoor(r.Context(), addr, setting); err != nil {
		return err
	}
	return s.renderOffice(w, r, addr, http.StatusOK, fmt.Sprintf("Door policy set to %s; the next command runs with it.", word), "")
}

// The audit page lists the last auditShown changes and, apart, the last
// auditRefusalsShown refusals, out of the log's last events.MaxLast
// events: whoever is refused chooses how often, so refusals must not
// crowd the operators' own changes off the page.
const (
	auditShown         = 200
	auditRefusalsShown = 50
)

func (s *Server) auditPage(w http.ResponseWriter, r *request) error {
	entries, err := s.svc.Events().Last(events.MaxLast)
	if err != nil {
		return err
	}
	var changes, refusals []events.Event
	for i := len(entries) - 1; i >= 0; i-- {
		switch e := entries[i]; {
		case e.Action == events.Refused:
			if len(refusals) < auditRefusalsShown {
				refusals = append(refusals, e)
			}
		case len(changes) < auditShown:
			changes = append(changes, e)
		}
	}
	s.render(w, http.StatusOK, "audit.html", map[string]any{"Page": s.page(r, "Audit log"), "Entries": changes, "Refusals": refusals})
	return nil
}

// fail answers an action or page that failed with the error's message
// and a status from its class; nothing else of the request is shown.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	status := http.StatusInternalServerError
	switch {
	case errdefs.IsInvalid(err):
		status = http.StatusBadRequest
	case errdefs.IsNotFound(err):
		status = http.StatusNotFound
	case errdefs.IsConflict(err), errdefs.IsFailedPrecondition(err):
		status = http.StatusConflict
	case errdefs.IsNotSupported(err):
		status = http.StatusNotImplemented
	case errdefs.IsUnavailable(err):
		status = http.StatusServiceUnavailable
	}
	if status == http.StatusInternalServerError {
		s.log.Error("admin: request failed", "path", r.URL.Path, "error", err)
	}
	s.svc.CountRefusal(r.Context(), metrics.SurfacePortal, err)
	if status == http.StatusNotFound {
		notFound(w, err.Error())
		return
	}
	refuse(w, status, err.Error())
}

// busy reports whether a command runs in the conversation's runtime,
// through the portal's lifecycle (which tests fake).
func (s *Server) busy(ctx context.Context, addr office.Address) (bool, error) {
	lc, err := lifecycleFor(s, ctx)
	if err != nil || lc == nil {
		return false, err
	}
	return service.BusyIn(ctx, lc, addr)
}
