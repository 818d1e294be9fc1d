package service_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/events"
	"github.com/hutchsandbox/hutch/internal/metrics"
	"github.com/hutchsandbox/hutch/internal/office"
	"github.com/hutchsandbox/hutch/internal/projection"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/sandbox/mock"
	"github.com/hutchsandbox/hutch/internal/service"
)

// summary is an event without its time: "surface who action target: detail".
func summary(e events.Event) string {
	return strings.TrimSpace(fmt.Sprintf("%s %s %s %s: %s", e.Surface, e.Who, e.Action, e.Target, e.Detail))
}

func eventsSince(t *testing.T, svc *service.Service, n int) []string {
	t.Helper()
	evs, err := svc.Events().Last(events.MaxLast)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range evs[n:] {
		out = append(out, summary(e))
	}
	return out
}

// TestEvents_EveryChange: each change the service makes is one event,
// with the surface and who of its caller's context, names never values.
func TestEvents_EveryChange(t *testing.T) {
	svc := newService(t)
	mode := sandbox.Mode{Kind: sandbox.KindImage, Target: "busybox"}
	rt := mock.New(mock.Config{Mode: mode, Changed: svc.RuntimeChanged})
	svc.SetRuntime(mode, rt)
	addr, err := office.NewAddress("slack", "C0EVENTS")
	if err != nil {
		t.Fatal(err)
	}
	key := string(addr.Key())
	api := events.WithActor(context.Background(), events.Actor{Surface: events.SurfaceAPI})
	chat := events.WithActor(context.Background(), events.Actor{Surface: events.SurfaceChat, Who: "U123"})
	portal := events.WithActor(context.Background(), events.Actor{Surface: events.SurfacePortal, Who: "ada"})
	mcp := events.WithActor(context.Background(), events.Actor{Surface: events.SurfaceMCP})

	shared, _ := projection.ParseDoorWord("shared")
	if err := svc.SetDoor(chat, addr, shared); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Exec(api, service.ExecOptions{Address: addr, Mode: mode, Argv: []string{"true"}}); err != nil {
		t.Fatal(err)
	}
	full, _ := projection.ParseDoorWord("full")
	if err := svc.SetDoor(portal, addr, full); err != nil {
		t.Fatal(err)
	}
	// The new door's mounts re-create the runtime at the next command.
	if _, err := svc.Exec(mcp, service.ExecOptions{Address: addr, Mode: mode, Argv: []string{"true"}}); err != nil {
		t.Fatal(err)
	}
	lc, err := svc.ManagedFor(context.Background(), mode)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lc.Boost(chat, key, sandbox.Limits{CPUs: 1, MemoryBytes: 1 << 30}); err != nil {
		t.Fatal(err)
	}
	if _, err := lc.SetLimits(mcp, key, sandbox.Limits{CPUs: 0.5}); err != nil {
		t.Fatal(err)
	}
	if err := lc.Stop(portal, key); err != nil {
		t.Fatal(err)
	}
	if err := lc.Remove(api, key); err != nil {
		t.Fatal(err)
	}
	if err := svc.SetGlobalDoor(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	const secret = "s3cr3t-value-never-logged"
	if err := svc.VaultSetEnv(api, key, map[string]string{"GH_TOKEN": secret, "API_KEY": secret}); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.VaultSetPlaceholder(api, key, "GH_TOKEN", []string{"api.github.com"}, time.Time{}, false); err != nil {
		t.Fatal(err)
	}
	if err := svc.VaultClearPlaceholder(api, key, "GH_TOKEN"); err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(t.TempDir(), "cred.json")
	if err := os.WriteFile(src, []byte(secret), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := svc.VaultPutFile(api, key, "cred.json", src); err != nil {
		t.Fatal(err)
	}
	if err := svc.VaultRemove(api, key, "API_KEY"); err != nil {
		t.Fatal(err)
	}
	if err := svc.SetSetting(portal, "sandbox.pids", "512"); err != nil {
		t.Fatal(err)
	}
	svc.CountRefusal(mcp, metrics.SurfaceMCP, sandbox.OutsideRefusal("/etc"))
	svc.CountRefusal(api, metrics.SurfaceAPI, errdefs.New(errdefs.ErrInvalid, "bad input is no refusal"))
	// A runtime no office accounts for (made by hand here, as one of an
	// office whose record is gone would be) goes at reconcile, and says
	// why.
	ghost := "v1-web-ghost-0123456789abcdef"
	if _, err := rt.Exec(context.Background(), sandbox.Spec{OfficeKey: ghost, OfficeDir: t.TempDir()}, sandbox.ExecRequest{Argv: []string{"true"}}); err != nil {
		t.Fatal(err)
	}
	if rep, err := svc.ReconcileMode(context.Background(), mode); err != nil || len(rep.Removed) != 1 {
		t.Fatalf("reconcile: %+v, %v", rep, err)
	}

	want := []string{
		"chat U123 door.set " + addr.String() + ": trusted/shared-support/public",
		"api  runtime.created " + key + ":",
		"portal ada door.set " + addr.String() + ": trusted/full",
		"mcp  runtime.recreated " + key + ": what it was built from changed (mounts)",
		"chat U123 limits.boost " + key + ": cpus=1 memory=1024MiB pids=1024",
		"mcp  limits.set " + key + ": cpus=0.5",
		"portal ada runtime.stopped " + key + ":",
		"api  runtime.removed " + key + ":",
		"cli  door.set global: default",
		"api  vault.set " + key + ": API_KEY GH_TOKEN",
		"api  vault.placeholder " + key + ": GH_TOKEN for api.github.com",
		"api  vault.unmark " + key + ": GH_TOKEN",
		"api  vault.set " + key + ": file cred.json",
		"api  vault.remove " + key + ": API_KEY",
		"portal ada setting.set global: sandbox.pids=512",
		"mcp  refused : failed_precondition: " + sandbox.OutsideRefusal("/etc").Error(),
		"cli  runtime.created " + ghost + ":",
		"cli  runtime.removed " + ghost + ": no office accounts for it",
	}
	got := eventsSince(t, svc, 0)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	data, err := os.ReadFile(svc.Events().Path())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), secret) {
		t.Errorf("the event log holds a vault value:\n%s", data)
	}
}

