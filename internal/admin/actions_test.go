package admin

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/events"
	"github.com/hutchsandbox/hutch/internal/office"
	"github.com/hutchsandbox/hutch/internal/sandbox"
)

// fakeLifecycle stands in for an engine's runtimes: it records the calls
// it gets and answers with what a test set. It covers what a unit test
// cannot have (an engine) and faults an engine does not give on demand.
type fakeLifecycle struct {
	mu    sync.Mutex
	calls []string // "boost <key> <limits>", "stop <key>", "remove <key>"

	boosted sandbox.Status
	err     error // returned by Boost, Stop and Remove when set
	active  int   // the commands Status says run
}

func (f *fakeLifecycle) record(call string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, call)
	return f.err
}

func (f *fakeLifecycle) called() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

func (f *fakeLifecycle) List(context.Context) ([]sandbox.Status, error) { return nil, nil }
func (f *fakeLifecycle) Status(_ context.Context, key string) (sandbox.Status, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return sandbox.Status{OfficeKey: key, State: sandbox.StateRunning, ActiveCommands: f.active}, nil
}
func (f *fakeLifecycle) Stop(_ context.Context, key string) error   { return f.record("stop " + key) }
func (f *fakeLifecycle) Remove(_ context.Context, key string) error { return f.record("remove " + key) }
func (f *fakeLifecycle) Boost(_ context.Context, key string, l sandbox.Limits) (sandbox.Status, error) {
	if err := f.record(fmt.Sprintf("boost %s %+v", key, l)); err != nil {
		return sandbox.Status{}, err
	}
	return f.boosted, nil
}
func (f *fakeLifecycle) SetLimits(context.Context, string, sandbox.Limits) (sandbox.Status, error) {
	return sandbox.Status{}, errdefs.New(errdefs.ErrNotSupported, "not in the fake")
}
func (f *fakeLifecycle) StopIdle(context.Context, time.Duration) ([]string, error) { return nil, nil }

var _ sandbox.Lifecycle = (*fakeLifecycle)(nil)

// withFakeLifecycle makes every runtime action of the portal reach fake
// instead of the mode's engine. Tests that call it must not run in
// parallel: it replaces a package variable.
func withFakeLifecycle(t *testing.T, fake *fakeLifecycle) {
	t.Helper()
	old := lifecycleFor
	lifecycleFor = func(s *Server, _ context.Context) (sandbox.Lifecycle, error) { return s.svc.Recording(fake), nil }
	t.Cleanup(func() { lifecycleFor = old })
}

// actionPortal is a signed-in portal whose runtime actions reach a fake
// lifecycle; the pages themselves run in host mode (no engine).
func actionPortal(t *testing.T, fake *fakeLifecycle) (*portal, *browser, string) {
	t.Helper()
	p := newPortal(t)
	if fake != nil {
		withFakeLifecycle(t, fake)
	}
	// The conversation the actions name has an office (its first command
	// registered it): the office page of one without is a 404.
	addr, _ := office.NewAddress("web", "x")
	if err := p.svc.SetChannelKind(addr, "im"); err != nil {
		t.Fatal(err)
	}
	link, _, _ := p.srv.Link("ada", 0)
	b := p.browser(t)
	csrf := b.signIn(link)
	return p, b, csrf
}

func conv(csrf string, extra ...string) url.Values {
	v := url.Values{"csrf": {csrf}, "platform": {"web"}, "conversation": {"x"}}
	for i := 0; i+1 < len(extra); i += 2 {
		v.Set(extra[i], extra[i+1])
	}
	return v
}

func keyOf(t *testing.T, platform, id string) string {
	t.Helper()
	a, err := office.NewAddress(platform, id)
	if err != nil {
		t.Fatal(err)
	}
	return string(a.Key())
}

