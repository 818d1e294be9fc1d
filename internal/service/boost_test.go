package service_test

import (
	"path/filepath"
	"testing"

	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/service"
)

// TestBoostSize: the boost size is read at each call, so a size set while
// a daemon runs applies to its next boost; what is unset is the default.
func TestBoostSize(t *testing.T) {
	svc := newService(t)
	if got, err := svc.BoostSize(); err != nil || got != (sandbox.Limits{CPUs: 2, MemoryBytes: 4 << 30}) {
		t.Errorf("default BoostSize = %+v, %v", got, err)
	}
	if err := svc.SetRuntimeSetting("sandbox.boost.cpus", "1"); err != nil {
		t.Fatal(err)
	}
	if got, err := svc.BoostSize(); err != nil || got != (sandbox.Limits{CPUs: 1, MemoryBytes: 4 << 30}) {
		t.Errorf("BoostSize after setting the CPUs = %+v, %v", got, err)
	}
}

// newService is a service over a fresh state directory and no environment.
func newService(t *testing.T) *service.Service {
	t.Helper()
	layout, err := service.ResolveLayout(service.LayoutOptions{StateDir: filepath.Join(t.TempDir(), "state"), Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	return service.New(layout, nil)
}
