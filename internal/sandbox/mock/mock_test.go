package mock_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/sandbox/mock"
	"github.com/hutchsandbox/hutch/internal/sandbox/sandboxtest"
)

var imageMode = sandbox.Mode{Kind: sandbox.KindImage, Target: "busybox"}

// office makes an office whose runtime path is its host path (commands
// see host paths), as the suites need.
func office(t *testing.T) sandbox.Spec {
	t.Helper()
	ws, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(ws, "office")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return sandbox.Spec{OfficeKey: "k-" + filepath.Base(ws), OfficeDir: dir, OfficeRuntimePath: dir, Mounts: []sandbox.Mount{{HostPath: dir, RuntimePath: dir}}}
}

// The mock keeps the contracts it stands in for: both suites pass.
func TestConformance(t *testing.T) {
	rt := mock.New(mock.Config{Mode: imageMode})
	sandboxtest.Run(t, sandboxtest.Harness{New: func(t *testing.T) (sandbox.Runtime, sandbox.Spec) { return rt, office(t) }})
}

func TestFiles(t *testing.T) {
	rt := mock.New(mock.Config{Mode: imageMode})
	sandboxtest.RunFiles(t, sandboxtest.Harness{New: func(t *testing.T) (sandbox.Runtime, sandbox.Spec) { return rt, office(t) }})
}

// TestRuntimePaths: a managed mode's runtime paths (/workspace/<key>)
// map to the mounts' host paths, for commands and files alike, and errors
// name the runtime path.
func TestRuntimePaths(t *testing.T) {
	rt := mock.New(mock.Config{Mode: imageMode})
	host := office(t)
	spec := sandbox.Spec{OfficeKey: host.OfficeKey, OfficeDir: host.OfficeDir, OfficeRuntimePath: "/workspace/" + host.OfficeKey,
		Mounts: []sandbox.Mount{{HostPath: host.OfficeDir, RuntimePath: "/workspace/" + host.OfficeKey}}}
	ctx := context.Background()
	f := rt.Files(spec)
	if err := f.WriteFile(ctx, "/workspace/"+host.OfficeKey+"/a.txt", strings.NewReader("mapped"), 0); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(host.OfficeDir, "a.txt")); err != nil || string(got) != "mapped" {
		t.Errorf("host file: %q, %v", got, err)
	}
	var out strings.Builder
	res, err := rt.Exec(ctx, spec, sandbox.ExecRequest{Argv: []string{"cat a.txt; echo \" $V\""}, Dir: "/workspace/" + host.OfficeKey, Env: map[string]string{"V": "env"}, Stdout: &out})
	if err != nil || res.ExitCode != 0 || out.String() != "mapped env\n" {
		t.Errorf("exec: %q, %+v, %v", out.String(), res, err)
	}
	_, err = f.Stat(ctx, "/workspace/"+host.OfficeKey+"/missing")
	if want := "File not found: /workspace/" + host.OfficeKey + "/missing"; !errdefs.IsNotFound(err) || err.Error() != want {
		t.Errorf("stat of a missing file: %v; want %q", err, want)
	}
}

// TestLifecycle: the lifecycle managed modes keep, in memory.
func TestLifecycle(t *testing.T) {
	rt := mock.New(mock.Config{Mode: imageMode})
	spec := office(t)
	spec.Limits = sandbox.Limits{CPUs: 1}
	ctx := context.Background()
	key := spec.OfficeKey
	if st, _ := rt.Status(ctx, key); st.State != sandbox.StateMissing {
		t.Fatalf("before any command: %+v", st)
	}
	if _, err := rt.Boost(ctx, key, sandbox.Limits{}); err == nil || err.Error() != sandbox.NotRunning(key).Error() {
		t.Errorf("boost before any command: %v; want the not-running refusal", err)
	}
	if _, err := rt.Exec(ctx, spec, sandbox.ExecRequest{Argv: []string{"true"}}); err != nil {
		t.Fatal(err)
	}
	st, err := rt.Status(ctx, key)
	if err != nil || st.State != sandbox.StateRunning || st.Limits.CPUs != 1 || st.Limits.MemoryBytes != 1<<30 || st.Image != "busybox" {
		t.Fatalf("after a command: %+v, %v", st, err)
	}
	if st, err = rt.Boost(ctx, key, sandbox.Limits{}); err != nil || !st.Boosted || st.Limits.CPUs != 2 {
		t.Errorf("boost: %+v, %v", st, err)
	}
	if st, err = rt.SetLimits(ctx, key, sandbox.Limits{Pids: 64}); err != nil || !st.TempLimits || st.Limits.Pids != 64 || st.Limits.CPUs != 2 {
		t.Errorf("limits: %+v, %v", st, err)
	}
	if u, err := rt.Usage(ctx, key); err != nil || u.PidsLimit != 64 || u.Instance != st.ID {
		t.Errorf("usage: %+v, %v", u, err)
	}
	if stopped, err := rt.StopIdle(ctx, 0); err != nil || len(stopped) != 1 {
		t.Errorf("stop idle: %v, %v", stopped, err)
	}
	if st, _ = rt.Status(ctx, key); st.State != sandbox.StateStopped || st.Boosted || st.TempLimits {
		t.Errorf("after an idle stop: %+v; want stopped, boost and limits gone", st)
	}
	// A change of mounts re-creates it, and says why.
	spec.Mounts = append(spec.Mounts, sandbox.Mount{HostPath: "/nonexistent", RuntimePath: "/x"})
	if _, err := rt.Exec(ctx, spec, sandbox.ExecRequest{Argv: []string{"true"}}); err != nil {
		t.Fatal(err)
	}
	if st2, _ := rt.Status(ctx, key); st2.ID == st.ID || st2.RecreatedBecause != "what it was built from changed (mounts)" {
		t.Errorf("after a change of mounts: %+v", st2)
	}
	rep, err := rt.Reconcile(ctx, func(string) bool { return false })
	if err != nil || len(rep.Removed) != 1 {
		t.Errorf("reconcile: %+v, %v", rep, err)
	}
	if st, _ = rt.Status(ctx, key); st.State != sandbox.StateMissing {
		t.Errorf("after reconcile removed it: %+v", st)
	}
}

// TestFail: an operation told to fail returns its error.
func TestFail(t *testing.T) {
	boom := errdefs.New(errdefs.ErrUnavailable, "engine gone")
	rt := mock.New(mock.Config{Mode: imageMode, Fail: map[string]error{mock.OpExec: boom, mock.OpFiles: boom, mock.OpCheck: boom}})
	spec := office(t)
	if _, err := rt.Exec(context.Background(), spec, sandbox.ExecRequest{Argv: []string{"true"}}); !errors.Is(err, boom) {
		t.Errorf("exec: %v", err)
	}
	if _, err := rt.Files(spec).Stat(context.Background(), spec.OfficeDir); !errors.Is(err, boom) {
		t.Errorf("files: %v", err)
	}
	if err := rt.Check(context.Background()); !errors.Is(err, boom) {
		t.Errorf("check: %v", err)
	}
}
