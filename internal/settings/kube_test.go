package settings_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/settings"
)

var (
	label63     = strings.Repeat("a", 63)
	subdomain   = label63 + "." + label63 + "." + label63 + "." + strings.Repeat("b", 61) // 253
	name63      = "A" + strings.Repeat("-_.", 20) + "z9"                                  // 63
	image255    = strings.Repeat("a/", 127) + "a"                                         // 255
	longStorage = "pvc:" + subdomain + "c"                                                // claim of 254
)

func TestKubeSettings_BoundaryValues(t *testing.T) {
	for _, tt := range []struct {
		name string
		s    string
		n    int
	}{{"label63", label63, 63}, {"subdomain", subdomain, 253}, {"name63", name63, 63}, {"image255", image255, 255}, {"longStorage", longStorage, 4 + 254}} {
		if len(tt.s) != tt.n {
			t.Errorf("len(%s) = %d; want %d", tt.name, len(tt.s), tt.n)
		}
	}
}

func TestKubeSettings_Accepted(t *testing.T) {
	tests := []struct {
		key, value string
		want       settings.KubeSettings
	}{
		{"sandbox.kube.kubeconfig", "/home/me/.kube/config", settings.KubeSettings{Kubeconfig: "/home/me/.kube/config"}},
		{"sandbox.kube.kubeconfig", "/etc/hutch/kube config.yaml", settings.KubeSettings{Kubeconfig: "/etc/hutch/kube config.yaml"}},
		{"sandbox.kube.namespace", "hutch", settings.KubeSettings{Namespace: "hutch"}},
		{"sandbox.kube.namespace", "a", settings.KubeSettings{Namespace: "a"}},
		{"sandbox.kube.namespace", "team-1", settings.KubeSettings{Namespace: "team-1"}},
		{"sandbox.kube.namespace", "0", settings.KubeSettings{Namespace: "0"}},
		{"sandbox.kube.namespace", label63, settings.KubeSettings{Namespace: label63}},
		{"sandbox.kube.storage", "hostPath", settings.KubeSettings{}},
		{"sandbox.kube.storage", "hostPath:/srv/hutch", settings.KubeSettings{Storage: settings.KubeStorage{HostPath: "/srv/hutch"}}},
		{"sandbox.kube.storage", "pvc:hutch-workspace", settings.KubeSettings{Storage: settings.KubeStorage{Claim: "hutch-workspace"}}},
		{"sandbox.kube.storage", "pvc:ws.team-1", settings.KubeSettings{Storage: settings.KubeStorage{Claim: "ws.team-1"}}},
		{"sandbox.kube.storage", "pvc:" + subdomain, settings.KubeSettings{Storage: settings.KubeStorage{Claim: subdomain}}},
		{"sandbox.kube.nodeSelector", "disktype=ssd", settings.KubeSettings{NodeSelector: map[string]string{"disktype": "ssd"}}},
		{"sandbox.kube.nodeSelector", "disktype=ssd, topology.kubernetes.io/zone=eu-west-1a", settings.KubeSettings{NodeSelector: map[string]string{"disktype": "ssd", "topology.kubernetes.io/zone": "eu-west-1a"}}},
		{"sandbox.kube.nodeSelector", "gpu=", settings.KubeSettings{NodeSelector: map[string]string{"gpu": ""}}},
		{"sandbox.kube.nodeSelector", "Node_Pool.v2=Big_One.3", settings.KubeSettings{NodeSelector: map[string]string{"Node_Pool.v2": "Big_One.3"}}},
		{"sandbox.kube.nodeSelector", name63 + "=" + name63, settings.KubeSettings{NodeSelector: map[string]string{name63: name63}}},
		{"sandbox.kube.nodeSelector", subdomain + "/" + name63 + "=x", settings.KubeSettings{NodeSelector: map[string]string{subdomain + "/" + name63: "x"}}},
		{"sandbox.kube.runtimeClass", "gvisor", settings.KubeSettings{RuntimeClass: "gvisor"}},
		{"sandbox.kube.runtimeClass", "kata-qemu.example.com", settings.KubeSettings{RuntimeClass: "kata-qemu.example.com"}},
		{"sandbox.kube.runtimeClass", subdomain, settings.KubeSettings{RuntimeClass: subdomain}},
		{"sandbox.kube.agentImage", "hutch-agent", settings.KubeSettings{AgentImage: "hutch-agent"}},
		{"sandbox.kube.agentImage", "hutchsandbox/hutch-agent", settings.KubeSettings{AgentImage: "hutchsandbox/hutch-agent"}},
		{"sandbox.kube.agentImage", "localhost:5000/hutch-agent", settings.KubeSettings{AgentImage: "localhost:5000/hutch-agent"}},
		{"sandbox.kube.agentImage", "Registry.Example.com:443/team/hutch_agent.v2", settings.KubeSettings{AgentImage: "Registry.Example.com:443/team/hutch_agent.v2"}},
		{"sandbox.kube.agentImage", "ghcr.io/org/hutch__agent--x", settings.KubeSettings{AgentImage: "ghcr.io/org/hutch__agent--x"}},
		{"sandbox.kube.agentImage", image255, settings.KubeSettings{AgentImage: image255}},
	}
	for i, tt := range tests {
		t.Run(fmt.Sprintf("%s_%d", tt.key, i), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "settings.json")
			if err := settings.SetRuntime(path, tt.key, tt.value); err != nil {
				t.Fatalf("SetRuntime(%s, %q): %v", tt.key, tt.value, err)
			}
			got, err := settings.LoadRuntime(path)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(settings.Runtime{Kube: tt.want}, got); diff != "" {
				t.Errorf("LoadRuntime (-want +got):\n%s", diff)
			}
			vals, err := settings.RuntimeValues(path)
			if err != nil || len(vals) != 1 || vals[0] != [2]string{tt.key, tt.value} {
				t.Errorf("RuntimeValues = %q, %v; want the value as given", vals, err)
			}
		})
	}
}

