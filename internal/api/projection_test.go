package api_test

import (
	"encoding/json"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hutchsandbox/hutch/internal/api"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/service"
)

// TestManagedProjection_PerMode: the health and policy answers carry
// managedProjection explicitly, false included, so a client can tell a
// mode that mounts exactly the door's projection from one that does not
// (host, container, cloudflare) without parsing display text.
func TestManagedProjection_PerMode(t *testing.T) {
	for _, tt := range []struct {
		mode string
		want bool
	}{
		{"host", false},
		{"container:box", false},
		{"cloudflare:sbx-1", false},
		{"image:debian:12", true},
		{"gondolin:default", true},
		{"kube:debian:12", true},
	} {
		t.Run(strings.ReplaceAll(tt.mode, ":", "_"), func(t *testing.T) {
			m, err := sandbox.ParseMode(tt.mode)
			if err != nil {
				t.Fatal(err)
			}
			layout, err := service.ResolveLayout(service.LayoutOptions{StateDir: filepath.Join(t.TempDir(), "state"), Getenv: func(string) string { return "" }})
			if err != nil {
				t.Fatal(err)
			}
			srv := &api.Server{Service: service.New(layout, nil), Mode: m, Version: "test", MaxBody: 64 << 10}
			ts := httptest.NewServer(srv.Handler())
			t.Cleanup(ts.Close)

			resp, err := ts.Client().Get(ts.URL + "/v1/health")
			if err != nil {
				t.Fatal(err)
			}
			var health map[string]any
			err = json.NewDecoder(resp.Body).Decode(&health)
			_ = resp.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			if got, ok := health["managedProjection"]; !ok || got != tt.want {
				t.Errorf("health managedProjection = %v (present %v), want %v: %v", got, ok, tt.want, health)
			}

			code, body := post(t, ts, "/v1/policy", `{`+conv+`}`)
			if code != 200 {
				t.Fatalf("policy: %d %s", code, body)
			}
			var pol map[string]any
			if err := json.Unmarshal([]byte(body), &pol); err != nil {
				t.Fatal(err)
			}
			if got, ok := pol["managedProjection"]; !ok || got != tt.want {
				t.Errorf("policy managedProjection = %v (present %v), want %v: %s", got, ok, tt.want, body)
			}
		})
	}
}
