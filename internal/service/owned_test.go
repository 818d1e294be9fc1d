package service_test

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/hutchsandbox/hutch/internal/office"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/sandbox/mock"
	"github.com/hutchsandbox/hutch/internal/service"
)

// TestOwnedRuntimes_EveryMode: the runtimes of every managed mode are
// listed and removed together, whichever mode a command names; a mode
// whose engine does not answer (no Docker here) is left out with a note.
func TestOwnedRuntimes_EveryMode(t *testing.T) {
	t.Setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
	svc := newService(t)
	vm := sandbox.Mode{Kind: sandbox.KindGondolin, Target: "default"}
	pod := sandbox.Mode{Kind: sandbox.KindKube, Target: "img"}
	svc.SetRuntime(vm, mock.New(mock.Config{Mode: vm}))
	svc.SetRuntime(pod, mock.New(mock.Config{Mode: pod}))
	ctx := context.Background()
	keys := map[string]string{}
	for _, r := range []struct {
		id   string
		mode sandbox.Mode
	}{{"a", vm}, {"b", pod}, {"c", vm}, {"c", pod}} {
		addr, err := office.NewAddress("web", r.id)
		if err != nil {
			t.Fatal(err)
		}
		keys[r.id] = string(addr.Key())
		if _, err := svc.Exec(ctx, service.ExecOptions{Address: addr, Mode: r.mode, Argv: []string{"true"}}); err != nil {
			t.Fatal(err)
		}
	}

	type row struct{ Kind, Key string }
	rows := func(list []service.OwnedRuntime) []row {
		var out []row
		for _, r := range list {
			out = append(out, row{string(r.Kind), r.OfficeKey})
		}
		return out
	}
	list, notes, err := svc.OwnedRuntimes(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []row{{"gondolin", keys["a"]}, {"gondolin", keys["c"]}, {"kube", keys["b"]}, {"kube", keys["c"]}}
	if diff := cmp.Diff(want, rows(list)); diff != "" {
		t.Errorf("OwnedRuntimes (-want +got):\n%s", diff)
	}
	if len(notes) != 1 || notes[0].Kind != sandbox.KindImage || !strings.Contains(notes[0].Reason, "No container engine answers") {
		t.Errorf("notes = %+v; want one on image: naming the absent engine", notes)
	}
	list, _, err = svc.OwnedRuntimes(ctx, func(k sandbox.Kind) bool { return k != sandbox.KindKube })
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]row{{"kube", keys["b"]}, {"kube", keys["c"]}}, rows(list)); diff != "" {
		t.Errorf("OwnedRuntimes of kube only (-want +got):\n%s", diff)
	}

	removed, _, err := svc.RemoveOwned(ctx, keys["c"], nil)
	if err != nil || !cmp.Equal(removed, []sandbox.Kind{sandbox.KindGondolin, sandbox.KindKube}) {
		t.Errorf("RemoveOwned(c) = %v, %v; want both modes", removed, err)
	}
	if removed, _, err := svc.RemoveOwned(ctx, keys["c"], nil); err != nil || len(removed) != 0 {
		t.Errorf("RemoveOwned(c) again = %v, %v; want none", removed, err)
	}
	list, _, _ = svc.OwnedRuntimes(ctx, nil)
	if diff := cmp.Diff([]row{{"gondolin", keys["a"]}, {"kube", keys["b"]}}, rows(list)); diff != "" {
		t.Errorf("after rm (-want +got):\n%s", diff)
	}
}
