package features

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestGuardedTransport(t *testing.T) {
	body := strings.Repeat("m", maxManifest+10)
	var reached []string
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		reached = append(reached, r.URL.String())
		return &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader(body))}, nil
	})
	tr := guardedTransport{base: base}
	tests := []struct {
		url     string
		refused bool
	}{
		{"http://127.0.0.1:5000/v2/", false},
		{"http://localhost:5000/v2/", false},
		{"http://[::1]:5000/v2/", false},
		{"https://10.0.0.5:5000/v2/", false},
		{"http://10.0.0.5:5000/v2/", true},
		{"http://192.168.1.2/v2/", true},
		{"http://registry.local/v2/", true},
		{"http://auth.example.com/token?scope=x", true},
	}
	for _, tt := range tests {
		reached = nil
		req, err := http.NewRequest(http.MethodGet, tt.url, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := tr.RoundTrip(req)
		if tt.refused {
			if err == nil || !strings.Contains(err.Error(), "refused: only a registry on the loopback is reached without TLS") || reached != nil {
				t.Errorf("%s: %v, reached %v; want refused before any request", tt.url, err, reached)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tt.url, err)
			continue
		}
		_ = resp.Body.Close()
	}

	// Manifests are cut at maxManifest; blobs are not the transport's
	// to cap.
	for path, wantErr := range map[string]bool{"/v2/a/b/manifests/1": true, "/v2/a/b/blobs/sha256:00": false} {
		req, _ := http.NewRequest(http.MethodGet, "http://127.0.0.1:1"+path, nil)
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		if wantErr != (err != nil) || (wantErr && (len(b) != maxManifest || !strings.Contains(err.Error(), "manifest is larger than 4 MiB"))) {
			t.Errorf("%s: read %d bytes, %v", path, len(b), err)
		}
	}
}
