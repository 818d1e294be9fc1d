package image_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/internal/sandbox"
)

// TestStatus_Recreated: a runtime re-created because what it was built
// from changed says when and which part changed, in the status any hutch
// process reads (the container's labels).
func TestStatus_Recreated(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	spec := f.office(t, "recreated")
	run(t, f.rt, spec, `true`, nil)
	if st, err := f.rt.Status(ctx, spec.OfficeKey); err != nil || !st.Recreated.IsZero() || st.RecreatedBecause != "" {
		t.Fatalf("a new runtime: re-created %v because %q (%v)", st.Recreated, st.RecreatedBecause, err)
	}

	memory := filepath.Join(f.ws, "MEMORY.md")
	if err := os.WriteFile(memory, []byte("shared\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	spec.Mounts = append(spec.Mounts, sandbox.Mount{HostPath: memory, RuntimePath: "/workspace/MEMORY.md", ReadOnly: true})
	before := time.Now().Add(-time.Second)
	run(t, f.rt, spec, `true`, nil)
	st, err := f.runtime(t).Status(ctx, spec.OfficeKey) // as another hutch process sees it
	if err != nil {
		t.Fatal(err)
	}
	if want := "what it was built from changed (mounts)"; st.RecreatedBecause != want || st.Recreated.Before(before) || st.Recreated.After(time.Now()) {
		t.Errorf("after a mount change: re-created %v because %q, want about now because %q", st.Recreated, st.RecreatedBecause, want)
	}

	// The next re-create (from a snapshot, which carries the old
	// container's labels) says its own reason.
	cred := filepath.Join(f.state, "token")
	if err := os.WriteFile(cred, []byte("v1"), 0o600); err != nil {
		t.Fatal(err)
	}
	spec.VaultFiles = []sandbox.Mount{{HostPath: cred, RuntimePath: "/root/token", ReadOnly: true}}
	run(t, f.rt, spec, `true`, nil)
	if st, err = f.rt.Status(ctx, spec.OfficeKey); err != nil {
		t.Fatal(err)
	}
	if want := "what it was built from changed (credentials)"; st.RecreatedBecause != want {
		t.Errorf("after a new credential: re-created because %q, want %q", st.RecreatedBecause, want)
	}
}