// TestEvents_RefusalFlood: a flood of refusals from one source (an agent
// retrying what is refused through its office) writes that source's
// burst, then one event a while, which says how many like it were left
// out; the metrics count them all. A flood from many sources (anyone
// sending bad tokens, or many conversations) is bounded overall, and its
// next event says so too.
func TestEvents_RefusalFlood(t *testing.T) {
	t.Run("one source", func(t *testing.T) {
		svc := newService(t)
		service.SetRefusalSourceEvery(svc, 200*time.Millisecond)
		m := metrics.New("")
		svc.SetMetrics(m)
		agent := events.WithTarget(context.Background(), "web/agent")
		const n = 2000
		for range n {
			svc.CountRefusal(agent, metrics.SurfaceMCP, sandbox.OutsideRefusal("/etc/passwd"))
		}
		evs, err := svc.Events().Last(n)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) != 5 {
			t.Fatalf("a flood of %d refusals from one source wrote %d events; want its burst, 5", n, len(evs))
		}
		// Another source is not crowded out.
		other := events.WithTarget(context.Background(), "web/other")
		svc.CountRefusal(other, metrics.SurfaceMCP, sandbox.OutsideRefusal("/etc/shadow"))
		if evs, _ := svc.Events().Last(1); len(evs) != 1 || evs[0].Target != "web/other" || strings.HasPrefix(evs[0].Detail, "(") {
			t.Errorf("another source's refusal: %+v", evs)
		}
		time.Sleep(250 * time.Millisecond)
		svc.CountRefusal(agent, metrics.SurfaceMCP, sandbox.OutsideRefusal("/etc/passwd"))
		evs, err = svc.Events().Last(1)
		if err != nil || len(evs) != 1 {
			t.Fatalf("Last: %v", err)
		}
		if want := fmt.Sprintf("(%d more like it not logged: more than one each 200ms) failed_precondition: ", n-5); evs[0].Target != "web/agent" || !strings.HasPrefix(evs[0].Detail, want) {
			t.Errorf("the source's event after the flood: %+v; want it to begin %q", evs[0], want)
		}
		rec := httptest.NewRecorder()
		m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		if want := fmt.Sprintf(`hutch_refusals_total{reason="failed_precondition",surface="mcp"} %d`, n+2); !strings.Contains(rec.Body.String(), want) {
			t.Errorf("metrics lack %s", want)
		}
	})
	t.Run("many sources", func(t *testing.T) {
		svc := newService(t)
		const n = 1000
		for i := range n {
			ctx := events.WithTarget(context.Background(), fmt.Sprintf("web/c%d", i))
			svc.CountRefusal(ctx, metrics.SurfaceAPI, sandbox.OutsideRefusal("/etc/passwd"))
		}
		evs, err := svc.Events().Last(n)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) == 0 || len(evs) >= n/10 {
			t.Fatalf("a flood of %d refusals wrote %d events; want the overall burst's worth", n, len(evs))
		}
		// The overall rate admits one more shortly: it says what was left out.
		var last events.Event
		for i := 0; last.Detail == "" || !strings.Contains(last.Detail, "not logged"); i++ {
			time.Sleep(20 * time.Millisecond)
			ctx := events.WithTarget(context.Background(), fmt.Sprintf("web/late%d", i))
			svc.CountRefusal(ctx, metrics.SurfaceAPI, sandbox.OutsideRefusal("/etc/passwd"))
			if evs, err = svc.Events().Last(1); err != nil || len(evs) != 1 {
				t.Fatalf("Last: %v", err)
			}
			last = evs[0]
		}
		if !strings.HasPrefix(last.Detail, "(") || !strings.Contains(last.Detail, " refusals before this one not logged: more than 20 a second) ") {
			t.Errorf("the event after the flood: %q", last.Detail)
		}
	})
}

// TestEvents_RefusalLogBounded: refusals past the rate's bound, however
// long their text, rotate the log rather than grow it.
func TestEvents_RefusalLogBounded(t *testing.T) {
	svc := newService(t)
	service.UnlimitRefusalEvents(svc)
	svc.Events().MaxSize = 256 << 10
	refusal := sandbox.OutsideRefusal("/" + strings.Repeat("a\n", 3000))
	const n = 2000
	start := time.Now()
	for range n {
		svc.CountRefusal(context.Background(), metrics.SurfaceMCP, refusal)
	}
	took := time.Since(start)
	t.Logf("%d refusals recorded in %v (%v each)", n, took, took/n)
	var total int64
	for _, p := range []string{svc.Events().Path(), svc.Events().Path() + ".1"} {
		if st, err := os.Stat(p); err == nil {
			total += st.Size()
		}
	}
	if limit := 2 * (svc.Events().MaxSize + events.MaxLine); total > limit {
		t.Errorf("the log holds %d bytes after the flood, bound %d", total, limit)
	}
	evs, err := svc.Events().Last(10)
	if err != nil || len(evs) != 10 {
		t.Fatalf("Last after the flood: %d, %v", len(evs), err)
	}
	if len(evs[9].Detail) > events.MaxDetail {
		t.Errorf("a refusal's detail of %d bytes, bound %d", len(evs[9].Detail), events.MaxDetail)
	}
}
