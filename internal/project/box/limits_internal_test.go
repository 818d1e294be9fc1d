package box

import (
	"testing"

	"github.com/hutchsandbox/hutch/internal/project"
)

// TestLimitsText pins what status says of the limits: memory and CPUs
// are unlimited unless sandbox-memory and sandbox-cpus set a ceiling (the
// defaults of the settings table), and then it says which setting caps
// them; the process ceiling is always there.
func TestLimitsText(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		spec project.Spec
		want string
	}{
		{project.Spec{PidsLimit: 4096}, "processes 4096; memory and CPUs unlimited (sandbox-memory and sandbox-cpus cap them)"},
		{project.Spec{PidsLimit: 4096, MemoryBytes: 256 << 20}, "memory 256 MiB, processes 4096; CPUs unlimited (sandbox-cpus caps them)"},
		{project.Spec{PidsLimit: 4096, NanoCPUs: 1e9}, "CPUs 1, processes 4096; memory unlimited (sandbox-memory caps it)"},
		{project.Spec{PidsLimit: 4096, MemoryBytes: 256 << 20, NanoCPUs: 1.5e9}, "memory 256 MiB, CPUs 1.5, processes 4096"},
	} {
		if got := limitsText(tt.spec); got != tt.want {
			t.Errorf("limitsText(memory %d, nanocpus %d) = %q, want %q", tt.spec.MemoryBytes, tt.spec.NanoCPUs, got, tt.want)
		}
	}
}
