package mcpserver_test

import (
	"context"
	"strings"
	"testing"

	"github.com/moby/moby/client"

	"github.com/hutchsandbox/hutch/internal/mcpserver"
	"github.com/hutchsandbox/hutch/internal/office"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/sandbox/image"
	"github.com/hutchsandbox/hutch/internal/testenv"
)

// TestAttack_LimitsAboveCeiling: the agent asks its sandbox tool for most
// of the host (20 GiB of memory, 16 CPUs). It is refused with the
// ceiling (by default the boost size) and the container keeps its
// limits; up to the ceiling it may raise them, and past it once the
// operator raised the ceiling.
func TestAttack_LimitsAboveCeiling(t *testing.T) {
	svc, img := imageService(t)
	addr, err := office.NewAddress("web", testenv.Name(t))
	if err != nil {
		t.Fatal(err)
	}
	cs := connect(t, mcpserver.New(svc, sandbox.Mode{Kind: sandbox.KindImage, Target: img}, addr, "", nil))
	if res := call(t, cs, "bash", map[string]any{"command": "true"}); res.IsError {
		t.Fatalf("bash: %s", textOf(t, res))
	}
	cli := testenv.Docker(t)
	memory := func() int64 {
		t.Helper()
		res, err := cli.ContainerInspect(context.Background(), image.ContainerName(string(addr.Key())), client.ContainerInspectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return res.Container.HostConfig.Memory
	}
	for _, tc := range []struct {
		args map[string]any
		want string
	}{
		{map[string]any{"action": "set", "memory": "20g"}, "Memory 20GiB is above this installation's ceiling of 4GiB; nothing was changed. The operator can raise it: hutch sandbox settings sandbox.ceiling.memory <value>"},
		{map[string]any{"action": "set", "cpus": "16"}, "CPUs 16 is above this installation's ceiling of 2; nothing was changed. The operator can raise it: hutch sandbox settings sandbox.ceiling.cpus <value>"},
		{map[string]any{"action": "set", "cpus": "1", "memory": "4097m"}, "Memory 4.001GiB is above this installation's ceiling of 4GiB"},
	} {
		res := call(t, cs, "sandbox", tc.args)
		if text := textOf(t, res); !res.IsError || !strings.Contains(text, tc.want) {
			t.Errorf("sandbox %v: isError %v, %q; want the refusal %q", tc.args, res.IsError, text, tc.want)
		}
	}
	if got := memory(); got != 1<<30 {
		t.Errorf("container memory after the refused raises: %d, want the default 1 GiB", got)
	}
	if res := call(t, cs, "sandbox", map[string]any{"action": "set", "memory": "4g"}); res.IsError {
		t.Errorf("a raise to the ceiling was refused: %s", textOf(t, res))
	}
	if got := memory(); got != 4<<30 {
		t.Errorf("container memory after a raise to the ceiling: %d, want 4 GiB", got)
	}
	if err := svc.SetRuntimeSetting("sandbox.ceiling.memory", "6g"); err != nil {
		t.Fatal(err)
	}
	if res := call(t, cs, "sandbox", map[string]any{"action": "set", "memory": "6g"}); res.IsError {
		t.Errorf("a raise to the raised ceiling was refused: %s", textOf(t, res))
	}
	if got := memory(); got != 6<<30 {
		t.Errorf("container memory after the operator raised the ceiling: %d, want 6 GiB", got)
	}
}