func TestKubeSettings_RoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "settings.json")
	if err := os.WriteFile(path, []byte(`{"other": 1, "sandbox": {"workspace": {"doorPolicy": "isolated"}, "kube": {"future": true}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	set := [][2]string{
		{"sandbox.cpus", "2"},
		{"sandbox.kube.kubeconfig", "/home/me/.kube/config"},
		{"sandbox.kube.namespace", "hutch"},
		{"sandbox.kube.storage", "pvc:hutch-workspace"},
		{"sandbox.kube.nodeSelector", "disktype=ssd,example.com/pool=sandbox"},
		{"sandbox.kube.runtimeClass", "gvisor"},
		{"sandbox.kube.agentImage", "localhost:5000/hutch-agent"},
	}
	for _, kv := range set {
		if err := settings.SetRuntime(path, kv[0], kv[1]); err != nil {
			t.Fatalf("SetRuntime(%s, %s): %v", kv[0], kv[1], err)
		}
	}
	got, err := settings.LoadRuntime(path)
	if err != nil {
		t.Fatal(err)
	}
	want := settings.Runtime{CPUs: 2, Kube: settings.KubeSettings{
		Kubeconfig:   "/home/me/.kube/config",
		Namespace:    "hutch",
		Storage:      settings.KubeStorage{Claim: "hutch-workspace"},
		NodeSelector: map[string]string{"disktype": "ssd", "example.com/pool": "sandbox"},
		RuntimeClass: "gvisor",
		AgentImage:   "localhost:5000/hutch-agent",
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("LoadRuntime (-want +got):\n%s", diff)
	}
	vals, err := settings.RuntimeValues(path)
	if err != nil {
		t.Fatal(err)
	}
	wantVals := [][2]string{
		{"sandbox.cpus", "2"},
		{"sandbox.kube.agentImage", "localhost:5000/hutch-agent"},
		{"sandbox.kube.kubeconfig", "/home/me/.kube/config"},
		{"sandbox.kube.namespace", "hutch"},
		{"sandbox.kube.nodeSelector", "disktype=ssd,example.com/pool=sandbox"},
		{"sandbox.kube.runtimeClass", "gvisor"},
		{"sandbox.kube.storage", "pvc:hutch-workspace"},
	}
	if diff := cmp.Diff(wantVals, vals); diff != "" {
		t.Errorf("RuntimeValues (-want +got):\n%s", diff)
	}
	if ws, err := settings.LoadWorkspace(path); err != nil || ws == nil || ws.DoorPolicy != "isolated" {
		t.Errorf("workspace setting lost: %+v, %v", ws, err)
	}

	// Unsetting every kube key keeps the unknown kube key, and with it the object.
	for _, kv := range set[1:] {
		if err := settings.SetRuntime(path, kv[0], ""); err != nil {
			t.Fatal(err)
		}
	}
	got, err = settings.LoadRuntime(path)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(settings.Runtime{CPUs: 2}, got); diff != "" {
		t.Errorf("after unset (-want +got):\n%s", diff)
	}
	data, _ := os.ReadFile(path)
	if !strings.Contains(string(data), `"future": true`) || !strings.Contains(string(data), `"other": 1`) {
		t.Errorf("an unknown key was lost:\n%s", data)
	}
}

func TestKubeSettings_EmptiedObjectDropped(t *testing.T) {
	path := filepath.Join(t.TempDir(), "settings.json")
	for _, v := range []string{"hutch", ""} {
		if err := settings.SetRuntime(path, "sandbox.kube.namespace", v); err != nil {
			t.Fatal(err)
		}
	}
	data, _ := os.ReadFile(path)
	if strings.Contains(string(data), "kube") {
		t.Errorf("an emptied kube object was kept:\n%s", data)
	}
}

func TestKubeSettings_Refusals(t *testing.T) {
	path := filepath.Join(t.TempDir(), "settings.json")
	const (
		kubeconfigWant = `must be an absolute, clean path such as /home/me/.kube/config`
		namespaceWant  = `must be a DNS-1123 label (at most 63 lowercase letters, digits and '-', starting and ending with a letter or digit) such as hutch`
		storageWant    = `must be hostPath, hostPath:/node/path or pvc:<claim-name>, such as pvc:hutch-workspace`
		nodePathWant   = `: the node path must be absolute and clean, such as hostPath:/srv/hutch`
		claimWant      = `: the claim name must be a DNS-1123 subdomain (at most 253 lowercase letters, digits, '-' and '.') such as pvc:hutch-workspace`
		selKeyWant     = `must be a label key such as disktype or example.com/zone (a name of at most 63 letters, digits, '-', '_' and '.', starting and ending with a letter or digit, after an optional DNS subdomain and '/')`
		selValueWant   = `must be empty or at most 63 letters, digits, '-', '_' and '.', starting and ending with a letter or digit, such as ssd`
		classWant      = `must be a DNS-1123 subdomain (at most 253 lowercase letters, digits, '-' and '.') such as gvisor`
		imageWant      = `must be an image repository (lowercase path components separated by '/', after an optional registry host[:port]) such as hutch-agent or registry.example.com:5000/hutch-agent`
		tagWant        = `must not have a tag; the tag is derived from the agent's hash, so give the repository only, such as registry.example.com:5000/hutch-agent`
		digestWant     = `must not have a digest; the tag is derived from the agent's hash, so give the repository only, such as registry.example.com:5000/hutch-agent`
	)
	tests := []struct {
		key, value, want string
	}{
		{"sandbox.kube.kubeconfig", "kubeconfig", `Kubeconfig "kubeconfig" ` + kubeconfigWant},
		{"sandbox.kube.kubeconfig", "~/.kube/config", `Kubeconfig "~/.kube/config" ` + kubeconfigWant},
		{"sandbox.kube.kubeconfig", "/home/me/../.kube/config", `Kubeconfig "/home/me/../.kube/config" ` + kubeconfigWant},
		{"sandbox.kube.kubeconfig", "/home/me//config", `Kubeconfig "/home/me//config" ` + kubeconfigWant},
		{"sandbox.kube.kubeconfig", "/home/me/", `Kubeconfig "/home/me/" ` + kubeconfigWant},
		{"sandbox.kube.kubeconfig", "/home/me\x00/config", `Kubeconfig "/home/me\x00/config" ` + kubeconfigWant},
		{"sandbox.kube.kubeconfig", "/home/me\n/config", `Kubeconfig "/home/me\n/config" ` + kubeconfigWant},

		{"sandbox.kube.namespace", "Hutch", `Namespace "Hutch" ` + namespaceWant},
		{"sandbox.kube.namespace", "-hutch", `Namespace "-hutch" ` + namespaceWant},
		{"sandbox.kube.namespace", "hutch-", `Namespace "hutch-" ` + namespaceWant},
		{"sandbox.kube.namespace", "hutch.dev", `Namespace "hutch.dev" ` + namespaceWant},
		{"sandbox.kube.namespace", "hutch dev", `Namespace "hutch dev" ` + namespaceWant},
		{"sandbox.kube.namespace", label63 + "a", `Namespace "` + label63 + `a" ` + namespaceWant},

		{"sandbox.kube.storage", "hostpath", `Storage "hostpath" ` + storageWant},
		{"sandbox.kube.storage", "nfs:server:/x", `Storage "nfs:server:/x" ` + storageWant},
		{"sandbox.kube.storage", "pvc", `Storage "pvc" ` + storageWant},
		{"sandbox.kube.storage", "hostPath:", `Storage "hostPath:"` + nodePathWant},
		{"sandbox.kube.storage", "hostPath:srv/hutch", `Storage "hostPath:srv/hutch"` + nodePathWant},
		{"sandbox.kube.storage", "hostPath:/srv/../etc", `Storage "hostPath:/srv/../etc"` + nodePathWant},
		{"sandbox.kube.storage", "hostPath:/srv/hutch/", `Storage "hostPath:/srv/hutch/"` + nodePathWant},
		{"sandbox.kube.storage", "hostPath:/srv\x00", `Storage "hostPath:/srv\x00"` + nodePathWant},
		{"sandbox.kube.storage", "hostPath:/", `Storage "hostPath:/": the node path must not be the node's root; use a directory such as hostPath:/srv/hutch`},
		{"sandbox.kube.storage", "pvc:", `Storage "pvc:"` + claimWant},
		{"sandbox.kube.storage", "pvc:Hutch", `Storage "pvc:Hutch"` + claimWant},
		{"sandbox.kube.storage", "pvc:hutch_ws", `Storage "pvc:hutch_ws"` + claimWant},
		{"sandbox.kube.storage", "pvc:a..b", `Storage "pvc:a..b"` + claimWant},
		{"sandbox.kube.storage", longStorage, `Storage "` + longStorage + `"` + claimWant},

		{"sandbox.kube.nodeSelector", "disktype", `Node selector entry "disktype" must be key=value, such as disktype=ssd`},
		{"sandbox.kube.nodeSelector", "a=b,,c=d", `Node selector "a=b,,c=d" has an empty entry; write key=value pairs such as disktype=ssd,zone=a`},
		{"sandbox.kube.nodeSelector", "a=b,", `Node selector "a=b," has an empty entry; write key=value pairs such as disktype=ssd,zone=a`},
		{"sandbox.kube.nodeSelector", " ", `Node selector " " has an empty entry; write key=value pairs such as disktype=ssd,zone=a`},
		{"sandbox.kube.nodeSelector", "=ssd", `Node selector key "" ` + selKeyWant},
		{"sandbox.kube.nodeSelector", "disk type=ssd", `Node selector key "disk type" ` + selKeyWant},
		{"sandbox.kube.nodeSelector", "-disk=ssd", `Node selector key "-disk" ` + selKeyWant},
		{"sandbox.kube.nodeSelector", "disk.=ssd", `Node selector key "disk." ` + selKeyWant},
		{"sandbox.kube.nodeSelector", "/zone=a", `Node selector key "/zone" ` + selKeyWant},
		{"sandbox.kube.nodeSelector", "example.com/=a", `Node selector key "example.com/" ` + selKeyWant},
		{"sandbox.kube.nodeSelector", "Example.com/zone=a", `Node selector key "Example.com/zone" ` + selKeyWant},
		{"sandbox.kube.nodeSelector", "a/b/c=a", `Node selector key "a/b/c" ` + selKeyWant},
		{"sandbox.kube.nodeSelector", name63 + "x=a", `Node selector key "` + name63 + `x" ` + selKeyWant},
		{"sandbox.kube.nodeSelector", subdomain + "c/zone=a", `Node selector key "` + subdomain + `c/zone" ` + selKeyWant},
		{"sandbox.kube.nodeSelector", "zone=eu west", `Node selector value "eu west" of "zone" ` + selValueWant},
		{"sandbox.kube.nodeSelector", "zone=a=b", `Node selector value "a=b" of "zone" ` + selValueWant},
		{"sandbox.kube.nodeSelector", "zone=-a", `Node selector value "-a" of "zone" ` + selValueWant},
		{"sandbox.kube.nodeSelector", "zone=a;id", `Node selector value "a;id" of "zone" ` + selValueWant},
		{"sandbox.kube.nodeSelector", "zone=" + name63 + "x", `Node selector value "` + name63 + `x" of "zone" ` + selValueWant},
		{"sandbox.kube.nodeSelector", "zone=a, zone=b", `Node selector key "zone" is given twice`},

		{"sandbox.kube.runtimeClass", "gVisor", `Runtime class "gVisor" ` + classWant},
		{"sandbox.kube.runtimeClass", "kata_qemu", `Runtime class "kata_qemu" ` + classWant},
		{"sandbox.kube.runtimeClass", ".gvisor", `Runtime class ".gvisor" ` + classWant},
		{"sandbox.kube.runtimeClass", subdomain + "c", `Runtime class "` + subdomain + `c" ` + classWant},

		{"sandbox.kube.agentImage", "hutch-agent:v1", `Agent image "hutch-agent:v1" ` + tagWant},
		{"sandbox.kube.agentImage", "localhost:5000/hutch-agent:latest", `Agent image "localhost:5000/hutch-agent:latest" ` + tagWant},
		{"sandbox.kube.agentImage", "localhost:5000", `Agent image "localhost:5000" ` + tagWant},
		{"sandbox.kube.agentImage", "hutch-agent@sha256:abcd", `Agent image "hutch-agent@sha256:abcd" ` + digestWant},
		{"sandbox.kube.agentImage", "Hutch-Agent", `Agent image "Hutch-Agent" ` + imageWant},
		{"sandbox.kube.agentImage", "/hutch-agent", `Agent image "/hutch-agent" ` + imageWant},
		{"sandbox.kube.agentImage", "hutch-agent/", `Agent image "hutch-agent/" ` + imageWant},
		{"sandbox.kube.agentImage", "team//hutch-agent", `Agent image "team//hutch-agent" ` + imageWant},
		{"sandbox.kube.agentImage", "hutch-agent-", `Agent image "hutch-agent-" ` + imageWant},
		{"sandbox.kube.agentImage", "hutch agent", `Agent image "hutch agent" ` + imageWant},
		{"sandbox.kube.agentImage", "hutch-agent;id", `Agent image "hutch-agent;id" ` + imageWant},
		{"sandbox.kube.agentImage", "a:5000:1/hutch-agent", `Agent image "a:5000:1/hutch-agent" ` + imageWant},
		{"sandbox.kube.agentImage", image255 + "a", `Agent image "` + image255 + `a" ` + imageWant},
	}
	for i, tt := range tests {
		t.Run(fmt.Sprintf("%s_%d", tt.key, i), func(t *testing.T) {
			err := settings.SetRuntime(path, tt.key, tt.value)
			if err == nil || err.Error() != tt.want || !errdefs.IsInvalid(err) {
				t.Errorf("SetRuntime(%s, %q) =\n  %v\nwant\n  %s", tt.key, tt.value, err, tt.want)
			}
		})
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Error("a refused value created the settings file")
	}
}