// lastEntry returns the newest event but refusals: the last change.
func lastEntry(t *testing.T, p *portal) events.Event {
	t.Helper()
	entries, err := p.svc.Events().Last(50)
	if err != nil {
		t.Fatal(err)
	}
	for i := len(entries) - 1; i >= 0; i-- {
		if entries[i].Action != events.Refused {
			return entries[i]
		}
	}
	t.Fatalf("no change in the event log: %+v", entries)
	return events.Event{}
}

func TestBoost(t *testing.T) {
	fake := &fakeLifecycle{boosted: sandbox.Status{State: sandbox.StateRunning, Boosted: true, Limits: sandbox.Limits{CPUs: 2, MemoryBytes: 4 << 30, Pids: 1024}}}
	p, b, csrf := actionPortal(t, fake)
	code, body := b.do(http.MethodPost, p.ts.URL+"/admin/boost", conv(csrf))
	const want = "Boosted web/x until its runtime stops: 2 CPUs, 4 GiB."
	if code != http.StatusOK || !strings.Contains(body, want) || !strings.Contains(body, "Office web/x") {
		t.Fatalf("boost: %d\n%s", code, body)
	}
	// The boost size of the settings as they are at the boost (here the
	// defaults: nothing is set).
	if got, want := fake.called(), []string{"boost " + keyOf(t, "web", "x") + " {CPUs:2 MemoryBytes:4294967296 Pids:0}"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("calls %q, want %q", got, want)
	}
	if e := lastEntry(t, p); e.Surface != "portal" || e.Who != "ada" || e.Action != events.LimitsBoost || e.Target != keyOf(t, "web", "x") || e.Detail != "cpus=2 memory=4096MiB pids=1024" {
		t.Errorf("audit entry %+v", e)
	}

	// A kube runtime re-created to take the boost says so.
	fake.boosted = sandbox.Status{State: sandbox.StateRunning, Boosted: true, Limits: sandbox.Limits{CPUs: 1, MemoryBytes: 1536 << 20}, LimitsApplied: sandbox.LimitsAppliedRecreated}
	code, body = b.do(http.MethodPost, p.ts.URL+"/admin/boost", conv(csrf))
	if code != http.StatusOK || !strings.Contains(body, "Boosted web/x until its runtime stops: 1 CPU, 1.5 GiB. "+fake.boosted.AppliedNote()) {
		t.Errorf("boost that re-created: %d\n%s", code, body)
	}
}

func TestBoost_Refusals(t *testing.T) {
	fake := &fakeLifecycle{}
	p, b, csrf := actionPortal(t, fake)
	key := keyOf(t, "web", "x")
	for _, tc := range []struct {
		name string
		err  error
		code int
	}{
		{"missing", errdefs.New(errdefs.ErrNotFound, "No runtime for office "+key), http.StatusNotFound},
		{"not_running", sandbox.NotRunning(key), http.StatusConflict},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake.err = tc.err
			code, body := b.do(http.MethodPost, p.ts.URL+"/admin/boost", conv(csrf))
			if code != tc.code || !strings.Contains(body, tc.err.Error()) {
				t.Errorf("%d, want %d with %q\n%s", code, tc.code, tc.err, body)
			}
		})
	}
	// The refusal is an event naming who was refused what.
	entries, err := p.svc.Events().Last(50)
	if err != nil {
		t.Fatal(err)
	}
	var refusal *events.Event
	for i := range entries {
		if entries[i].Action == events.Refused {
			refusal = &entries[i]
		}
	}
	if refusal == nil || refusal.Surface != events.SurfacePortal || refusal.Who == "" || refusal.Target != "web/x" {
		t.Errorf("the refused boost's event: %+v, want the portal's user and web/x", refusal)
	}
	// Without the CSRF token nothing reaches the lifecycle.
	fake.err = nil
	before := len(fake.called())
	f := conv(csrf)
	f.Del("csrf")
	if code, body := b.do(http.MethodPost, p.ts.URL+"/admin/boost", f); code != http.StatusForbidden || !strings.Contains(body, "did not come from the portal") {
		t.Errorf("boost without CSRF: %d\n%s", code, body)
	}
	if n := len(fake.called()); n != before {
		t.Errorf("a refused boost reached the lifecycle: %q", fake.called())
	}
	if e := lastEntry(t, p); e.Action != events.PortalSignIn {
		t.Errorf("a refused action was audited: %+v", e)
	}
}

