package cloudflare_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/sandbox/cloudflare"
)

func TestConfigFromEnv(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		env  map[string]string
		want cloudflare.Config
	}{
		{
			name: "hutch_names",
			env:  map[string]string{"HUTCH_BRIDGE_URL": "https://bridge.example.com/", "HUTCH_BRIDGE_TOKEN": "tok", "HUTCH_BRIDGE_CA": "/etc/ca.pem"},
			want: cloudflare.Config{SandboxID: "box", URL: "https://bridge.example.com/", Token: "tok", CAFile: "/etc/ca.pem"},
		},
		{
			name: "cloudflare_names",
			env:  map[string]string{"CLOUDFLARE_SANDBOX_URL": "http://127.0.0.1:8787", "CLOUDFLARE_SANDBOX_TOKEN": "cf"},
			want: cloudflare.Config{SandboxID: "box", URL: "http://127.0.0.1:8787", Token: "cf"},
		},
		{
			name: "hutch_names_win",
			env: map[string]string{
				"HUTCH_BRIDGE_URL": "https://a.example.com", "CLOUDFLARE_SANDBOX_URL": "https://b.example.com",
				"HUTCH_BRIDGE_TOKEN": "a", "CLOUDFLARE_SANDBOX_TOKEN": "b",
			},
			want: cloudflare.Config{SandboxID: "box", URL: "https://a.example.com", Token: "a"},
		},
		{
			name: "no_token",
			env:  map[string]string{"HUTCH_BRIDGE_URL": "https://a.example.com"},
			want: cloudflare.Config{SandboxID: "box", URL: "https://a.example.com"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := cloudflare.ConfigFromEnv("box", func(k string) string { return tt.env[k] })
			if err != nil {
				t.Fatalf("ConfigFromEnv: %v", err)
			}
			if diff := cmp.Diff(tt.want, got, cmpopts.IgnoreFields(cloudflare.Config{}, "HTTPClient", "Log")); diff != "" {
				t.Errorf("ConfigFromEnv mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestConfigFromEnv_Errors(t *testing.T) {
	t.Parallel()
	_, err := cloudflare.ConfigFromEnv("box", func(string) string { return "" })
	want := "Sandbox 'cloudflare:box' needs the URL of its bridge: set HUTCH_BRIDGE_URL (or CLOUDFLARE_SANDBOX_URL), and HUTCH_BRIDGE_TOKEN (or CLOUDFLARE_SANDBOX_TOKEN) when the bridge requires a token"
	if err == nil || err.Error() != want || !errdefs.IsFailedPrecondition(err) {
		t.Errorf("ConfigFromEnv without a URL: %v; want %q of class ErrFailedPrecondition", err, want)
	}
	for _, u := range []string{"bridge.example.com", "ftp://bridge.example.com", "https://", "https://h/?q=1"} {
		_, err := cloudflare.ConfigFromEnv("box", func(k string) string {
			if k == "HUTCH_BRIDGE_URL" {
				return u
			}
			return ""
		})
		if !errdefs.IsInvalid(err) || !strings.Contains(err.Error(), "is not an http:// or https:// URL") {
			t.Errorf("ConfigFromEnv with URL %q: %v; want the not-a-URL error of class ErrInvalid", u, err)
		}
	}
	_, err = cloudflare.ConfigFromEnv("box", func(k string) string {
		if k == "HUTCH_BRIDGE_URL" {
			return "https://alice:hunter2@bridge.example.com/?x"
		}
		return ""
	})
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("ConfigFromEnv with a password in a bad URL: %v; want an error that does not show the password", err)
	}
}

func TestNew_Errors(t *testing.T) {
	t.Parallel()
	if _, err := cloudflare.New(cloudflare.Config{URL: "https://b.example.com"}); !errdefs.IsInvalid(err) {
		t.Errorf("New without a sandbox id: %v; want ErrInvalid", err)
	}
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.pem")
	if _, err := cloudflare.New(cloudflare.Config{SandboxID: "box", URL: "https://b.example.com", CAFile: missing}); !errdefs.IsInvalid(err) || !strings.Contains(err.Error(), missing) {
		t.Errorf("New with a missing CA file: %v; want ErrInvalid naming the file", err)
	}
	junk := filepath.Join(dir, "junk.pem")
	if err := os.WriteFile(junk, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := cloudflare.New(cloudflare.Config{SandboxID: "box", URL: "https://b.example.com", CAFile: junk}); !errdefs.IsInvalid(err) || !strings.Contains(err.Error(), "holds no PEM certificate") {
		t.Errorf("New with a CA file without certificates: %v; want ErrInvalid saying so", err)
	}
}
