package cli

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/hutchsandbox/hutch/internal/agentbin"
	"github.com/hutchsandbox/hutch/internal/kubeagent"
	"github.com/hutchsandbox/hutch/internal/testenv"
)

// kubeAgentEnv is an env whose agent binary is a static hutch build, and
// that binary.
func kubeAgentEnv(t *testing.T) (*env, agentbin.Binary) {
	t.Helper()
	b, err := agentbin.Locate(testenv.HutchBinary(t))
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t)
	e.extra = map[string]string{"HUTCH_AGENT_BINARY": b.Path}
	return e, b
}

// checkAgentArchive reads an agent image archive back and checks its tag
// and the binary it holds.
func checkAgentArchive(t *testing.T, path, ref string, b agentbin.Binary) {
	t.Helper()
	tag, err := name.NewTag(ref, name.WeakValidation)
	if err != nil {
		t.Fatal(err)
	}
	img, err := tarball.ImageFromPath(path, &tag)
	if err != nil {
		t.Fatalf("reading %s as image %s: %v", path, ref, err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Config.Labels[kubeagent.LabelSHA256]; got != b.SHA256 {
		t.Errorf("image label %s = %q, want the agent's %s", kubeagent.LabelSHA256, got, b.SHA256)
	}
}

func mib(t *testing.T, path string) string {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%.1f MiB", float64(fi.Size())/(1<<20))
}

func TestKubeAgentImage(t *testing.T) {
	e, b := kubeAgentEnv(t)
	ref := "hutch-agent:sha-" + b.SHA256[:16]
	t.Run("default_output", func(t *testing.T) {
		dir := t.TempDir()
		t.Chdir(dir)
		out := e.ok("kube", "agent-image")
		path := filepath.Join(dir, "hutch-agent.tar")
		want := "Wrote " + ref + " to hutch-agent.tar (" + mib(t, path) + ").\n" +
			"Load it where the cluster's nodes find it:\n" +
			"  containerd:  ctr -n k8s.io images import hutch-agent.tar   (on every node)\n" +
			"  a registry:  docker load -i hutch-agent.tar\n" +
			"               docker tag " + ref + " <registry>/" + ref + "\n" +
			"               docker push <registry>/" + ref + "\n" +
			"               hutch sandbox settings sandbox.kube.agentImage <registry>/hutch-agent\n"
		if diff := cmp.Diff(want, out); diff != "" {
			t.Errorf("output (-want +got):\n%s", diff)
		}
		checkAgentArchive(t, path, ref, b)
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		if len(entries) != 1 {
			t.Errorf("%s holds %d entries, want only hutch-agent.tar (no temporary file left)", dir, len(entries))
		}
	})
	t.Run("repository", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "agent.tar")
		repo := "registry.example.com:5000/team/hutch-agent"
		out := e.ok("kube", "agent-image", "--repository", repo, "--output", path)
		ref := repo + ":sha-" + b.SHA256[:16]
		want := "Wrote " + ref + " to " + path + " (" + mib(t, path) + ").\n" +
			"Load it where the cluster's nodes find it:\n" +
			"  containerd:  ctr -n k8s.io images import " + path + "   (on every node)\n" +
			"  a registry:  docker load -i " + path + "\n" +
			"               docker push " + ref + "\n" +
			"Then point kube: pods at it: hutch sandbox settings sandbox.kube.agentImage " + repo + "\n"
		if diff := cmp.Diff(want, out); diff != "" {
			t.Errorf("output (-want +got):\n%s", diff)
		}
		checkAgentArchive(t, path, ref, b)
	})
	t.Run("stdout", func(t *testing.T) {
		out, errOut, code := e.run("", "kube", "agent-image", "-o", "-")
		if code != 0 {
			t.Fatalf("exit %d, stderr %s", code, errOut)
		}
		path := filepath.Join(t.TempDir(), "agent.tar")
		if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
		checkAgentArchive(t, path, ref, b)
		if want := "Wrote " + ref + " to standard output (" + mib(t, path) + ").\n"; !strings.HasPrefix(errOut, want) {
			t.Errorf("stderr %q does not start with %q", errOut, want)
		}
		if !strings.Contains(errOut, "docker load -i <file>\n") {
			t.Errorf("stderr %q does not tell to load <file>", errOut)
		}
	})
	t.Run("replaces", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "agent.tar")
		if err := os.WriteFile(path, []byte("an older archive"), 0o644); err != nil {
			t.Fatal(err)
		}
		e.ok("kube", "agent-image", "-o", path)
		checkAgentArchive(t, path, ref, b)
	})
}

