package service_test

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"

	"github.com/hutchsandbox/hutch/internal/office"
	"github.com/hutchsandbox/hutch/internal/projection"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/service"
)

// TestExec_TimeZone: sandbox.timezone reaches commands as TZ, in host
// mode too (which injects no other env). That a TZ in the env wins is
// part of the conformance suite, for the modes that inject env.
func TestExec_TimeZone(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state")
	layout, err := service.ResolveLayout(service.LayoutOptions{StateDir: state, Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	svc := service.New(layout, nil)
	t.Cleanup(func() { _ = svc.Close() })
	if err := svc.SetGlobalDoor(t.Context(), &projection.Setting{DoorPolicy: string(projection.DoorTrusted), Layout: string(projection.LayoutFull)}); err != nil {
		t.Fatal(err)
	}
	addr, err := office.NewAddress("web", "tz")
	if err != nil {
		t.Fatal(err)
	}
	tz := func(env map[string]string) string {
		t.Helper()
		var out bytes.Buffer
		res, err := svc.Exec(context.Background(), service.ExecOptions{Address: addr, Mode: sandbox.DefaultMode, Argv: []string{`printf %s "$TZ"`}, Env: env, Stdout: &out})
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("exec: %+v, %v", res, err)
		}
		return out.String()
	}
	t.Setenv("TZ", "")
	if got := tz(nil); got != "" {
		t.Errorf("TZ without the setting = %q, want empty", got)
	}
	if err := svc.SetRuntimeSetting("sandbox.timezone", "Asia/Tokyo"); err != nil {
		t.Fatal(err)
	}
	if got := tz(nil); got != "Asia/Tokyo" {
		t.Errorf("TZ = %q, want Asia/Tokyo", got)
	}
}
