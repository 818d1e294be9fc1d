package settings_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/settings"
)

func TestSetRuntime_RoundTripKeepsOtherKeys(t *testing.T) {
	path := filepath.Join(t.TempDir(), "settings.json")
	if err := os.WriteFile(path, []byte(`{"other": 1, "sandbox": {"workspace": {"doorPolicy": "isolated"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, kv := range [][2]string{
		{"sandbox.cpus", "1.5"}, {"sandbox.memory", "2g"}, {"sandbox.pids", "512"},
		{"sandbox.boost.cpus", "2"}, {"sandbox.boost.memory", "4g"}, {"sandbox.idleTimeout", "90s"}, {"sandbox.timezone", "America/Argentina/Buenos_Aires"},
		{"sandbox.network.allow", "github.com, *.npmjs.org"}, {"sandbox.pool", "0"},
	} {
		if err := settings.SetRuntime(path, kv[0], kv[1]); err != nil {
			t.Fatalf("SetRuntime(%s, %s): %v", kv[0], kv[1], err)
		}
	}
	got, err := settings.LoadRuntime(path)
	if err != nil {
		t.Fatal(err)
	}
	none := 0
	want := settings.Runtime{CPUs: 1.5, MemoryBytes: 2 << 30, Pids: 512, BoostCPUs: 2, BoostMemoryBytes: 4 << 30, IdleTimeout: 90 * time.Second, TimeZone: "America/Argentina/Buenos_Aires", NetworkAllow: []string{"github.com", "*.npmjs.org"}, Pool: &none}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("LoadRuntime (-want +got):\n%s", diff)
	}
	ws, err := settings.LoadWorkspace(path)
	if err != nil || ws == nil || ws.DoorPolicy != "isolated" {
		t.Errorf("workspace setting lost: %+v, %v", ws, err)
	}
	data, _ := os.ReadFile(path)
	if !strings.Contains(string(data), `"other": 1`) {
		t.Errorf("other key lost:\n%s", data)
	}
	if err := settings.SetRuntime(path, "sandbox.boost.cpus", ""); err != nil {
		t.Fatal(err)
	}
	if err := settings.SetRuntime(path, "sandbox.boost.memory", ""); err != nil {
		t.Fatal(err)
	}
	data, _ = os.ReadFile(path)
	if strings.Contains(string(data), "boost") {
		t.Errorf("an emptied boost object was kept:\n%s", data)
	}
	vals, err := settings.RuntimeValues(path)
	if err != nil || len(vals) != 7 {
		t.Errorf("RuntimeValues = %v, %v; want 7 keys", vals, err)
	}
}

func TestSetRuntime_Refusals(t *testing.T) {
	path := filepath.Join(t.TempDir(), "settings.json")
	tests := []struct {
		key, value, want string
	}{
		{"sandbox.cpus", "0", `CPUs "0" must be a positive number such as 0.5 or 2`},
		{"sandbox.cpus", "-1", `CPUs "-1" may hold only letters, digits and '.' (no spaces or shell characters)`},
		{"sandbox.cpus", "1;rm", `CPUs "1;rm" may hold only letters, digits and '.' (no spaces or shell characters)`},
		{"sandbox.memory", "1 g", `Memory "1 g" may hold only letters, digits and '.' (no spaces or shell characters)`},
		{"sandbox.memory", "lots", `Memory "lots" must be a positive size such as 512m or 4g`},
		{"sandbox.memory", "1k", `Memory "1k" is below the engine's minimum of 6m`},
		{"sandbox.pids", "1.5", `Pids "1.5" must be a positive whole number such as 1024`},
		{"sandbox.idleTimeout", "0s", `Duration "0s" must be positive, such as 10m or 1h`},
		{"sandbox.pool", "33", `Pool "33" must be a whole number from 0 (no warm pool) to 32`},
		{"sandbox.pool", "two", `Pool "two" must be a whole number from 0 (no warm pool) to 32`},
		{"sandbox.timezone", "Mars/Olympus_Mons", `Time zone "Mars/Olympus_Mons" is not in the time zone database; use an IANA name such as Europe/Berlin or UTC`},
		{"sandbox.timezone", "../etc/passwd", `Time zone "../etc/passwd" must be an IANA name such as Europe/Berlin or UTC`},
		{"sandbox.timezone", "Europe/Berlin;id", `Time zone "Europe/Berlin;id" must be an IANA name such as Europe/Berlin or UTC`},
		{"sandbox.network.allow", "https://github.com", `sandbox.network.allow entry "https://github.com": has a scheme (https://); write the host only, e.g. "github.com"`},
		{"sandbox.network.allow", "github.com,,npmjs.org", `sandbox.network.allow has an empty entry`},
		{"sandbox.colour", "red", `Unknown setting "sandbox.colour"; settable keys: sandbox.cpus, sandbox.memory, sandbox.pids, sandbox.boost.cpus, sandbox.boost.memory, sandbox.ceiling.cpus, sandbox.ceiling.memory, sandbox.ceiling.pids, sandbox.ceiling.disk, sandbox.idleTimeout, sandbox.pool, sandbox.timezone, sandbox.network, sandbox.network.allow, sandbox.kube.kubeconfig, sandbox.kube.namespace, sandbox.kube.storage, sandbox.kube.nodeSelector, sandbox.kube.runtimeClass, sandbox.kube.agentImage`},
	}
	for _, tt := range tests {
		t.Run(strings.ReplaceAll(tt.key+"_"+tt.value, " ", "_"), func(t *testing.T) {
			err := settings.SetRuntime(path, tt.key, tt.value)
			if err == nil || err.Error() != tt.want || !errdefs.IsInvalid(err) {
				t.Errorf("SetRuntime(%s, %q) = %v; want %q", tt.key, tt.value, err, tt.want)
			}
		})
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Error("a refused value created the settings file")
	}
}

func TestLoadRuntime_MalformedFailsClosed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "settings.json")
	if err := os.WriteFile(path, []byte(`{"sandbox": {"memory": "huge"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := settings.LoadRuntime(path)
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "sandbox.memory") {
		t.Errorf("LoadRuntime = %v; want an error naming the file and key", err)
	}
	if err := os.WriteFile(path, []byte(`{"sandbox": {"cpus": 2, "pids": 100}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := settings.LoadRuntime(path)
	if err != nil || got.CPUs != 2 || got.Pids != 100 {
		t.Errorf("JSON numbers: got %+v, %v", got, err)
	}
}

// TestLoadRuntime_NestedKeysStayApart: reading sandbox.boost.* must not
// let the boost's keys stand in for sandbox.* ones, or the other way
// round (a boost without memory is not the base memory).
func TestLoadRuntime_NestedKeysStayApart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "settings.json")
	for k, v := range map[string]string{"sandbox.memory": "8g", "sandbox.boost.cpus": "4", "sandbox.kube.namespace": "hutch"} {
		if err := settings.SetRuntime(path, k, v); err != nil {
			t.Fatal(err)
		}
	}
	r, err := settings.LoadRuntime(path)
	if err != nil {
		t.Fatal(err)
	}
	if r.MemoryBytes != 8<<30 || r.BoostCPUs != 4 || r.BoostMemoryBytes != 0 || r.CPUs != 0 || r.Kube.Namespace != "hutch" {
		t.Errorf("LoadRuntime = %+v", r)
	}
	vals, err := settings.RuntimeValues(path)
	if err != nil {
		t.Fatal(err)
	}
	want := [][2]string{{"sandbox.boost.cpus", "4"}, {"sandbox.kube.namespace", "hutch"}, {"sandbox.memory", "8g"}}
	if len(vals) != len(want) {
		t.Fatalf("RuntimeValues = %q, want %q", vals, want)
	}
	for i := range want {
		if vals[i] != want[i] {
			t.Errorf("RuntimeValues = %q, want %q", vals, want)
		}
	}
}
