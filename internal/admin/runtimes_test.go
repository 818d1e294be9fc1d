package admin

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/internal/sandbox"
)

// listingLifecycle is a fakeLifecycle whose List answers runtimes.
type listingLifecycle struct {
	fakeLifecycle
	runtimes []sandbox.Status
}

func (f *listingLifecycle) List(context.Context) ([]sandbox.Status, error) { return f.runtimes, nil }

// Status answers the listed runtime of key, else a missing one.
func (f *listingLifecycle) Status(_ context.Context, key string) (sandbox.Status, error) {
	for _, st := range f.runtimes {
		if st.OfficeKey == key {
			return st, nil
		}
	}
	return sandbox.Status{OfficeKey: key, State: sandbox.StateMissing}, nil
}

// TestHome_IdleStopAndRecreated: the runtimes table says when each
// runtime stops for idling (from its last activity and the default idle
// timeout, 10 minutes) and when and why it was last re-created.
func TestHome_IdleStopAndRecreated(t *testing.T) {
	p := newPortal(t)
	now := p.clock.now()
	row := func(name string, st sandbox.Status) sandbox.Status {
		st.Name, st.OfficeKey, st.Platform, st.ConversationID = name, name, "web", name
		return st
	}
	fake := &listingLifecycle{runtimes: []sandbox.Status{
		row("soon", sandbox.Status{State: sandbox.StateRunning, LastActivity: now.Add(-2*time.Minute - 48*time.Second),
			Recreated: now.Add(-3 * time.Minute), RecreatedBecause: "what it was built from changed (mounts)"}),
		row("due", sandbox.Status{State: sandbox.StateRunning, LastActivity: now.Add(-11 * time.Minute)}),
		row("busy", sandbox.Status{State: sandbox.StateRunning, LastActivity: now.Add(-time.Hour), ActiveCommands: 1}),
		row("stopped", sandbox.Status{State: sandbox.StateStopped, LastActivity: now.Add(-time.Minute)}),
	}}
	old := lifecycleFor
	lifecycleFor = func(*Server, context.Context) (sandbox.Lifecycle, error) { return fake, nil }
	t.Cleanup(func() { lifecycleFor = old })
	link, _, _ := p.srv.Link("ada", 0)
	b := p.browser(t)
	b.signIn(link)

	code, body := b.do(http.MethodGet, p.ts.URL+"/admin/", nil)
	if code != http.StatusOK {
		t.Fatalf("home: %d\n%s", code, body)
	}
	if !strings.Contains(body, `<th scope="col">Idle stop</th><th scope="col">Last re-created</th>`) {
		t.Errorf("no idle stop and last re-created columns:\n%s", body)
	}
	for name, want := range map[string]string{
		"soon":    "<td>in 7m12s</td>\n  <td>3 min ago: what it was built from changed (mounts)</td>",
		"due":     "<td>now</td>\n  <td>-</td>",
		"busy":    "<td>busy</td>\n  <td>-</td>",
		"stopped": "<td>-</td>\n  <td>-</td>",
	} {
		_, rest, ok := strings.Cut(body, `<code class="id muted" title="`+name+`">`+name+"</code></th>")
		if row, _, _ := strings.Cut(rest, "</tr>"); !ok || !strings.Contains(row, want) {
			t.Errorf("runtime %s: want %q in its row:\n%s", name, want, row)
		}
	}
}
