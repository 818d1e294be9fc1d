package box_test

import (
	"context"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hutchsandbox/hutch/internal/engine"
	"github.com/hutchsandbox/hutch/internal/events"
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
	// What the commands changed is in the event log, as the CLI's, with
	// the user who ran them.
	me, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	evs, err := events.Open(f.state).Last(20)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range evs {
		got = append(got, strings.Join([]string{e.Surface, e.Who, e.Action, e.Target}, " "))
	}
	want := []string{
		"cli " + me.Username + " runtime.created " + f.name,
		"cli " + me.Username + " project.trust " + f.project,
		"cli " + me.Username + " runtime.removed " + f.name,
	}
	if !slices.Equal(got, want) {
		t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestCLI_DevcontainerLifecycle: the lifecycle commands of the file and
// of the image's devcontainer.metadata run in the sandbox at the spec's
// moments, once the file is trusted: the create hooks once per
// container (image entries before the file's, an object's commands side
// by side), postStartCommand at every start, initializeCommand never
// (it is the host's). What the image's metadata sets reaches commands.
// A failing command is an error that says what failed, and does not
// hold up the commands that follow.
func TestCLI_DevcontainerLifecycle(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	img := "hutch-test-" + strings.ToLower(testenv.Name(t)) + ":1"
	// As the official images are built: the label's containerEnv is
	// in the image's ENV too, ${PATH} expanded there.
	label := `[{"remoteEnv": {"FROM_IMAGE_REMOTE": "yes"}, "containerEnv": {"FROM_IMAGE_ENV": "yes", "PATH": "/opt/image/bin:${PATH}"},` +
		` "postCreateCommand": "echo image-post-create >> \"${LOG:-/dev/null}\""}]`
	dockerfile := "FROM " + f.busybox + "\nENV FROM_IMAGE_ENV=yes PATH=/opt/image/bin:${PATH}\nLABEL devcontainer.metadata='" + label + "'\n"
	if err := engine.BuildDockerfile(context.Background(), f.cli, []byte(dockerfile), img, nil, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		testenv.RemoveImage(t, f.cli, img)
	})
	f.writeSettings(t, map[string]any{project.KeyImage: img, project.KeyUser: "root"})
	hostMarker := filepath.Join(t.TempDir(), "initialize-ran")
	logFile := filepath.Join(f.project, "lifecycle.log")
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
  "containerEnv": {"LOG": "${containerWorkspaceFolder}/lifecycle.log"},
  "initializeCommand": "touch ` + hostMarker + `",
  "onCreateCommand": "echo on-create >> \"$LOG\"",
  "postCreateCommand": {"one": "echo file-post-create-one >> \"$LOG\"", "two": ["sh", "-c", "echo file-post-create-two >> \"$LOG\"; echo shown"]},
  "postStartCommand": ["sh", "-c", "echo post-start >> \"$LOG\""],
  "shutdownAction": "none"
}`)
	_, errOut := f.mustHutch(t, "up")
	for _, want := range []string{
		"has an initializeCommand, which runs on the host",
		"Running postCreateCommand from the image's devcontainer.metadata…",
		"Running postCreateCommand from devcontainer.json…",
		"[two] shown",
	} {
		if !strings.Contains(errOut, want) {
			t.Errorf("up does not show %q:\n%s", want, errOut)
		}
	}
	readLog := func() []string {
		t.Helper()
		data, err := os.ReadFile(logFile)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Fields(string(data))
		// The two commands of one entry run at once: their order is
		// the scheduler's.
		for i := 0; i+1 < len(lines); i++ {
			if lines[i] == "file-post-create-two" && lines[i+1] == "file-post-create-one" {
				lines[i], lines[i+1] = lines[i+1], lines[i]
			}
		}
		return lines
	}
	want := []string{"on-create", "image-post-create", "file-post-create-one", "file-post-create-two", "post-start"}
	if got := readLog(); !slices.Equal(got, want) {
		t.Errorf("lifecycle order:\n got %v\nwant %v", got, want)
	}
	if _, err := os.Stat(hostMarker); err == nil {
		t.Errorf("initializeCommand ran on the host")
	}
	if out, _ := f.mustHutch(t, "exec", "--", "sh", "-c", `echo "[$FROM_IMAGE_REMOTE][$FROM_IMAGE_ENV]"; echo "$PATH"`); !strings.HasPrefix(out, "[yes][yes]\n/opt/image/bin:/") || strings.Contains(out, "${PATH}") {
		t.Errorf("the image's remoteEnv and containerEnv in a command: %q", out)
	}
	if in := f.inspect(t, f.name); slices.Contains(in.Container.Config.Env, "FROM_IMAGE_REMOTE=yes") {
		t.Errorf("the image's remoteEnv is in the container's configuration")
	}

	// A warm command runs nothing again; a start runs postStartCommand
	// only.
	f.mustHutch(t, "exec", "--", "true")
	f.mustHutch(t, "stop")
	f.mustHutch(t, "up")
	if got := readLog(); !slices.Equal(got, append(want, "post-start")) {
		t.Errorf("after a restart: %v", got)
	}

	// A failing create command: up says which and how; the next command
	// is not held up by it.
	write(`{"postCreateCommand": "echo before; exit 3", "shutdownAction": "none"}`)
	_, errOut, code := f.hutch(t, "rebuild")
	if code == 0 || !strings.Contains(errOut, "The postCreateCommand from devcontainer.json (echo before; exit 3) exited with 3.") || !strings.Contains(errOut, "before") {
		t.Errorf("rebuild with a failing postCreateCommand: exit %d\n%s", code, errOut)
	}
	if out, _ := f.mustHutch(t, "exec", "--", "echo", "fine"); out != "fine\n" {
		t.Errorf("a command after the failed create hook: %q", out)
	}
}

// TestCLI_DevcontainerLifecycleHostile plays an agent that edited the
// scripts a trusted devcontainer.json's lifecycle commands run (they live
// in the checkout, out of trust's reach): one hangs, a process it starts
// in a session of its own keeps the output open, and another writes a
// long line without a newline. up must end after sandbox-lifecycle-timeout
// with the reason, kill the command, keep hutch's memory bounded (the
// long line is cut), and leave the sandbox usable.
func TestCLI_DevcontainerLifecycleHostile(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	f.writeSettings(t, map[string]any{project.KeyImage: f.busybox, project.KeyUser: "root", project.KeyLifecycle: "3s"})
	dc := filepath.Join(f.project, ".devcontainer", "devcontainer.json")
	if err := os.MkdirAll(filepath.Dir(dc), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dc, []byte(`{
  "postStartCommand": {
    "hang": "setsid sleep 3600 & exec sleep 3601",
    "spam": "head -c 20000 /dev/zero | tr '\\0' x"
  }
}`), 0o644); err != nil {
		t.Fatal(err)
	}
	f.mustHutch(t, "trust")
	_, errOut, code := f.hutch(t, "up")
	if code == 0 {
		t.Fatalf("up succeeded past a hanging postStartCommand:\n%s", errOut)
	}
	if want := "The postStartCommand from devcontainer.json (setsid sleep 3600 & exec sleep 3601) was still running after 3s (sandbox-lifecycle-timeout) and was stopped."; !strings.Contains(errOut, want) {
		t.Errorf("up does not say %q:\n%s", want, errOut)
	}
	spam := 0
	for _, line := range strings.Split(errOut, "\n") {
		if rest, ok := strings.CutPrefix(line, "[spam] "); ok {
			spam += len(rest)
			if len(rest) > 4096 {
				t.Errorf("a line of %d bytes was held whole", len(rest))
			}
		}
	}
	if spam != 20000 {
		t.Errorf("the long line's pieces hold %d bytes, want 20000", spam)
	}
	// The sandbox is up, and the command was killed. What it left in a
	// session of its own runs on, as one started with exec would; it
	// kept the output open, and up returned all the same.
	out, _ := f.mustHutch(t, "exec", "--", "sh", "-c", "ps -o args | grep -c '^sleep 3601' || true")
	if strings.TrimSpace(out) != "0" {
		t.Errorf("the timed-out command still runs: %q", out)
	}
}