func TestLoadRuntime_MalformedKubeFailsClosed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "settings.json")
	for _, tt := range []struct{ file, want string }{
		{`{"sandbox": {"kube": {"namespace": "Bad_NS"}}}`, `sandbox.kube.namespace: Namespace "Bad_NS" ` + "must be a DNS-1123 label"},
		{`{"sandbox": {"kube": {"nodeSelector": {"disktype": "ssd"}}}}`, `sandbox.kube.nodeSelector must be a string or a number`},
		{`{"sandbox": {"kube": {"storage": ""}}}`, `sandbox.kube.storage: Storage "" must be hostPath`},
	} {
		if err := os.WriteFile(path, []byte(tt.file), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := settings.LoadRuntime(path)
		if err == nil || !strings.HasPrefix(err.Error(), "Malformed settings in "+path+": "+tt.want) || !errdefs.IsFailedPrecondition(err) {
			t.Errorf("LoadRuntime(%s) = %v; want %q", tt.file, err, tt.want)
		}
	}
	// A kube value that is not an object leaves every kube key unset.
	if err := os.WriteFile(path, []byte(`{"sandbox": {"kube": "pods", "cpus": 1}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := settings.LoadRuntime(path); err != nil || got.CPUs != 1 || got.Kube.Namespace != "" {
		t.Errorf("LoadRuntime = %+v, %v", got, err)
	}
}

func TestParseKubeStorage(t *testing.T) {
	for in, want := range map[string]settings.KubeStorage{
		"hostPath":                {},
		"hostPath:/var/lib/hutch": {HostPath: "/var/lib/hutch"},
		"pvc:ws":                  {Claim: "ws"},
	} {
		got, err := settings.ParseKubeStorage(in)
		if err != nil || got != want {
			t.Errorf("ParseKubeStorage(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
}

func TestParseNodeSelector(t *testing.T) {
	got, err := settings.ParseNodeSelector(" a=1 ,b=,kubernetes.io/os=linux")
	want := map[string]string{"a": "1", "b": "", "kubernetes.io/os": "linux"}
	if err != nil || !cmp.Equal(want, got) {
		t.Errorf("ParseNodeSelector = %v, %v; want %v", got, err, want)
	}
	if _, err := settings.ParseNodeSelector(""); err == nil || !errdefs.IsInvalid(err) {
		t.Errorf("ParseNodeSelector(\"\") = %v; want refused", err)
	}
}

// FuzzKubeParsers: no input panics, and what parses keeps its promises.
func FuzzKubeParsers(f *testing.F) {
	for _, s := range []string{"hostPath", "hostPath:/srv", "pvc:ws", "a=b,c=", "example.com/a=b", "localhost:5000/a/b", "a@b", "/x/../y", "\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if st, err := settings.ParseKubeStorage(s); err == nil {
			if st.HostPath != "" && st.Claim != "" || st.HostPath != "" && (!filepath.IsAbs(st.HostPath) || filepath.Clean(st.HostPath) != st.HostPath || st.HostPath == "/") {
				t.Fatalf("ParseKubeStorage(%q) = %+v", s, st)
			}
		}
		if m, err := settings.ParseNodeSelector(s); err == nil {
			var pairs []string
			for k, v := range m {
				if strings.ContainsAny(k+v, "=, \t\n") {
					t.Fatalf("ParseNodeSelector(%q) kept a separator: %q=%q", s, k, v)
				}
				pairs = append(pairs, k+"="+v)
			}
			again, err := settings.ParseNodeSelector(strings.Join(pairs, ","))
			if err != nil || !cmp.Equal(m, again) {
				t.Fatalf("ParseNodeSelector(%q) = %v does not re-parse: %v, %v", s, m, again, err)
			}
		}
		if img, err := settings.ParseKubeAgentImage(s); err == nil && strings.ContainsAny(img, "@ \t\n") {
			t.Fatalf("ParseKubeAgentImage(%q) accepted it", s)
		}
		if p, err := settings.ParseKubeconfig(s); err == nil && (strings.ContainsRune(p, 0) || !filepath.IsAbs(p)) {
			t.Fatalf("ParseKubeconfig(%q) accepted it", s)
		}
	})
}
