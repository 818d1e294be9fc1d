package sandbox_test

import (
	"strings"
	"testing"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/sandbox"
)

func TestParseMode_Valid(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want sandbox.Mode
	}{
		{"host", "host", sandbox.Mode{Kind: sandbox.KindHost}},
		{"container", "container:hutch-sandbox", sandbox.Mode{Kind: sandbox.KindContainer, Target: "hutch-sandbox"}},
		{"image_plain", "image:debian", sandbox.Mode{Kind: sandbox.KindImage, Target: "debian"}},
		{"image_with_tag", "image:debian:12", sandbox.Mode{Kind: sandbox.KindImage, Target: "debian:12"}},
		{"image_with_registry_port", "image:localhost:5000/team/sbx:v1", sandbox.Mode{Kind: sandbox.KindImage, Target: "localhost:5000/team/sbx:v1"}},
		{"image_digest", "image:busybox@sha256:abc", sandbox.Mode{Kind: sandbox.KindImage, Target: "busybox@sha256:abc"}},
		{"cloudflare", "cloudflare:team-box", sandbox.Mode{Kind: sandbox.KindCloudflare, Target: "team-box"}},
		{"gondolin", "gondolin:default", sandbox.Mode{Kind: sandbox.KindGondolin, Target: "default"}},
		{"microvm_alias", "microvm:default", sandbox.Mode{Kind: sandbox.KindGondolin, Target: "default"}},
		{"kube", "kube:registry.example.com/hutch-sandbox:1", sandbox.Mode{Kind: sandbox.KindKube, Target: "registry.example.com/hutch-sandbox:1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := sandbox.ParseMode(tt.in)
			if err != nil {
				t.Fatalf("ParseMode(%q) error: %v", tt.in, err)
			}
			if got != tt.want {
				t.Errorf("ParseMode(%q) got %+v, want %+v", tt.in, got, tt.want)
			}
		})
	}
}

func TestParseMode_Refusals(t *testing.T) {
	const forms = "'host', 'container:<container-name>', 'image:<image-name>', 'cloudflare:<sandbox-id>', 'gondolin:default' (alias 'microvm:default'), or 'kube:<image-name>'"
	tests := []struct {
		name string
		in   string
		want string
	}{
		{"docker_image", "docker:alpine", "'docker:alpine' is not supported. Use 'container:<container-name>' for an existing container or 'image:<image-name>' for hutch-managed per-conversation containers."},
		{"docker_bare", "docker", "'docker' is not supported. Use 'container:<container-name>' for an existing container or 'image:<image-name>' for hutch-managed per-conversation containers."},
		{"unknown", "vm:thing", "Invalid sandbox type 'vm:thing'. Use " + forms},
		{"unknown_bare", "podman", "Invalid sandbox type 'podman'. Use " + forms},
		{"empty", "", "Sandbox mode is empty. Use " + forms},
		{"container_empty", "container:", "container sandbox requires container name (e.g., container:hutch-sandbox)"},
		{"container_no_colon", "container", "container sandbox requires container name (e.g., container:hutch-sandbox)"},
		{"image_empty", "image:", "image sandbox requires image name (e.g., image:debian:12)"},
		{"image_blank", "image:  ", "image sandbox requires image name (e.g., image:debian:12)"},
		{"cloudflare_empty", "cloudflare:", "cloudflare sandbox requires sandbox id (e.g., cloudflare:team-sandbox)"},
		{"gondolin_empty", "gondolin:", "gondolin sandbox requires a profile (e.g., gondolin:default)"},
		{"gondolin_other", "gondolin:fast", "unsupported gondolin profile 'fast'. Use 'gondolin:default'"},
		{"microvm_other", "microvm:x", "unsupported microvm profile 'x'. Use 'microvm:default'"},
		{"kube_empty", "kube:", "kube sandbox requires image name (e.g., kube:registry.example.com/hutch-sandbox:1)"},
		{"kube_bare", "kube", "kube sandbox requires image name (e.g., kube:registry.example.com/hutch-sandbox:1)"},
		{"kube_space", "kube:a b", `image name "a b" must not contain whitespace`},
		{"host_with_target", "host:x", "Invalid sandbox type 'host:x'. Use " + forms},
		{"container_space", "container:a b", `container name "a b" is not a valid container name`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := sandbox.ParseMode(tt.in)
			if err == nil {
				t.Fatalf("ParseMode(%q) succeeded, want error %q", tt.in, tt.want)
			}
			if err.Error() != tt.want {
				t.Errorf("ParseMode(%q) error\n got %q\nwant %q", tt.in, err.Error(), tt.want)
			}
			if !errdefs.IsInvalid(err) {
				t.Errorf("ParseMode(%q) error class is not ErrInvalid", tt.in)
			}
		})
	}
}

func FuzzParseMode(f *testing.F) {
	for _, s := range []string{"host", "container:x", "image:a:b", "cloudflare:id", "gondolin:default", "microvm:default", "kube:img", "docker:x", "", ":", "image::", "container: "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, err := sandbox.ParseMode(s)
		if err != nil {
			if !errdefs.IsInvalid(err) {
				t.Fatalf("ParseMode(%q) error %v is not ErrInvalid", s, err)
			}
			if err.Error() == "" {
				t.Fatalf("ParseMode(%q) returned an empty error text", s)
			}
			return
		}
		if strings.HasPrefix(s, "docker") {
			t.Fatalf("ParseMode(%q) accepted a docker mode", s)
		}
		// A parsed mode must print back to something that parses to itself.
		again, err := sandbox.ParseMode(m.String())
		if err != nil || again != m {
			t.Fatalf("ParseMode(%q) = %+v, but its String %q parses to %+v, %v", s, m, m.String(), again, err)
		}
		if m.Kind != sandbox.KindHost && m.Target == "" {
			t.Fatalf("ParseMode(%q) = %+v has no target", s, m)
		}
	})
}
