package admin

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/office"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/sandbox/managed"
	"github.com/hutchsandbox/hutch/internal/settings"
)

// actionRoutes adds the runtime actions (boost, stop, remove) and the
// global limits. Every action is a POST through authed (session, CSRF,
// origin), goes through the service layer the CLI and the API use, and
// is written to the audit log once done. Stop and remove act only on a
// form that says confirmed=yes, which only the confirmation page sends.
func (s *Server) actionRoutes(mux *http.ServeMux) {
	mux.Handle("POST /admin/boost", s.authed(s.boost))
	mux.Handle("GET /admin/confirm", s.authed(s.confirmPage))
	mux.Handle("POST /admin/stop", s.authed(s.destroy("stop")))
	mux.Handle("POST /admin/remove", s.authed(s.destroy("remove")))
	mux.Handle("GET /admin/limits", s.authed(s.limitsPage))
	mux.Handle("POST /admin/limits", s.authed(s.setLimits))
}

// lifecycleFor returns the lifecycle of the daemon mode's runtimes, or
// nil when the mode has none hutch manages. Tests replace it with a fake
// below the engine boundary (they must not run in parallel then).
var lifecycleFor = func(s *Server, ctx context.Context) (sandbox.Lifecycle, error) {
	lc, err := s.lifecycle(ctx)
	if err != nil || lc == nil {
		return nil, err
	}
	return lc, nil
}

// managedLifecycle is lifecycleFor with a refusal for modes without
// managed runtimes.
func (s *Server) managedLifecycle(ctx context.Context) (sandbox.Lifecycle, error) {
	lc, err := lifecycleFor(s, ctx)
	if err != nil {
		return nil, err
	}
	if lc == nil {
		return nil, errdefs.New(errdefs.ErrFailedPrecondition, fmt.Sprintf(
			"Sandbox '%s' has no runtimes managed by hutch; boost, stop and remove need image:*, gondolin:default or kube:*", s.mode.Kind))
	}
	return lc, nil
}

// boost raises a conversation's limits to the configured boost size
// until its runtime stops. It needs no confirmation: it takes nothing
// away, and ends by itself.
func (s *Server) boost(w http.ResponseWriter, r *request) error {
	addr, err := conversation(r)
	if err != nil {
		return err
	}
	lc, err := s.managedLifecycle(r.Context())
	if err != nil {
		return err
	}
	// The boost size of the settings (sandbox.boost.*) as they are now.
	boost, err := s.svc.BoostSize()
	if err != nil {
		return err
	}
	st, err := lc.Boost(r.Context(), string(addr.Key()), boost)
	if err != nil {
		return err
	}
	s.refreshUsage(r.Context())
	size := limitsText(st.Limits)
	flash := fmt.Sprintf("Boosted %s until its runtime stops.", addr)
	if size != "" {
		flash = fmt.Sprintf("Boosted %s until its runtime stops: %s.", addr, size)
	}
	if note := st.AppliedNote(); note != "" {
		flash += " " + note
	}
	return s.renderOffice(w, r, addr, http.StatusOK, flash, "")
}

// limitsText renders the CPUs and memory of l ("2 CPUs, 4 GiB"),
// leaving out what is unset.
func limitsText(l sandbox.Limits) string {
	var parts []string
	if l.CPUs > 0 {
		parts = append(parts, sandbox.CPUCount(l.CPUs))
	}
	if l.MemoryBytes > 0 {
		parts = append(parts, byteSize(float64(l.MemoryBytes)))
	}
	return strings.Join(parts, ", ")
}

// destructive is what the confirmation page and the actions behind it
// say about stop and remove.
type destructive struct {
	// Verb is the action's route and button word.
	Verb string
	// Consequence says exactly what happens, of the conversation's runtime.
	Consequence func(office.Address) string
	// Flash is what the office page says once it is done.
	Flash func(office.Address) string
	// act is the Lifecycle method that does it.
	act func(sandbox.Lifecycle, context.Context, string) error
}

var destructives = map[string]destructive{
	"stop": {
		Verb: "Stop",
		Consequence: func(a office.Address) string {
			return fmt.Sprintf("The runtime of %s stops; its running commands are killed; the next command starts it again.", a)
		},
		Flash: func(a office.Address) string {
			return fmt.Sprintf("Stopped the runtime of %s; the next command starts it again.", a)
		},
		act: sandbox.Lifecycle.Stop,
	},
	"remove": {
		Verb: "Remove",
		Consequence: func(a office.Address) string {
			return fmt.Sprintf("The runtime of %s is deleted with what it installed outside its office; the office and the vault stay.", a)
		},
		Flash: func(a office.Address) string {
			return fmt.Sprintf("Removed the runtime of %s; the next command makes a new one.", a)
		},
		act: sandbox.Lifecycle.Remove,
	},
}