const (
	stopConsequence   = "The runtime of web/x stops; its running commands are killed; the next command starts it again."
	removeConsequence = "The runtime of web/x is deleted with what it installed outside its office; the office and the vault stay."
)

func TestStopAndRemove_Confirmation(t *testing.T) {
	key := keyOf(t, "web", "x")
	for _, tc := range []struct {
		action, consequence, flash, audit string
	}{
		{"stop", stopConsequence, "Stopped the runtime of web/x; the next command starts it again.", events.RuntimeStopped},
		{"remove", removeConsequence, "Removed the runtime of web/x; the next command makes a new one.", events.RuntimeRemoved},
	} {
		t.Run(tc.action, func(t *testing.T) {
			fake := &fakeLifecycle{}
			p, b, csrf := actionPortal(t, fake)
			verb := strings.ToUpper(tc.action[:1]) + tc.action[1:]

			// The office page links to the confirmation.
			_, office := b.do(http.MethodGet, p.ts.URL+"/admin/office?platform=web&conversation=x", nil)
			if !strings.Contains(office, `href="/admin/confirm?action=`+tc.action+`&amp;platform=web&amp;conversation=x" aria-label="`+verb+` web/x"`) {
				t.Errorf("the office page has no %s link:\n%s", tc.action, office)
			}
			// The confirmation says what will happen and acts on nothing.
			code, body := b.do(http.MethodGet, p.ts.URL+"/admin/confirm?action="+tc.action+"&platform=web&conversation=x", nil)
			if code != http.StatusOK || !strings.Contains(body, tc.consequence) || !strings.Contains(body, verb+" the runtime of web/x?") ||
				!strings.Contains(body, `name="confirmed" value="yes"`) || !strings.Contains(body, `action="/admin/`+tc.action+`"`) {
				t.Fatalf("confirmation page: %d\n%s", code, body)
			}
			// A POST without confirmed=yes shows the confirmation again.
			for _, confirmed := range []string{"", "no"} {
				code, body = b.do(http.MethodPost, p.ts.URL+"/admin/"+tc.action, conv(csrf, "confirmed", confirmed))
				if code != http.StatusOK || !strings.Contains(body, tc.consequence) {
					t.Errorf("unconfirmed %s (%q): %d\n%s", tc.action, confirmed, code, body)
				}
			}
			if calls := fake.called(); len(calls) != 0 {
				t.Fatalf("an unconfirmed %s acted: %q", tc.action, calls)
			}
			// Confirmed: done, said, audited.
			code, body = b.do(http.MethodPost, p.ts.URL+"/admin/"+tc.action, conv(csrf, "confirmed", "yes"))
			if code != http.StatusOK || !strings.Contains(body, tc.flash) {
				t.Fatalf("confirmed %s: %d\n%s", tc.action, code, body)
			}
			if calls := fake.called(); len(calls) != 1 || calls[0] != tc.action+" "+key {
				t.Errorf("calls %q", calls)
			}
			if e := lastEntry(t, p); e.Who != "ada" || e.Action != tc.audit || e.Target != key {
				t.Errorf("audit entry %+v", e)
			}
		})
	}
}

func TestStop_Missing(t *testing.T) {
	key := keyOf(t, "web", "x")
	fake := &fakeLifecycle{err: errdefs.New(errdefs.ErrNotFound, "No runtime for office "+key)}
	p, b, csrf := actionPortal(t, fake)
	code, body := b.do(http.MethodPost, p.ts.URL+"/admin/stop", conv(csrf, "confirmed", "yes"))
	if code != http.StatusNotFound || !strings.Contains(body, "No runtime for office "+key) {
		t.Errorf("stop of a missing runtime: %d\n%s", code, body)
	}
	if e := lastEntry(t, p); e.Action != events.PortalSignIn {
		t.Errorf("a failed stop was audited: %+v", e)
	}
}

