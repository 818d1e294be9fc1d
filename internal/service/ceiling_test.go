package service_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/office"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/sandbox/mock"
	"github.com/hutchsandbox/hutch/internal/service"
)

// TestCeiling: by default the boost size (CPUs, memory) and the default
// process count; the boost and pids settings move it, the ceiling
// settings set it.
func TestCeiling(t *testing.T) {
	svc := newService(t)
	want := func(l sandbox.Limits) {
		t.Helper()
		if got, err := svc.Ceiling(); err != nil || got != l {
			t.Errorf("Ceiling() = %+v, %v; want %+v", got, err, l)
		}
	}
	want(sandbox.Limits{CPUs: 2, MemoryBytes: 4 << 30, Pids: 1024})
	set(t, svc, "sandbox.boost.cpus", "3")
	set(t, svc, "sandbox.pids", "2048")
	want(sandbox.Limits{CPUs: 3, MemoryBytes: 4 << 30, Pids: 2048})
	set(t, svc, "sandbox.ceiling.cpus", "8")
	set(t, svc, "sandbox.ceiling.memory", "16g")
	set(t, svc, "sandbox.ceiling.pids", "4096")
	want(sandbox.Limits{CPUs: 8, MemoryBytes: 16 << 30, Pids: 4096})
}

// TestCeiling_EveryCaller: the lifecycle ManagedFor hands out (to chat,
// the agent's tool, the API and the CLI alike) refuses boosts and
// temporary limits above the ceiling, and passes the rest on.
func TestCeiling_EveryCaller(t *testing.T) {
	svc := newService(t)
	mode := sandbox.Mode{Kind: sandbox.KindImage, Target: "img"}
	svc.SetRuntime(mode, mock.New(mock.Config{Mode: mode}))
	addr, err := office.NewAddress("web", "ceiling")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := svc.Exec(ctx, service.ExecOptions{Address: addr, Mode: mode, Argv: []string{"true"}}); err != nil {
		t.Fatal(err)
	}
	lc, err := svc.ManagedFor(ctx, mode)
	if err != nil {
		t.Fatal(err)
	}
	key := string(addr.Key())
	for _, l := range []sandbox.Limits{{Pids: 1025}, {CPUs: 2.5}, {MemoryBytes: 4<<30 + 1}} {
		if _, err := lc.SetLimits(ctx, key, l); !errdefs.IsInvalid(err) || !strings.Contains(err.Error(), "above this installation's ceiling") {
			t.Errorf("SetLimits(%+v) = %v; want the ceiling refusal", l, err)
		}
	}
	set(t, svc, "sandbox.ceiling.cpus", "1")
	if _, err := lc.Boost(ctx, key, sandbox.Limits{CPUs: 2, MemoryBytes: 4 << 30}); !errdefs.IsInvalid(err) || !strings.Contains(err.Error(), "CPUs 2 is above this installation's ceiling of 1") {
		t.Errorf("a boost past a lowered ceiling: %v", err)
	}
	st, err := lc.SetLimits(ctx, key, sandbox.Limits{CPUs: 1, MemoryBytes: 4 << 30, Pids: 1024})
	if err != nil || st.Limits.CPUs != 1 || st.Limits.MemoryBytes != 4<<30 {
		t.Errorf("limits at the ceiling: %+v, %v", st.Limits, err)
	}
}

func set(t *testing.T, svc *service.Service, key, value string) {
	t.Helper()
	if err := svc.SetRuntimeSetting(key, value); err != nil {
		t.Fatal(err)
	}
}

// diskCounted is a managed runtime that records the disk ceilings it is
// handed: through EnforceDisk and on each command's spec.
type diskCounted struct {
	*mock.Runtime
	enforced []int64
	specs    []int64
}

func (d *diskCounted) EnforceDisk(_ context.Context, ceiling int64) ([]string, error) {
	d.enforced = append(d.enforced, ceiling)
	return nil, nil
}

func (d *diskCounted) Exec(ctx context.Context, spec sandbox.Spec, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	d.specs = append(d.specs, spec.DiskCeiling)
	return d.Runtime.Exec(ctx, spec, req)
}

// TestDiskCeiling: sandbox.ceiling.disk (default 10 GiB) reaches the
// daemon's count and every command's spec; modes that do not count
// disk are left alone.
func TestDiskCeiling(t *testing.T) {
	svc := newService(t)
	mode := sandbox.Mode{Kind: sandbox.KindImage, Target: "img"}
	rt := &diskCounted{Runtime: mock.New(mock.Config{Mode: mode})}
	svc.SetRuntime(mode, rt)
	addr, err := office.NewAddress("web", "disk")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	step := func() {
		t.Helper()
		if _, err := svc.EnforceDisk(ctx, mode); err != nil {
			t.Fatal(err)
		}
		if _, err := svc.Exec(ctx, service.ExecOptions{Address: addr, Mode: mode, Argv: []string{"true"}}); err != nil {
			t.Fatal(err)
		}
	}
	step()
	set(t, svc, "sandbox.ceiling.disk", "20g")
	step()
	if want := []int64{10 << 30, 20 << 30}; !slices.Equal(rt.enforced, want) || !slices.Equal(rt.specs, want) {
		t.Errorf("ceilings handed to EnforceDisk %v and to commands %v; want %v", rt.enforced, rt.specs, want)
	}
	if err := svc.SetRuntimeSetting("sandbox.ceiling.disk", "lots"); !errdefs.IsInvalid(err) || err.Error() != `Disk "lots" must be a positive size such as 10g or 500m` {
		t.Errorf("a bad disk ceiling: %v", err)
	}
	other := sandbox.Mode{Kind: sandbox.KindKube, Target: "img"}
	svc.SetRuntime(other, mock.New(mock.Config{Mode: other}))
	if stopped, err := svc.EnforceDisk(ctx, other); err != nil || stopped != nil {
		t.Errorf("EnforceDisk in a mode that does not count disk: %v, %v", stopped, err)
	}
}
