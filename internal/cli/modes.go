package cli

import (
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/hutchsandbox/hutch/internal/api"
	"github.com/hutchsandbox/hutch/internal/sandbox"
)

func newModesCmd(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "modes",
		Short: "Show the sandbox modes and what each can enforce",
		Long: `Show every sandbox mode, its capabilities and what it needs to run. A "no" is
a refusal, never a silent downgrade: a conversation whose door policy or
vault needs what its mode cannot enforce is refused before anything runs.
hutch doctor says which modes can run on this machine.

--json prints an array of {mode, kind, capabilities, recommendation,
needs}, one per mode (docs/api.md, "Machine-readable output").`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if asJSON {
				return printJSON(g.stdout, modeInfos())
			}
			tw := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
			out := &printer{w: tw}
			out.printf("CAPABILITY")
			for _, k := range sandbox.Kinds {
				out.printf("\t%s", modeLabel(k))
			}
			out.println()
			rows := []struct {
				name string
				get  func(sandbox.Capabilities) string
			}{
				{"command execution", func(c sandbox.Capabilities) string { return yes(c.CommandExecution) }},
				{"hutch-managed runtime lifecycle", func(c sandbox.Capabilities) string { return yes(c.ManagedLifecycle) }},
				{"per-conversation runtime", func(c sandbox.Capabilities) string { return yes(c.PerConversationRuntime) }},
				{"vault env injected", func(c sandbox.Capabilities) string { return yes(c.VaultEnv) }},
				{"per-conversation vault", func(c sandbox.Capabilities) string { return yes(c.PerConversationVault) }},
				{"vault file projection", func(c sandbox.Capabilities) string { return yes(c.VaultFileMounts) }},
				{"workspace access", func(c sandbox.Capabilities) string { return string(c.Workspace) }},
				{"isolated conversation office", func(c sandbox.Capabilities) string { return yes(c.IsolatedOffice) }},
				{"read-only shared memory", func(c sandbox.Capabilities) string { return yes(c.ReadOnlyMemory) }},
				{"idle stop / re-create", func(c sandbox.Capabilities) string { return yes(c.IdleStop) }},
				{"CPU / memory / pid limits", func(c sandbox.Capabilities) string { return yes(c.Limits) }},
				{"boost", func(c sandbox.Capabilities) string { return yes(c.Boost) }},
				{"recommendation", func(c sandbox.Capabilities) string { return c.Recommendation }},
			}
			for _, r := range rows {
				out.printf("%s", r.name)
				for _, k := range sandbox.Kinds {
					out.printf("\t%s", r.get(sandbox.CapabilitiesOf(k)))
				}
				out.println()
			}
			if err := out.flush(tw); err != nil {
				return err
			}
			if err := printf(g.stdout, "\nWhat each mode needs:\n"); err != nil {
				return err
			}
			tw = tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
			out = &printer{w: tw}
			for _, k := range sandbox.Kinds {
				out.printf("  %s\t%s\n", modeLabel(k), modeNeeds(k))
			}
			return out.flush(tw)
		},
	}
	jsonFlag(cmd, &asJSON)
	return cmd
}

// modeInfos is every mode as hutch modes --json prints it.
func modeInfos() []api.ModeInfo {
	out := make([]api.ModeInfo, 0, len(sandbox.Kinds))
	for _, k := range sandbox.Kinds {
		c := sandbox.CapabilitiesOf(k)
		egress := make([]string, 0, len(c.Egress))
		for _, m := range c.Egress {
			egress = append(egress, string(m))
		}
		out = append(out, api.ModeInfo{
			Mode: modeLabel(k), Kind: string(k), Recommendation: c.Recommendation, Needs: modeNeeds(k),
			Capabilities: api.ModeCapabilities{
				CommandExecution: c.CommandExecution, ManagedLifecycle: c.ManagedLifecycle, PerConversationRuntime: c.PerConversationRuntime,
				VaultEnv: c.VaultEnv, PerConversationVault: c.PerConversationVault, VaultFileMounts: c.VaultFileMounts,
				Workspace: string(c.Workspace), IsolatedOffice: c.IsolatedOffice, ReadOnlyMemory: c.ReadOnlyMemory,
				IdleStop: c.IdleStop, Limits: c.Limits, Boost: c.Boost, Egress: egress, PlaceholderSecrets: c.PlaceholderSecrets,
			},
		})
	}
	return out
}

// modeNeeds says what a mode needs from the machine, the cluster or the
// operator before its first command runs.
func modeNeeds(k sandbox.Kind) string {
	switch k {
	case sandbox.KindHost:
		return "nothing"
	case sandbox.KindContainer:
		return "a container engine (Docker or Podman) and the named container, running, with the workspace mounted at /workspace"
	case sandbox.KindImage:
		return "a container engine (Docker or Podman); the image in it or pullable"
	case sandbox.KindCloudflare:
		return "a bridge at $HUTCH_BRIDGE_URL (docs/bridge.md)"
	case sandbox.KindGondolin:
		return "qemu-system-x86_64, qemu-img and virtiofsd, KVM for speed, and a guest built with hutch microvm image build"
	case sandbox.KindKube:
		return "a cluster (sandbox.kube.kubeconfig, else the service account of hutch's pod, KUBECONFIG or ~/.kube/config); " +
			"the agent image of hutch kube agent-image loaded where the nodes find it; " +
			"the workspace on storage every node reaches (sandbox.kube.storage); the image pullable by the nodes"
	}
	return "not in this build yet"
}

func modeLabel(k sandbox.Kind) string {
	switch k {
	case sandbox.KindHost:
		return "host"
	case sandbox.KindGondolin:
		return "gondolin:default"
	case sandbox.KindContainer:
		return "container:<name>"
	case sandbox.KindImage:
		return "image:<image>"
	case sandbox.KindCloudflare:
		return "cloudflare:<id>"
	case sandbox.KindKube:
		return "kube:<image>"
	}
	return string(k)
}

func yes(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