func TestConfirm_UnknownAction(t *testing.T) {
	p, b, _ := actionPortal(t, &fakeLifecycle{})
	code, body := b.do(http.MethodGet, p.ts.URL+"/admin/confirm?action=boost&platform=web&conversation=x", nil)
	if code != http.StatusBadRequest || !strings.Contains(body, `There is no action &#34;boost&#34; to confirm; the portal confirms stop and remove.`) {
		t.Errorf("confirm boost: %d\n%s", code, body)
	}
}

// TestActions_Unmanaged: in a mode without managed runtimes, every
// runtime action answers 409 with what mode it needs.
func TestActions_Unmanaged(t *testing.T) {
	p, b, csrf := actionPortal(t, nil)
	const want = "Sandbox &#39;host&#39; has no runtimes managed by hutch; boost, stop and remove need image:*, gondolin:default or kube:*"
	for _, req := range []struct {
		method, path string
		form         url.Values
	}{
		{http.MethodPost, "/admin/boost", conv(csrf)},
		{http.MethodGet, "/admin/confirm?action=stop&platform=web&conversation=x", nil},
		{http.MethodPost, "/admin/stop", conv(csrf, "confirmed", "yes")},
		{http.MethodPost, "/admin/remove", conv(csrf, "confirmed", "yes")},
	} {
		if code, body := b.do(req.method, p.ts.URL+req.path, req.form); code != http.StatusConflict || !strings.Contains(body, want) {
			t.Errorf("%s %s: %d\n%s", req.method, req.path, code, body)
		}
	}
}

func settingsOf(t *testing.T, p *portal) map[string]string {
	t.Helper()
	set, err := p.svc.RuntimeSettings()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, kv := range set {
		out[kv[0]] = kv[1]
	}
	return out
}

