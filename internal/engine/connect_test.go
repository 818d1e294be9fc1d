package engine_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/moby/moby/client"

	"github.com/hutchsandbox/hutch/internal/engine"
	"github.com/hutchsandbox/hutch/internal/testenv"
)

// fakeEngine answers a ping with the given headers and GET /version with
// a Podman component, counting the /version requests.
func fakeEngine(t *testing.T, ping map[string]string) *atomic.Int32 {
	t.Helper()
	var versions atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasSuffix(r.URL.Path, "/_ping"):
			w.Header().Set("Api-Version", "1.41")
			for k, v := range ping {
				w.Header().Set(k, v)
			}
			_, _ = w.Write([]byte("OK"))
		case strings.HasSuffix(r.URL.Path, "/version"):
			versions.Add(1)
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"Version":"4.9.0","ApiVersion":"1.41","Components":[{"Name":"Podman Engine","Version":"4.9.0"}]}`))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	t.Setenv("DOCKER_HOST", "tcp://"+srv.Listener.Addr().String())
	t.Setenv("DOCKER_API_VERSION", "")
	return &versions
}

func TestConnect_FlavorFromThePing(t *testing.T) {
	for _, tt := range []struct {
		name        string
		ping        map[string]string
		flavor      engine.Flavor
		version     string
		versionAsks int32
	}{
		{"docker", map[string]string{"Server": "Docker/20.10.24+dfsg1 (linux)"}, engine.FlavorDocker, "20.10.24+dfsg1", 0},
		{"podman", map[string]string{"Server": "Libpod/4.3.1 (linux)", "Libpod-Api-Version": "4.3.1"}, engine.FlavorPodman, "4.3.1", 0},
		// A proxy that drops the Server header: /version says.
		{"no_server_header", nil, engine.FlavorPodman, "4.9.0", 1},
		{"unknown_server", map[string]string{"Server": "nginx"}, engine.FlavorPodman, "4.9.0", 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			asks := fakeEngine(t, tt.ping)
			e, err := engine.Connect(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = e.Close() }()
			if e.Flavor != tt.flavor || e.ServerVersion != tt.version || asks.Load() != tt.versionAsks {
				t.Errorf("Connect: flavour %s, version %q, %d requests of /version; want %s, %q, %d", e.Flavor, e.ServerVersion, asks.Load(), tt.flavor, tt.version, tt.versionAsks)
			}
		})
	}
}

// Against the real engine (Docker, and Podman in CI's Podman step), the
// ping's headers say what GET /version does.
func TestConnect_AgreesWithVersion(t *testing.T) {
	cli := testenv.Docker(t)
	e, err := engine.Connect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = e.Close() }()
	v, err := cli.ServerVersion(context.Background(), client.ServerVersionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := engine.FlavorDocker
	for _, c := range v.Components {
		if strings.Contains(strings.ToLower(c.Name), "podman") {
			want = engine.FlavorPodman
		}
	}
	if e.Flavor != want || e.ServerVersion != v.Version {
		t.Errorf("Connect: %s %q; GET /version: %s %q", e.Flavor, e.ServerVersion, want, v.Version)
	}
}
