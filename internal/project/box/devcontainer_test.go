package box_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hutchsandbox/hutch/internal/project"
	"github.com/hutchsandbox/hutch/internal/testenv"
)

// TestCLI_DevcontainerEnvAndPath: what a real devcontainer.json sets
// reaches commands as the spec says. remoteEnv is each command's, never
// the container's (a secret from ${localEnv:...} must not show in
// `docker inspect`), and ${containerEnv:PATH} in it is the container's
// PATH. The image's PATH survives the login shell commands run in,
// although Debian's profile sets PATH from scratch.
func TestCLI_DevcontainerEnvAndPath(t *testing.T) {
	t.Parallel()
	slow(t)
	f := newFixture(t, nil)
	f.writeSettings(t, map[string]any{project.KeyImage: testenv.DebianGitImage(t, f.cli, f.debianBase), project.KeyUser: "root"})
	const secret = "s3cret-from-the-host"
	f.extraEnv = []string{"HUTCH_TEST_TOKEN=" + secret}
	bin := filepath.Join(f.project, "tools")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "project-tool"), []byte("#!/bin/sh\necho tool ran\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	dc := filepath.Join(f.project, ".devcontainer", "devcontainer.json")
	if err := os.MkdirAll(filepath.Dir(dc), 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(body string) {
		t.Helper()
		if err := os.WriteFile(dc, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		f.mustHutch(t, "trust")
	}
	write(`{
  "containerEnv": {"PATH": "${containerWorkspaceFolder}/tools:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
  "remoteEnv": {"TOKEN": "${localEnv:HUTCH_TEST_TOKEN}", "EXTENDED": "${containerEnv:PATH}:/opt/more"},
  "shutdownAction": "none"
}`)
	f.mustHutch(t, "up")

	if out, _ := f.mustHutch(t, "exec", "--", "project-tool"); out != "tool ran\n" {
		t.Errorf("a tool on the container's PATH, run through the login shell: %q", out)
	}
	out, _ := f.mustHutch(t, "exec", "--", "sh", "-c", `echo "[$TOKEN]"; echo "[$EXTENDED]"`)
	want := "[" + secret + "]\n[" + f.project + "/tools:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/opt/more]\n"
	if out != want {
		t.Errorf("remoteEnv in a command:\n got %q\nwant %q", out, want)
	}
	in := f.inspect(t, f.name)
	for _, kv := range in.Container.Config.Env {
		if strings.Contains(kv, secret) || strings.HasPrefix(kv, "TOKEN=") || strings.HasPrefix(kv, "EXTENDED=") {
			t.Errorf("remoteEnv reached the container's configuration: %s", kv)
		}
	}

	// A mount source the file names that does not exist is the file's to
	// fix, and the error says so.
	write(`{"mounts": ["type=bind,source=` + filepath.Join(f.home, "no-such-dir") + `,target=/data"], "shutdownAction": "none"}`)
	_, errOut, code := f.hutch(t, "rebuild")
	if code == 0 || !strings.Contains(errOut, "does not exist (mount at /data, from "+dc+"); create it or remove the mount from "+dc+".") {
		t.Errorf("rebuild with a missing mount source: exit %d\n%s", code, errOut)
	}
}

// TestCLI_RefusedDevcontainerStatusDown: a trusted devcontainer.json the
// sandbox refuses (it mounts the engine's socket) stops up, but not
// status, stop or down, which say why it is not applied.
func TestCLI_RefusedDevcontainerStatusDown(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	f.mustHutch(t, "up")
	dc := filepath.Join(f.project, ".devcontainer.json")
	if err := os.WriteFile(dc, []byte(`{"mounts": ["source=/var/run/docker.sock,target=/var/run/docker.sock,type=bind"]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	f.mustHutch(t, "trust")
	if _, errOut, code := f.hutch(t, "up"); code == 0 || !strings.Contains(errOut, "docker.sock") {
		t.Errorf("up with a refused file: exit %d\n%s", code, errOut)
	}
	out, _ := f.mustHutch(t, "status")
	if !strings.Contains(out, dc+" is not applied: ") || !strings.Contains(out, "(running)") {
		t.Errorf("status with a refused file:\n%s", out)
	}
	if out, _ := f.mustHutch(t, "down"); !strings.Contains(out, "Removed "+f.name) {
		t.Errorf("down with a refused file: %q", out)
	}
}
