package features_test

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/hutchsandbox/hutch/internal/devcontainer/features"
	"github.com/hutchsandbox/hutch/internal/devcontainer/features/featuretest"
	"github.com/hutchsandbox/hutch/internal/errdefs"
)

func TestParseMirrors(t *testing.T) {
	tests := []struct {
		in      string
		want    features.Mirrors
		wantErr string
	}{
		{in: "", want: nil},
		{in: " , ", want: nil},
		{in: "ghcr.io=registry.internal:5000", want: features.Mirrors{"ghcr.io": "registry.internal:5000"}},
		{in: " GHCR.io = 127.0.0.1:5000 ,mcr.microsoft.com=localhost:5001,", want: features.Mirrors{"ghcr.io": "127.0.0.1:5000", "mcr.microsoft.com": "localhost:5001"}},
		{in: "ghcr.io", wantErr: `"ghcr.io" is not registry=mirror; write registry=mirror, each a host with an optional port, e.g. ghcr.io=registry.internal:5000`},
		{in: "ghcr.io=", wantErr: `"ghcr.io=" is not registry=mirror`},
		{in: "ghcr.io=http://127.0.0.1:5000", wantErr: `"ghcr.io=http://127.0.0.1:5000" names a scheme`},
		{in: "ghcr.io=registry.internal/path", wantErr: `names "registry.internal/path", which is not a registry host`},
		{in: "ghcr .io=x.io", wantErr: `names "ghcr .io", which is not a registry host`},
		{in: "ghcr.io=a.io,ghcr.io=b.io", wantErr: `"ghcr.io=b.io" names a second mirror of ghcr.io`},
	}
	for _, tt := range tests {
		got, err := features.ParseMirrors(tt.in)
		if tt.wantErr != "" {
			if err == nil || !errdefs.IsInvalid(err) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseMirrors(%q) = %v, %v; want an invalid error containing %q", tt.in, got, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseMirrors(%q): %v", tt.in, err)
			continue
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("ParseMirrors(%q) (-want +got):\n%s", tt.in, diff)
		}
	}
}

// TestFetch_Mirror: a feature named at ghcr.io is fetched from its
// mirror, the in-process registry on the loopback (over plain HTTP, which
// only the loopback gets); errors name the feature as written and the
// mirror asked. A mirror elsewhere is not spoken to without TLS.
func TestFetch_Mirror(t *testing.T) {
	reg := featuretest.NewRegistry(t)
	digest := reg.Push(t, "devcontainers/features/node:1", withRegistry(nodeFiles, reg.Host))
	f := fetcher(t)
	f.Mirrors = features.Mirrors{"ghcr.io": reg.Host}
	got, err := f.Fetch(context.Background(), mustRef(t, "ghcr.io/devcontainers/features/node:1"))
	if err != nil {
		t.Fatal(err)
	}
	if got.Digest != digest.String() || got.Metadata.ID != "node" {
		t.Errorf("Fetched = %+v", got)
	}

	_, err = f.Fetch(context.Background(), mustRef(t, "ghcr.io/devcontainers/features/absent:1"))
	want := "feature ghcr.io/devcontainers/features/absent:1: not found in registry " + reg.Host + " (the mirror of ghcr.io)"
	if !errdefs.IsNotFound(err) || !strings.Contains(err.Error(), want) {
		t.Errorf("a feature the mirror lacks: %v, want not found containing %q", err, want)
	}

	f.Mirrors = features.Mirrors{"ghcr.io": "10.0.0.1:5000"}
	_, err = f.Fetch(context.Background(), mustRef(t, "ghcr.io/devcontainers/features/node:1"))
	if !errdefs.IsUnavailable(err) || !strings.Contains(err.Error(), "cannot reach 10.0.0.1:5000 (the mirror of ghcr.io)") || !strings.Contains(err.Error(), "plain HTTP to 10.0.0.1:5000 refused") {
		t.Errorf("a mirror on a private address: %v", err)
	}
}
