package api_test

import (
	"encoding/json"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hutchsandbox/hutch/internal/api"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/sandbox/mock"
	"github.com/hutchsandbox/hutch/internal/service"
)

// TestSandbox_Managed drives /v1/sandbox/* of a daemon in a managed mode,
// its runtimes a mock (the engine is not under test here): status before
// and after a command, boost, temporary limits, stop, remove, and the
// refusals, with their codes.
func TestSandbox_Managed(t *testing.T) {
	layout, err := service.ResolveLayout(service.LayoutOptions{StateDir: filepath.Join(t.TempDir(), "state"), Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	svc := service.New(layout, nil)
	mode := sandbox.Mode{Kind: sandbox.KindImage, Target: "busybox"}
	svc.SetRuntime(mode, mock.New(mock.Config{Mode: mode}))
	ts := httptest.NewServer((&api.Server{Service: svc, Mode: mode, Version: "test"}).Handler())
	t.Cleanup(ts.Close)
	status := func(path, body string, wantCode int) api.Status {
		t.Helper()
		code, out := post(t, ts, path, `{`+conv+body+`}`)
		var st api.Status
		if code != wantCode || (code == 200 && json.Unmarshal([]byte(out), &st) != nil) {
			t.Fatalf("%s: %d %s; want %d", path, code, out, wantCode)
		}
		return st
	}
	if st := status("/v1/sandbox/status", "", 200); st.State != "missing" {
		t.Errorf("before any command: %+v", st)
	}
	code, out := post(t, ts, "/v1/sandbox/boost", `{`+conv+`}`)
	if code != 412 || !strings.Contains(out, "is not running; boosts and temporary limits last one run") {
		t.Errorf("boost before any command: %d %s", code, out)
	}
	if code, out := post(t, ts, "/v1/exec", `{`+conv+`,"command":"true"}`); code != 200 || !strings.Contains(out, `"exitCode":0`) {
		t.Fatalf("exec: %d %s", code, out)
	}
	st := status("/v1/sandbox/status", "", 200)
	if st.State != "running" || st.ID == "" || st.ImageID != "sha256:mock-busybox" || st.CPUs != 0.5 {
		t.Errorf("after a command: %+v", st)
	}
	if st := status("/v1/sandbox/boost", `,"cpus":"1.5"`, 200); !st.Boosted || st.CPUs != 1.5 {
		t.Errorf("boost: %+v", st)
	}
	if st := status("/v1/sandbox/limits", `,"memory":"512m","pids":"100"`, 200); !st.TempLimits || st.MemoryBytes != 512<<20 || st.Pids != 100 || st.CPUs != 1.5 {
		t.Errorf("limits: %+v", st)
	}
	if code, out := post(t, ts, "/v1/sandbox/limits", `{`+conv+`}`); code != 400 || !strings.Contains(out, "Give at least one of cpus, memory, pids") {
		t.Errorf("limits with none: %d %s", code, out)
	}
	resp, err := ts.Client().Get(ts.URL + "/v1/sandbox/runtimes")
	if err != nil {
		t.Fatal(err)
	}
	var list []api.Status
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil || len(list) != 1 || list[0].OfficeKey != st.OfficeKey || list[0].Name != mock.Name(st.OfficeKey) || list[0].Mode != "image" {
		t.Errorf("runtimes: %+v, %v", list, err)
	}
	_ = resp.Body.Close()
	if st := status("/v1/sandbox/stop", "", 200); st.State != "stopped" || st.Boosted || st.TempLimits {
		t.Errorf("stop: %+v", st)
	}
	if st := status("/v1/sandbox/remove", "", 200); st.State != "missing" {
		t.Errorf("remove: %+v", st)
	}
}
