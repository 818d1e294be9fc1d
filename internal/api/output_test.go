package api_test

import (
	"encoding/json"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/hutchsandbox/hutch/internal/api"
	"github.com/hutchsandbox/hutch/internal/metrics"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/service"
)

// TestVersionOf: the build info's module version, VCS settings and Go
// version, and what is said when the build recorded none.
func TestVersionOf(t *testing.T) {
	for _, c := range []struct {
		name string
		bi   *debug.BuildInfo
		want api.Version
	}{
		{"none", nil, api.Version{Version: "dev", Module: "(devel)", GoVersion: runtime.Version()}},
		{"test_binary", &debug.BuildInfo{GoVersion: "go1.26.8"}, api.Version{Version: "dev", Module: "(devel)", GoVersion: "go1.26.8"}},
		{"checkout", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
			{Key: "-trimpath", Value: "true"}, {Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: "5791841d"}, {Key: "vcs.time", Value: "2026-12-03T12:00:00Z"}, {Key: "vcs.modified", Value: "true"},
		}}, api.Version{Version: "dev", Module: "(devel)", Commit: "5791841d", CommitTime: "2026-12-03T12:00:00Z", Modified: true, GoVersion: "go1.26.8"}},
		{"go_install", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.4.0"}, Settings: []debug.BuildSetting{{Key: "vcs.modified", Value: "false"}}},
			api.Version{Version: "dev", Module: "v0.4.0", GoVersion: "go1.26.8"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if diff := cmp.Diff(c.want, api.VersionOf("dev", c.bi)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestVersion_Route: GET /v1/version answers the daemon's build, its
// version the one /v1/health reports.
func TestVersion_Route(t *testing.T) {
	layout, err := service.ResolveLayout(service.LayoutOptions{StateDir: filepath.Join(t.TempDir(), "state"), Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer((&api.Server{Service: service.New(layout, nil), Mode: sandbox.DefaultMode, Version: "1.2.3"}).Handler())
	t.Cleanup(ts.Close)
	resp, err := ts.Client().Get(ts.URL + "/v1/version")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	var v api.Version
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /v1/version: %d, %v", resp.StatusCode, err)
	}
	// Spelled out, not asked of the function the handler calls: the
	// server's version, this test binary's Go and module (a test binary
	// carries no VCS stamp).
	want := api.Version{Version: "1.2.3", Module: "(devel)", GoVersion: runtime.Version()}
	if diff := cmp.Diff(want, v); diff != "" {
		t.Errorf("GET /v1/version (-want +got):\n%s", diff)
	}
	// And hutch_build_info reads the build the same way.
	m := metrics.New("1.2.3")
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if line := `hutch_build_info{commit="unknown",goversion="` + runtime.Version() + `",version="1.2.3"} 1`; !strings.Contains(rec.Body.String(), line) {
		t.Errorf("metrics lack %s", line)
	}
}