func TestKubeAgentImage_Refusals(t *testing.T) {
	dir := t.TempDir()
	dynamic := filepath.Join(dir, "not-elf")
	if err := os.WriteFile(dynamic, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		agent string
		args  []string
		code  int
		want  string
	}{
		{"tagged_repository", "", []string{"--repository", "hutch-agent:v1"}, 1,
			`hutch: Agent image "hutch-agent:v1" must not have a tag; the tag is derived from the agent's hash, so give the repository only, such as registry.example.com:5000/hutch-agent` + "\n"},
		{"no_output", "", []string{"--output", ""}, 2, "hutch: --output needs a file name, or - for standard output\n"},
		{"agent_not_elf", dynamic, nil, 1, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			e.extra = map[string]string{"HUTCH_AGENT_BINARY": tt.agent}
			out := filepath.Join(dir, tt.name+".tar")
			args := append([]string{"kube", "agent-image", "--output", out}, tt.args...)
			stdout, stderr, code := e.run("", args...)
			if code != tt.code || stdout != "" || (tt.want != "" && stderr != tt.want) || stderr == "" {
				t.Errorf("exit %d, stdout %q, stderr %q; want %d, nothing, %q", code, stdout, stderr, tt.code, tt.want)
			}
			if _, err := os.Stat(out); !os.IsNotExist(err) {
				t.Errorf("a refused run left %s (stat: %v)", out, err)
			}
		})
	}
}

// TestAgent_InstallTo runs the hidden `hutch agent --install-to` in
// process: the executable it copies is the test binary.
func TestAgent_InstallTo(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	self, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(self)
	digest := hex.EncodeToString(sum[:])
	e := newEnv(t)

	t.Run("installs", func(t *testing.T) {
		dest := filepath.Join(t.TempDir(), "hutch-bin", "hutch")
		stdout, stderr, code := e.run("", "agent", "--install-to", dest, "--sha256", digest)
		if code != 0 || stdout != "" || stderr != "" {
			t.Fatalf("exit %d, stdout %q, stderr %q; want 0 and no output", code, stdout, stderr)
		}
		got, err := os.ReadFile(dest)
		if err != nil || !bytes.Equal(got, self) {
			t.Errorf("%s is not a copy of the executable (read error %v)", dest, err)
		}
	})
	wrong := strings.Repeat("ab", 32)
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"stale", []string{"--install-to", "DEST", "--sha256", wrong}, 1,
			"hutch: This agent image holds hutch " + digest[:16] + ", but the daemon runs abababababababab: build the matching image with `hutch kube agent-image` and load or push it\n"},
		{"with_listen", []string{"--install-to", "DEST", "--listen", "/tmp/x.sock"}, 2,
			"hutch: hutch agent --install-to only installs the binary: drop --listen, --stdio, --guest and --init\n"},
		{"with_stdio", []string{"--install-to", "DEST", "--stdio"}, 2,
			"hutch: hutch agent --install-to only installs the binary: drop --listen, --stdio, --guest and --init\n"},
		{"with_guest", []string{"--install-to", "DEST", "--guest"}, 2,
			"hutch: hutch agent --install-to only installs the binary: drop --listen, --stdio, --guest and --init\n"},
		{"with_init", []string{"--install-to", "DEST", "--init"}, 2,
			"hutch: hutch agent --install-to only installs the binary: drop --listen, --stdio, --guest and --init\n"},
		{"empty_path", []string{"--install-to", ""}, 2, "hutch: hutch agent --install-to needs the path to copy the binary to\n"},
		{"sha256_alone", []string{"--stdio", "--sha256", digest}, 2,
			"hutch: hutch agent --sha256 checks the binary that --install-to installs: add --install-to <path>\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			args := []string{"agent"}
			for _, a := range tt.args {
				args = append(args, strings.ReplaceAll(a, "DEST", filepath.Join(dir, "hutch")))
			}
			stdout, stderr, code := e.run("", args...)
			if code != tt.code || stdout != "" || stderr != tt.want {
				t.Errorf("exit %d, stdout %q, stderr %q; want %d, nothing, %q", code, stdout, stderr, tt.code, tt.want)
			}
			entries, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			for _, ent := range entries {
				t.Errorf("a refused install left %s", ent.Name())
			}
		})
	}
}
