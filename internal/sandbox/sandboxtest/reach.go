package sandboxtest

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/internal/sandbox"
)

// CrossReach plays one conversation's runtime connecting to a server in
// another's, in any mode whose runtimes have network addresses. The
// victim serves a secret on port 8080 (busybox nc) until the test ends;
// addr returns the victim's address once its runtime has one ("" until
// then). The probe first runs in the victim, which must reach its own
// server (else the probe proves nothing), then in the attacker, which
// must not. hint is added to the failure (what to check when it fails).
func CrossReach(t *testing.T, rt sandbox.Runtime, victim, attacker sandbox.Spec, addr func() string, hint string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	served := make(chan struct{})
	go func() {
		defer close(served)
		// The loop runs in the background of the victim's agent until
		// the command is cancelled.
		_, _ = rt.Exec(ctx, victim, sandbox.ExecRequest{Argv: []string{"while true; do echo secret | nc -l -p 8080; done"}, Stdout: io.Discard, Stderr: io.Discard, Timeout: 5 * time.Minute})
	}()
	defer func() { cancel(); <-served }()
	probeIn(t, rt, attacker, "true")
	var ip string
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		if ip = addr(); ip != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the victim's runtime has no address")
		}
	}
	probe := "for i in 1 2 3 4 5; do if nc -w 2 " + ip + " 8080 </dev/null | grep -q secret; then echo reached; exit 0; fi; sleep 0.5; done; echo unreachable"
	if out := probeIn(t, rt, victim, probe); out != "reached\n" {
		t.Fatalf("the victim does not reach its own server at %s: %q (the probe proves nothing)", ip, out)
	}
	if out := probeIn(t, rt, attacker, probe); out != "unreachable\n" {
		t.Errorf("another conversation's runtime reached the victim's server at %s: %q%s", ip, out, hint)
	}
}

// probeIn runs cmd in spec's runtime and returns its stdout.
func probeIn(t *testing.T, rt sandbox.Runtime, spec sandbox.Spec, cmd string) string {
	t.Helper()
	var out strings.Builder
	if _, err := rt.Exec(context.Background(), spec, sandbox.ExecRequest{Argv: []string{cmd}, Stdout: &out, Stderr: io.Discard, Timeout: 2 * time.Minute}); err != nil {
		t.Fatalf("Exec(%q): %v", cmd, err)
	}
	return out.String()
}
