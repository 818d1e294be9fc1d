package chat

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/internal/projection"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/sandbox/mock"
	"github.com/hutchsandbox/hutch/internal/service"
	"github.com/hutchsandbox/hutch/internal/testenv"
)

// imageService is a service in image mode whose runtimes are a mock of
// it: chat's texts are under test here, not the engine (the image
// package tests the lifecycle against real engines). The image's name is
// the busybox test image's, as an operator would see it.
func imageService(t *testing.T) (*service.Service, sandbox.Mode) {
	t.Helper()
	svc := newService(t, nil)
	mode := sandbox.Mode{Kind: sandbox.KindImage, Target: "hutch-test-busybox:1"}
	svc.SetRuntime(mode, mock.New(mock.Config{Mode: mode}))
	return svc, mode
}

func TestImageMode(t *testing.T) {
	svc, mode := imageService(t)
	conv := addr(t, "slack", "C"+testenv.Name(t))
	ctx := context.Background()
	step := func(golden_, message string) {
		t.Helper()
		golden(t, golden_, send(t, svc, mode, conv, message))
	}

	// Before the first command there is no runtime to boost or limit.
	step("image_status_missing", "/sandbox")
	step("image_boost_not_running", "/sandbox boost")
	step("image_limits_not_running", "/sandbox limits cpus=1")
	step("image_limits_usage", "/sandbox limits")
	step("image_limits_bad_value", "/sandbox limits cpus=2 memory=lots")
	step("image_limits_unknown_key", "/sandbox limits cpus=2 disk=10g")
	step("image_limits_no_value", "/sandbox limits cpus")

	if _, err := svc.Exec(ctx, service.ExecOptions{Address: conv, Mode: mode, Argv: []string{"true"}}); err != nil {
		t.Fatal(err)
	}
	step("image_status_running", "/sandbox")
	step("image_boost", "/sandbox boost")
	step("image_status_boosted", "/sandbox")
	step("image_limits_over_ceiling", "/sandbox limits memory=20g")
	step("image_limits", "/sandbox limits cpus=1 memory=2g pids=512")
	step("image_status_limits", "/sandbox")

	step("image_door_full", "/sandbox door full")
	if pol, err := svc.Resolve(conv, mode, ""); err != nil || pol.Decision.Policy != projection.PolicyFull {
		t.Errorf("policy after the change: %v, %v; want full", pol.Decision.Policy, err)
	}
	step("image_door_isolated", "/sandbox door isolated")
	step("door_unchanged", "/sandbox door isolated")
	step("door_unknown", "/sandbox door wide-open")
	step("image_door_default", "/sandbox door default")
	if pol, err := svc.Resolve(conv, mode, ""); err != nil || pol.Decision.Source != projection.SourceDefault {
		t.Errorf("after door default: source %v, %v; want no setting", pol.Decision.Source, err)
	}
}

// TestImageMode_BusyDoor: a door change while a command runs in the
// conversation is refused, and the policy stays as it was.
func TestImageMode_BusyDoor(t *testing.T) {
	svc, mode := imageService(t)
	conv := addr(t, "slack", "C"+testenv.Name(t))
	ctx := context.Background()
	if _, err := svc.Exec(ctx, service.ExecOptions{Address: conv, Mode: mode, Argv: []string{"true"}}); err != nil {
		t.Fatal(err)
	}
	// A door change while a command runs is refused.
	m, err := svc.ManagedFor(ctx, mode)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var runErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, runErr = svc.Exec(runCtx, service.ExecOptions{Address: conv, Mode: mode, Argv: []string{"sleep 120"}})
	}()
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			cancel()
			wg.Wait()
		}
	}
	defer stop()
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := m.Status(ctx, string(conv.Key()))
		if err != nil {
			t.Fatal(err)
		}
		if st.ActiveCommands > 0 {
			break
		}
		if time.Now().After(deadline) {
			stop()
			t.Fatalf("Managed().Status never counted the running command within 30 s (exec: %v); the busy check cannot see it", runErr)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got := send(t, svc, mode, conv, "/sandbox door full"); got != BusyDoor {
		t.Errorf("door change while busy: %q, want %q", got, BusyDoor)
	}
	golden(t, "image_status_busy", send(t, svc, mode, conv, "/sandbox"))
	pol, err := svc.Resolve(conv, mode, "")
	if err != nil {
		t.Fatal(err)
	}
	if pol.Decision.Policy != projection.PolicyIsolated {
		t.Errorf("policy after the refused change: %v, want isolated", pol.Decision.Policy)
	}
	stop()

	golden(t, "image_door_full", send(t, svc, mode, conv, "/sandbox door full"))
}
