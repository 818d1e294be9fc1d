package api_test

import (
	"encoding/json"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/hutchsandbox/hutch/internal/api"
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
	if diff := cmp.Diff(api.BuildVersion("1.2.3"), v); diff != "" {
		t.Errorf("GET /v1/version (-want +got):\n%s", diff)
	}
}