// confirmPage asks before a stop or a remove, saying what will happen.
func (s *Server) confirmPage(w http.ResponseWriter, r *request) error {
	action := r.FormValue("action")
	d, ok := destructives[action]
	if !ok {
		return errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("There is no action %q to confirm; the portal confirms stop and remove.", action))
	}
	addr, err := conversation(r)
	if err != nil {
		return err
	}
	if _, err := s.managedLifecycle(r.Context()); err != nil {
		return err
	}
	// Nothing to confirm about a conversation without an office.
	if err := s.officeExists(addr); err != nil {
		return err
	}
	s.renderConfirm(w, r, action, d, addr)
	return nil
}

func (s *Server) renderConfirm(w http.ResponseWriter, r *request, action string, d destructive, addr office.Address) {
	s.render(w, http.StatusOK, "confirm.html", map[string]any{
		"Page":        s.page(r, d.Verb+" the runtime of "+addr.String()+"?"),
		"Action":      action,
		"Verb":        d.Verb,
		"Address":     addr,
		"Consequence": d.Consequence(addr),
	})
}

// destroy returns the handler of stop or remove: without confirmed=yes
// it shows the confirmation again and does nothing.
func (s *Server) destroy(action string) func(http.ResponseWriter, *request) error {
	d := destructives[action]
	return func(w http.ResponseWriter, r *request) error {
		addr, err := conversation(r)
		if err != nil {
			return err
		}
		lc, err := s.managedLifecycle(r.Context())
		if err != nil {
			return err
		}
		if r.PostFormValue("confirmed") != "yes" {
			s.renderConfirm(w, r, action, d, addr)
			return nil
		}
		if err := d.act(lc, r.Context(), string(addr.Key())); err != nil {
			return err
		}
		s.refreshUsage(r.Context())
		return s.renderOffice(w, r, addr, http.StatusOK, d.Flash(addr), "")
	}
}

// limitKeys are the global settings the limits page edits, in its order,
// with the parser that checks each value before anything is set.
var limitKeys = []struct {
	key, label string
	parse      func(string) error
}{
	{"sandbox.cpus", "CPUs of a runtime", func(v string) error { _, err := settings.ParseCPUs(v); return err }},
	{"sandbox.memory", "Memory of a runtime", func(v string) error { _, err := settings.ParseMemory(v); return err }},
	{"sandbox.pids", "Process ceiling of a runtime", func(v string) error { _, err := settings.ParsePids(v); return err }},
	{"sandbox.boost.cpus", "CPUs of a boost", func(v string) error { _, err := settings.ParseCPUs(v); return err }},
	{"sandbox.boost.memory", "Memory of a boost", func(v string) error { _, err := settings.ParseMemory(v); return err }},
	{"sandbox.ceiling.cpus", "Most CPUs of a runtime", func(v string) error { _, err := settings.ParseCPUs(v); return err }},
	{"sandbox.ceiling.memory", "Most memory of a runtime", func(v string) error { _, err := settings.ParseMemory(v); return err }},
	{"sandbox.ceiling.pids", "Most processes of a runtime", func(v string) error { _, err := settings.ParsePids(v); return err }},
}

// limitField is one input of the limits page.
type limitField struct {
	Key, ID, Label, Help string
	// Current is the value set now ("" when the default applies).
	Current string
	// InForce is the value that applies now, set or default ("0.5
	// CPUs"); Default names where a default comes from when it is not
	// a number of its own ("the boost size"), "" otherwise.
	InForce, Default string
	// Value is what was typed, shown again with Error when refused.
	Value, Error string
	Clear        bool
}

// limitFields returns the limits page's fields with their current values
// and the values in force, defaults included.
func (s *Server) limitFields() ([]limitField, error) {
	set, err := s.svc.RuntimeSettings()
	if err != nil {
		return nil, err
	}
	inForce, err := s.limitsInForce()
	if err != nil {
		return nil, err
	}
	current := map[string]string{}
	for _, kv := range set {
		current[kv[0]] = kv[1]
	}
	help := map[string]string{}
	for _, k := range settings.RuntimeKeys {
		h := k.Help()
		help[k.Name()] = strings.ToUpper(h[:1]) + h[1:] + "."
	}
	out := make([]limitField, len(limitKeys))
	for i, k := range limitKeys {
		out[i] = limitField{
			Key: k.key, ID: strings.ReplaceAll(k.key, ".", "-"), Label: k.label,
			Help: help[k.key], Current: current[k.key], InForce: inForce[k.key],
		}
		if out[i].Current == "" {
			out[i].Default = defaultFrom[k.key]
		}
	}
	return out, nil
}

