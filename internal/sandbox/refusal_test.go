package sandbox_test

import (
	"testing"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/sandbox"
)

func TestAdmit_RefusalTexts(t *testing.T) {
	isolated := sandbox.Requirements{IsolatedOffice: true}
	roMemory := sandbox.Requirements{ReadOnlyMemory: true}
	files := sandbox.Requirements{VaultFiles: true}
	tests := []struct {
		name string
		kind sandbox.Kind
		req  sandbox.Requirements
		want string // "" = admitted
	}{
		{"host_isolated", sandbox.KindHost, isolated, "Sandbox 'host' cannot provide an isolated conversation office; use image:*, or explicitly choose trusted workspace policy"},
		{"container_isolated", sandbox.KindContainer, isolated, "Sandbox 'container' cannot provide an isolated conversation office; use image:*, or explicitly choose trusted workspace policy"},
		{"cloudflare_isolated", sandbox.KindCloudflare, isolated, "Sandbox 'cloudflare' cannot provide an isolated conversation office; use image:*, or explicitly choose trusted workspace policy"},
		{"image_isolated", sandbox.KindImage, isolated, ""},
		{"gondolin_isolated", sandbox.KindGondolin, isolated, ""},
		{"host_ro_memory", sandbox.KindHost, roMemory, "Sandbox 'host' cannot enforce read-only shared workspace memory; use image:*, or explicitly choose isolated or trusted read-write workspace policy"},
		{"container_ro_memory", sandbox.KindContainer, roMemory, "Sandbox 'container' cannot enforce read-only shared workspace memory; use image:*, or explicitly choose isolated or trusted read-write workspace policy"},
		{"cloudflare_ro_memory", sandbox.KindCloudflare, roMemory, "Sandbox 'cloudflare' cannot enforce read-only shared workspace memory; use image:*, or explicitly choose isolated or trusted read-write workspace policy"},
		{"image_ro_memory", sandbox.KindImage, roMemory, ""},
		{"host_files", sandbox.KindHost, files, `Sandbox type "host" does not support vault file mounts; keep credentials in vault env, or use image:* to project files`},
		{"container_files", sandbox.KindContainer, files, `Sandbox type "container" does not support vault file mounts; keep credentials in vault env, or use image:* to project files`},
		{"cloudflare_files", sandbox.KindCloudflare, files, `Sandbox type "cloudflare" does not support vault file mounts; keep credentials in vault env, or use image:* to project files`},
		{"image_files", sandbox.KindImage, files, ""},
		{"gondolin_files", sandbox.KindGondolin, files, ""},
		{"kube_isolated", sandbox.KindKube, isolated, ""},
		{"kube_ro_memory", sandbox.KindKube, roMemory, ""},
		{"kube_files", sandbox.KindKube, files, ""},
		{"host_trusted_rw", sandbox.KindHost, sandbox.Requirements{}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := sandbox.Admit(tt.kind, sandbox.CapabilitiesOf(tt.kind), tt.req)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Admit(%s, %+v) = %v, want admitted", tt.kind, tt.req, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Admit(%s, %+v) admitted, want %q", tt.kind, tt.req, tt.want)
			}
			if err.Error() != tt.want {
				t.Errorf("Admit(%s) error\n got %q\nwant %q", tt.kind, err.Error(), tt.want)
			}
			if !errdefs.IsFailedPrecondition(err) {
				t.Errorf("Admit(%s) error is not ErrFailedPrecondition", tt.kind)
			}
		})
	}
}

func TestCapabilitiesOf_SeedTable(t *testing.T) {
	// One row per capability of seed 000 (plus gondolin from seed 001 and
	// kube, which declares image's): host, container, image, cloudflare,
	// gondolin, kube.
	type row struct {
		name string
		get  func(sandbox.Capabilities) bool
		want [6]bool
	}
	rows := []row{
		{"command_execution", func(c sandbox.Capabilities) bool { return c.CommandExecution }, [6]bool{true, true, true, true, true, true}},
		{"managed_lifecycle", func(c sandbox.Capabilities) bool { return c.ManagedLifecycle }, [6]bool{false, false, true, false, true, true}},
		{"per_conversation_runtime", func(c sandbox.Capabilities) bool { return c.PerConversationRuntime }, [6]bool{false, false, true, true, true, true}},
		{"vault_env", func(c sandbox.Capabilities) bool { return c.VaultEnv }, [6]bool{false, true, true, true, true, true}},
		{"per_conversation_vault", func(c sandbox.Capabilities) bool { return c.PerConversationVault }, [6]bool{false, false, true, true, true, true}},
		{"vault_file_mounts", func(c sandbox.Capabilities) bool { return c.VaultFileMounts }, [6]bool{false, false, true, false, true, true}},
		{"isolated_office", func(c sandbox.Capabilities) bool { return c.IsolatedOffice }, [6]bool{false, false, true, false, true, true}},
		{"read_only_memory", func(c sandbox.Capabilities) bool { return c.ReadOnlyMemory }, [6]bool{false, false, true, false, true, true}},
		{"idle_stop", func(c sandbox.Capabilities) bool { return c.IdleStop }, [6]bool{false, false, true, false, true, true}},
		{"limits", func(c sandbox.Capabilities) bool { return c.Limits }, [6]bool{false, false, true, false, true, true}},
		{"boost", func(c sandbox.Capabilities) bool { return c.Boost }, [6]bool{false, false, true, false, true, true}},
		{"agent_limits", func(c sandbox.Capabilities) bool { return c.AgentLimits }, [6]bool{false, false, true, false, true, true}},
		{"managed_projection", func(c sandbox.Capabilities) bool { return c.ManagedProjection() }, [6]bool{false, false, true, false, true, true}},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			for i, k := range sandbox.Kinds {
				if got := r.get(sandbox.CapabilitiesOf(k)); got != r.want[i] {
					t.Errorf("%s of %s got %v, want %v", r.name, k, got, r.want[i])
				}
			}
		})
	}
	if got := sandbox.CapabilitiesOf("nonsense"); got.CommandExecution {
		t.Error("an unknown kind declares command execution")
	}
}