func TestLimits(t *testing.T) {
	p, b, csrf := actionPortal(t, nil)
	if err := p.svc.SetRuntimeSetting("sandbox.pids", "512"); err != nil {
		t.Fatal(err)
	}
	// The home page links to the page; the page shows what is set.
	if _, home := b.do(http.MethodGet, p.ts.URL+"/admin/", nil); !strings.Contains(home, `<a href="/admin/limits">`) {
		t.Errorf("the home page does not link to the limits:\n%s", home)
	}
	// Every field says the value in force: the one set, or the default,
	// marked so, and where a default comes from another setting, which.
	code, body := b.do(http.MethodGet, p.ts.URL+"/admin/limits", nil)
	if code != http.StatusOK || !strings.Contains(body, "Global limits and boost size") {
		t.Fatalf("limits page: %d\n%s", code, body)
	}
	for _, want := range []string{
		`<p id="sandbox-cpus-now" class="muted">In force: <strong>0.5 CPUs</strong> (default).`,
		`<p id="sandbox-memory-now" class="muted">In force: <strong>1 GiB</strong> (default).`,
		`<p id="sandbox-pids-now" class="muted">In force: <strong>512 processes</strong>, set to <code>512</code>.`,
		`<p id="sandbox-boost-cpus-now" class="muted">In force: <strong>2 CPUs</strong> (default).`,
		`<p id="sandbox-boost-memory-now" class="muted">In force: <strong>4 GiB</strong> (default).`,
		`<p id="sandbox-ceiling-cpus-now" class="muted">In force: <strong>2 CPUs</strong> (default: the boost size).`,
		`<p id="sandbox-ceiling-memory-now" class="muted">In force: <strong>4 GiB</strong> (default: the boost size).`,
		`<p id="sandbox-ceiling-pids-now" class="muted">In force: <strong>512 processes</strong> (default: sandbox.pids).`,
		"<legend>Ceiling: the most a boost or temporary limits may give a runtime, whoever asks</legend>",
		// The portal here runs in host mode, which applies none.
		`<p role="note">host mode applies no limits: these settings hold for the runtimes of image, gondolin and kube modes.</p>`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the limits page lacks %s", want)
		}
	}
	for _, key := range []string{"sandbox.cpus", "sandbox.memory", "sandbox.pids", "sandbox.boost.cpus", "sandbox.boost.memory"} {
		id := strings.ReplaceAll(key, ".", "-")
		if !strings.Contains(body, `<label for="`+id+`">`) || !strings.Contains(body, `<input id="`+id+`" name="`+key+`"`) || !strings.Contains(body, `name="clear" value="`+key+`"`) {
			t.Errorf("no labelled field and clear box for %s", key)
		}
	}

	// One bad value: 400, the error next to its field, nothing set.
	form := url.Values{"csrf": {csrf}, "sandbox.cpus": {"2"}, "sandbox.memory": {"12x"}, "sandbox.boost.cpus": {"4"}, "sandbox.boost.memory": {"16g"}, "clear": {"sandbox.pids"}}
	code, body = b.do(http.MethodPost, p.ts.URL+"/admin/limits", form)
	if code != http.StatusBadRequest || !strings.Contains(body, "Nothing was changed: correct the fields marked below.") ||
		!strings.Contains(body, `<p id="sandbox-memory-error" class="error">Memory &#34;12x&#34; must be a positive size such as 512m or 4g</p>`) ||
		!strings.Contains(body, `aria-describedby="sandbox-memory-now sandbox-memory-error" aria-invalid="true"`) ||
		!strings.Contains(body, `name="sandbox.memory" type="text" value="12x"`) {
		t.Fatalf("bad memory: %d\n%s", code, body)
	}
	if got := settingsOf(t, p); len(got) != 1 || got["sandbox.pids"] != "512" {
		t.Fatalf("a refused form changed the settings: %v", got)
	}
	if e := lastEntry(t, p); e.Surface == events.SurfacePortal && e.Action != events.PortalSignIn {
		t.Errorf("a refused form was audited: %+v", e)
	}

	// A value and Clear on one field: refused.
	code, body = b.do(http.MethodPost, p.ts.URL+"/admin/limits", url.Values{"csrf": {csrf}, "sandbox.pids": {"9"}, "clear": {"sandbox.pids"}})
	if code != http.StatusBadRequest || !strings.Contains(body, "Give a value or tick Clear, not both.") {
		t.Errorf("value and clear: %d\n%s", code, body)
	}
	// Nothing given: refused.
	code, body = b.do(http.MethodPost, p.ts.URL+"/admin/limits", url.Values{"csrf": {csrf}, "sandbox.cpus": {" "}})
	if code != http.StatusBadRequest || !strings.Contains(body, "Nothing was changed: give a value or tick Clear for at least one setting.") {
		t.Errorf("empty form: %d\n%s", code, body)
	}

	// Valid: each filled field set, the cleared one unset, the rest kept.
	form.Set("sandbox.memory", "8g")
	code, body = b.do(http.MethodPost, p.ts.URL+"/admin/limits", form)
	const saved = "Saved: set sandbox.cpus to 2, set sandbox.memory to 8g, cleared sandbox.pids (its default applies), set sandbox.boost.cpus to 4, set sandbox.boost.memory to 16g. Running runtimes take on the limits at their next command; a boost size applies to the next boost."
	if code != http.StatusOK || !strings.Contains(body, saved) || !strings.Contains(body, "In force: <strong>8 GiB</strong>, set to <code>8g</code>.") ||
		!strings.Contains(body, `<p id="sandbox-ceiling-cpus-now" class="muted">In force: <strong>4 CPUs</strong> (default: the boost size).`) {
		t.Fatalf("limits: %d\n%s", code, body)
	}
	want := map[string]string{"sandbox.cpus": "2", "sandbox.memory": "8g", "sandbox.boost.cpus": "4", "sandbox.boost.memory": "16g"}
	if got := settingsOf(t, p); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("settings %v, want %v", got, want)
	}
	entries, err := p.svc.Events().Last(5)
	if err != nil {
		t.Fatal(err)
	}
	var audited []string
	for _, e := range entries {
		if e.Who != "ada" || e.Target != "global" || e.Surface != "portal" {
			t.Errorf("audit entry %+v", e)
		}
		audited = append(audited, e.Action+": "+e.Detail)
	}
	wantAudit := []string{
		"setting.set: sandbox.cpus=2",
		"setting.set: sandbox.memory=8g",
		"setting.set: sandbox.pids cleared",
		"setting.set: sandbox.boost.cpus=4",
		"setting.set: sandbox.boost.memory=16g",
	}
	if fmt.Sprint(audited) != fmt.Sprint(wantAudit) {
		t.Errorf("audit %q, want %q", audited, wantAudit)
	}
}

