package service_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/metrics"
	"github.com/hutchsandbox/hutch/internal/office"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/sandbox/mock"
	"github.com/hutchsandbox/hutch/internal/service"
)

// TestRefusalReason: the reason a refusal is counted under comes from
// where the service decided it (admission, the ceiling) or else from its
// class; errors that are no refusals have none. The tag changes neither
// an error's text nor its class.
func TestRefusalReason(t *testing.T) {
	svc := newService(t)
	ctx := context.Background()
	addr, err := office.NewAddress("web", "reasons")
	if err != nil {
		t.Fatal(err)
	}
	// An isolated conversation (the default) in host mode.
	_, admission := svc.Exec(ctx, service.ExecOptions{Address: addr, Mode: sandbox.Mode{Kind: sandbox.KindHost}, Argv: []string{"true"}})
	if !errdefs.IsFailedPrecondition(admission) || !strings.HasPrefix(admission.Error(), "Sandbox 'host' cannot provide an isolated conversation office;") {
		t.Fatalf("exec in host mode: %v", admission)
	}
	mode := sandbox.Mode{Kind: sandbox.KindImage, Target: "img"}
	svc.SetRuntime(mode, mock.New(mock.Config{Mode: mode}))
	if _, err := svc.Exec(ctx, service.ExecOptions{Address: addr, Mode: mode, Argv: []string{"true"}}); err != nil {
		t.Fatal(err)
	}
	lc, err := svc.ManagedFor(ctx, mode)
	if err != nil {
		t.Fatal(err)
	}
	_, ceiling := lc.Boost(ctx, string(addr.Key()), sandbox.Limits{CPUs: 1000})
	if !errdefs.IsInvalid(ceiling) || !strings.HasPrefix(ceiling.Error(), "CPUs 1000 is above this installation's ceiling") {
		t.Fatalf("a boost of 1000 CPUs: %v", ceiling)
	}
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"admission", admission, metrics.ReasonAdmission},
		{"ceiling", ceiling, metrics.ReasonCeiling},
		{"ceiling_wrapped", errors.Join(errors.New("response already written"), ceiling), metrics.ReasonCeiling},
		{"outside", sandbox.OutsideRefusal("/etc"), metrics.ReasonFailedPrecondition},
		{"not_supported", sandbox.NotImplemented(sandbox.Mode{Kind: sandbox.KindKube}), metrics.ReasonNotSupported},
		{"invalid", errdefs.New(errdefs.ErrInvalid, "bad"), ""},
		{"not_found", errdefs.New(errdefs.ErrNotFound, "gone"), ""},
		{"unavailable", errdefs.New(errdefs.ErrUnavailable, "engine"), ""},
		{"internal", errors.New("boom"), ""},
		{"nil", nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := service.RefusalReason(tt.err); got != tt.want {
				t.Errorf("RefusalReason(%v) = %q, want %q", tt.err, got, tt.want)
			}
		})
	}
}