// defaultFrom says where an unset limit's default comes from, where that
// is another setting rather than a number of its own.
var defaultFrom = map[string]string{
	"sandbox.ceiling.cpus":   "the boost size",
	"sandbox.ceiling.memory": "the boost size",
	"sandbox.ceiling.pids":   "sandbox.pids",
}

// limitsInForce returns, by key, the value of each limit the runtimes get
// now: the one set, else its default. It is what the managed modes
// (image, gondolin, kube) apply: their defaults are one set.
func (s *Server) limitsInForce() (map[string]string, error) {
	rs, err := settings.LoadRuntime(settings.GlobalPath(s.svc.Layout().StateDir))
	if err != nil {
		return nil, err
	}
	base := sandbox.Limits{CPUs: rs.CPUs, MemoryBytes: rs.MemoryBytes, Pids: rs.Pids}.Over(managed.DefaultLimits)
	boost, err := s.svc.BoostSize()
	if err != nil {
		return nil, err
	}
	ceiling, err := s.svc.Ceiling()
	if err != nil {
		return nil, err
	}
	pids := func(n int64) string { return strconv.FormatInt(n, 10) + " processes" }
	mem := func(n int64) string { return byteSize(float64(n)) }
	return map[string]string{
		"sandbox.cpus": sandbox.CPUCount(base.CPUs), "sandbox.memory": mem(base.MemoryBytes), "sandbox.pids": pids(base.Pids),
		"sandbox.boost.cpus": sandbox.CPUCount(boost.CPUs), "sandbox.boost.memory": mem(boost.MemoryBytes),
		"sandbox.ceiling.cpus": sandbox.CPUCount(ceiling.CPUs), "sandbox.ceiling.memory": mem(ceiling.MemoryBytes), "sandbox.ceiling.pids": pids(ceiling.Pids),
	}, nil
}

func (s *Server) renderLimits(w http.ResponseWriter, r *request, status int, fields []limitField, flash, failure string) {
	p := s.page(r, "Global limits and boost size")
	p.Flash, p.Error = flash, failure
	note := ""
	if !sandbox.CapabilitiesOf(s.mode.Kind).Limits {
		note = fmt.Sprintf("%s mode applies no limits: these settings hold for the runtimes of image, gondolin and kube modes.", s.mode.Kind)
	}
	s.render(w, status, "limits.html", map[string]any{
		"Page": p, "Defaults": fields[:3], "Boost": fields[3:5], "Ceiling": fields[5:], "Note": note,
	})
}

func (s *Server) limitsPage(w http.ResponseWriter, r *request) error {
	fields, err := s.limitFields()
	if err != nil {
		return err
	}
	s.renderLimits(w, r, http.StatusOK, fields, "", "")
	return nil
}

// setLimits sets each filled field and unsets each cleared one, after
// checking all of them: one refused value sets nothing.
func (s *Server) setLimits(w http.ResponseWriter, r *request) error {
	fields, err := s.limitFields()
	if err != nil {
		return err
	}
	cleared := map[string]bool{}
	for _, k := range r.PostForm["clear"] {
		cleared[k] = true
	}
	refused, changes := false, 0
	for i, k := range limitKeys {
		f := &fields[i]
		f.Value, f.Clear = strings.TrimSpace(r.PostFormValue(k.key)), cleared[k.key]
		switch {
		case f.Value != "" && f.Clear:
			f.Error = "Give a value or tick Clear, not both."
		case f.Value != "":
			if err := k.parse(f.Value); err != nil {
				f.Error = err.Error()
			}
		}
		if f.Error != "" {
			refused = true
		}
		if f.Value != "" || f.Clear {
			changes++
		}
	}
	if refused {
		s.renderLimits(w, r, http.StatusBadRequest, fields, "", "Nothing was changed: correct the fields marked below.")
		return nil
	}
	if changes == 0 {
		s.renderLimits(w, r, http.StatusBadRequest, fields, "", "Nothing was changed: give a value or tick Clear for at least one setting.")
		return nil
	}
	var done []string
	for _, f := range fields {
		switch {
		case f.Clear:
			if err := s.svc.SetSetting(r.Context(), f.Key, ""); err != nil {
				return err
			}
			done = append(done, fmt.Sprintf("cleared %s (its default applies)", f.Key))
		case f.Value != "":
			if err := s.svc.SetSetting(r.Context(), f.Key, f.Value); err != nil {
				return err
			}
			done = append(done, fmt.Sprintf("set %s to %s", f.Key, f.Value))
		}
	}
	if fields, err = s.limitFields(); err != nil {
		return err
	}
	flash := "Saved: " + strings.Join(done, ", ") + ". Running runtimes take on the limits at their next command; a boost size applies to the next boost."
	s.renderLimits(w, r, http.StatusOK, fields, flash, "")
	return nil
}
