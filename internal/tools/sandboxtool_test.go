package tools_test

import (
	"context"
	"strings"
	"testing"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/tools"
)

type fakeLimiter struct{ cpus, memory string }

func (f *fakeLimiter) Status(context.Context) (string, error) {
	return "CPU " + f.cpus + " / Memory " + f.memory, nil
}

func (f *fakeLimiter) SetLimits(_ context.Context, cpus, memory string) (string, error) {
	if cpus != "" {
		f.cpus = cpus
	}
	if memory != "" {
		f.memory = memory
	}
	return "Updated: CPU " + f.cpus + " / Memory " + f.memory, nil
}

func TestSandboxTool(t *testing.T) {
	ctx := context.Background()
	lim := &fakeLimiter{cpus: "0.5", memory: "1g"}
	out, err := tools.SandboxTool(ctx, lim, "image:hutch-sandbox", tools.SandboxInput{Action: "set", Memory: "4g"})
	if err != nil || out.Text != "Updated: CPU 0.5 / Memory 4g" {
		t.Errorf("set: %q, %v", out.Text, err)
	}
	out, err = tools.SandboxTool(ctx, lim, "image:hutch-sandbox", tools.SandboxInput{Action: "status"})
	if err != nil || out.Text != "CPU 0.5 / Memory 4g" {
		t.Errorf("status: %q, %v", out.Text, err)
	}

	var texts []string
	for _, tc := range []struct {
		lim   tools.Limiter
		in    tools.SandboxInput
		class error
	}{
		{nil, tools.SandboxInput{Action: "status"}, errdefs.ErrNotSupported},
		{lim, tools.SandboxInput{Action: "boost"}, errdefs.ErrInvalid},
		{lim, tools.SandboxInput{Action: "set"}, errdefs.ErrInvalid},
		{lim, tools.SandboxInput{Action: "set", CPUs: "2; reboot"}, errdefs.ErrInvalid},
		{lim, tools.SandboxInput{Action: "set", Memory: "4 g"}, errdefs.ErrInvalid},
		{lim, tools.SandboxInput{Action: "status", CPUs: "2"}, errdefs.ErrInvalid},
	} {
		_, err := tools.SandboxTool(ctx, tc.lim, "host", tc.in)
		if !errorsIs(err, tc.class) {
			t.Errorf("%+v: %v, want class %v", tc.in, err, tc.class)
			continue
		}
		texts = append(texts, err.Error())
	}
	golden(t, "sandbox_errors", strings.Join(texts, "\n"))
}