// TestHome_RuntimeActions: each running runtime's row offers boost, stop
// and remove, labelled with its conversation.
func TestHome_RuntimeActions(t *testing.T) {
	p := newPortal(t)
	var out strings.Builder
	err := p.srv.pages.ExecuteTemplate(&out, "home.html", map[string]any{
		"Page": page{Title: "Offices and runtimes", CSRF: "tok"}, "Managed": true,
		"Runtimes": []sandbox.Status{
			{Name: "hutch-a", Platform: "web", ConversationID: "x", State: sandbox.StateRunning},
			{Name: "hutch-b", Platform: "web", ConversationID: "y", State: sandbox.StateStopped},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	html := out.String()
	for _, want := range []string{
		`<button type="submit" aria-label="Boost web/x">Boost</button>`,
		`href="/admin/confirm?action=stop&amp;platform=web&amp;conversation=x" aria-label="Stop web/x"`,
		`href="/admin/confirm?action=remove&amp;platform=web&amp;conversation=x" aria-label="Remove web/x"`,
		`href="/admin/confirm?action=remove&amp;platform=web&amp;conversation=y" aria-label="Remove web/y"`,
	} {
		if !strings.Contains(html, want) {
			t.Errorf("home lacks %s", want)
		}
	}
	// A stopped runtime cannot be boosted or stopped.
	for _, no := range []string{`aria-label="Boost web/y"`, `aria-label="Stop web/y"`} {
		if strings.Contains(html, no) {
			t.Errorf("home offers %s", no)
		}
	}
}

// TestDoor_RefusedWhileBusy: a door change while a command runs in the
// conversation's runtime is refused with the reason, and changes nothing.
func TestDoor_RefusedWhileBusy(t *testing.T) {
	fake := &fakeLifecycle{active: 1}
	withFakeLifecycle(t, fake)
	p := newPortal(t)
	addr, _ := office.NewAddress("web", "busy")
	if err := p.svc.SetChannelKind(addr, "im"); err != nil {
		t.Fatal(err)
	}
	link, _, _ := p.srv.Link("ada", 0)
	b := p.browser(t)
	csrf := b.signIn(link)
	form := url.Values{"csrf": {csrf}, "platform": {"web"}, "conversation": {"busy"}, "policy": {"full"}}
	code, body := b.do(http.MethodPost, p.ts.URL+"/admin/door", form)
	if code != http.StatusConflict || !strings.Contains(body, "Conversation is busy; retry when the current run finishes") {
		t.Errorf("door change while busy: %d\n%s", code, body)
	}
	pol, err := p.svc.Resolve(addr, sandbox.Mode{Kind: sandbox.KindHost}, "")
	if err != nil || pol.Decision.Policy.DoorWord() == "full" {
		t.Errorf("a refused door change took effect: %v, %v", pol.Decision.Policy, err)
	}
	fake.mu.Lock()
	fake.active = 0
	fake.mu.Unlock()
	if code, body := b.do(http.MethodPost, p.ts.URL+"/admin/door", form); code != http.StatusOK || !strings.Contains(body, "Door policy set to full") {
		t.Errorf("door change once idle: %d\n%s", code, body)
	}
}
